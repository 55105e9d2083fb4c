"""The client connection's I/O shells against a real broker: the blocking one and the
asyncio one negotiate versions and log in with SASL PLAIN over plain TCP and over TLS;
a mechanism the listener lacks or a wrong password is a ``SaslLoginError``."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from security.certs import write_certificates
from tickwheel.protocol import (
    ApiKey,
    AsyncClient,
    BlockingClient,
    SaslLoginError,
    VersionRange,
)
from tickwheel.security import PlainClient, ScramClient
from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
USER, PASSWORD = "alice", "alice-secret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";'
)
METADATA = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


@dataclass(frozen=True)
class Secured:
    """A broker with a SASL_PLAINTEXT and a SASL_SSL listener (PLAIN user alice), and a
    client TLS context that trusts it."""

    broker: BackgroundBroker
    tls: ssl.SSLContext


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    certificates = write_certificates(tmp_path_factory.mktemp("certs"))
    config = BrokerConfig.from_properties(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("logs")),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            **certificates.broker_properties(),
        }
    )
    with BackgroundBroker(config) as running:
        yield Secured(running, ssl.create_default_context(cafile=str(certificates.ca)))


def _address(broker: BackgroundBroker, listener: str) -> tuple[str, int]:
    endpoint = broker.endpoint(listener)
    return endpoint.host, endpoint.port


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_the_blocking_client_logs_in_and_asks(secured: Secured, listener: str) -> None:
    tls = secured.tls if listener == "SASL_SSL" else None
    client = BlockingClient(
        *_address(secured.broker, listener),
        client_id="shell-test",
        timeout_s=TIMEOUT_S,
        ssl_context=tls,
    )
    try:
        client.ask_versions()
        assert client.protocol.version(ApiKey.METADATA, VersionRange(0, 99)) == 12
        assert client.login(PlainClient(USER, PASSWORD), peer="the broker") == 0
        version = client.protocol.version(ApiKey.METADATA, VersionRange(1, 12))
        assert version == 12
        body = client.call(ApiKey.METADATA, version, METADATA)
    finally:
        client.close()
    assert [int(b.port) for b in body.brokers] == [_address(secured.broker, listener)[1]]


def test_a_wrong_password_is_a_login_error(secured: Secured) -> None:
    client = BlockingClient(
        *_address(secured.broker, "SASL_PLAINTEXT"), client_id="shell-test", timeout_s=TIMEOUT_S
    )
    try:
        with pytest.raises(SaslLoginError, match="SASL login to broker 0 failed: "):
            client.login(PlainClient(USER, "wrong"), peer="broker 0")
    finally:
        client.close()


def test_a_mechanism_the_listener_lacks_is_refused(secured: Secured) -> None:
    client = BlockingClient(
        *_address(secured.broker, "SASL_PLAINTEXT"), client_id="shell-test", timeout_s=TIMEOUT_S
    )
    try:
        with pytest.raises(
            SaslLoginError,
            match=(
                r"broker 0 refused SASL mechanism SCRAM-SHA-512 "
                r"\(unsupported_sasl_mechanism; it offers \['PLAIN', 'SCRAM-SHA-256'\]\)"
            ),
        ):
            client.login(ScramClient("SCRAM-SHA-512", USER, PASSWORD), peer="broker 0")
    finally:
        client.close()


@pytest.mark.asyncio
async def test_the_asyncio_client_logs_in_over_tls_and_asks(secured: Secured) -> None:
    client = await AsyncClient.open(
        *_address(secured.broker, "SASL_SSL"), client_id="shell-test", ssl_context=secured.tls
    )
    try:
        assert await client.login(PlainClient(USER, PASSWORD), peer="the broker") == 0
        answer = await client.call(ApiKey.API_VERSIONS, 0, {})
        body = await client.call(ApiKey.METADATA, 12, METADATA)
    finally:
        await client.close()
    assert answer.error_code == ErrorCode.none
    assert client.protocol.version(ApiKey.FETCH, VersionRange(4, 12)) == 12
    assert body.cluster_id is not None
