"""TLS listeners with the real clients: confluent-kafka, kafka-python and aiokafka over SSL,
each listener's own endpoints in Metadata, client certificates and their principal, a
PLAINTEXT client on a TLS listener, and settings that stop the broker at start.

Every test that reads the broker's log lines connects from a loopback address of its
own (127.0.0.N), as the broker limits its lines about a client per client host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiokafka
import kafka
import pytest
import trustme
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from security.certs import Certificates, write_certificates
from tickwheel.cluster import BrokerChannel, BrokerEndpoint
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError
from tickwheel.server.net._listener import TLS_HANDSHAKE_TIMEOUT_S, TLS_SHUTDOWN_TIMEOUT_S
from tickwheel.server.net._tls import inter_broker_ssl_context, listener_tls

from .wire import WireClient, encode_request

pytestmark = pytest.mark.integration

WAIT_S = 15.0
LISTENER_LOGGER = "tickwheel.server.net._listener"
BROKER_LOGGER = "tickwheel.server._broker"
# ApiVersions v0: what a PLAINTEXT client sends first.
API_VERSIONS = ApiKey.API_VERSIONS
LARGE_VALUE = os.urandom(300_000)  # one batch well above the 64 KiB sendfile threshold
MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return write_certificates(tmp_path_factory.mktemp("certs"))


def _config(log_dir: Path, certificates: Certificates, **properties: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            **certificates.broker_properties(),
            **{name.replace("_", "."): value for name, value in properties.items()},
        }
    )


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[BackgroundBroker]:
    """A broker with a PLAINTEXT and an SSL listener (client certificates requested)."""
    config = _config(tmp_path_factory.mktemp("logs"), certificates, ssl_client_auth="requested")
    with BackgroundBroker(config) as running:
        yield running


def _consume_all(servers: str, topic: str, count: int, settings: dict[str, str]) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"{topic}-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **settings,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def test_confluent_kafka_produces_and_consumes_over_ssl_exact_bytes(
    broker: BackgroundBroker, certificates: Certificates
) -> None:
    """A batch far above the sendfile threshold comes back through TLS byte for byte."""
    servers = str(broker.endpoint("SSL"))
    producer = Producer({"bootstrap.servers": servers, **certificates.client_properties()})
    for value in (b"small", LARGE_VALUE, b"after"):
        producer.produce("tls-confluent", value)
    assert producer.flush(WAIT_S) == 0
    values = _consume_all(servers, "tls-confluent", 3, certificates.client_properties())
    assert values == [b"small", LARGE_VALUE, b"after"]


def test_kafka_python_produces_and_consumes_over_ssl(
    broker: BackgroundBroker, certificates: Certificates
) -> None:
    servers = str(broker.endpoint("SSL"))
    tls: dict[str, Any] = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certificates.ca),
        "ssl_certfile": str(certificates.client_cert),
        "ssl_keyfile": str(certificates.client_key),
    }
    producer = kafka.KafkaProducer(bootstrap_servers=servers, **tls)
    try:
        for i in range(20):
            producer.send("tls-kafka-python", b"kp-%d" % i, partition=0)
        producer.send("tls-kafka-python", LARGE_VALUE, partition=0)
        producer.flush(WAIT_S)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=servers, enable_auto_commit=False, consumer_timeout_ms=10_000, **tls
    )
    try:
        consumer.assign([kafka.TopicPartition("tls-kafka-python", 0)])
        consumer.seek_to_beginning()
        values = [message.value for _, message in zip(range(21), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"kp-%d" % i for i in range(20)] + [LARGE_VALUE]


@pytest.mark.asyncio
async def test_aiokafka_produces_and_consumes_over_ssl(
    broker: BackgroundBroker, certificates: Certificates
) -> None:
    servers = str(broker.endpoint("SSL"))
    context = create_ssl_context(cafile=str(certificates.ca))
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=servers, security_protocol="SSL", ssl_context=context, acks="all"
    )
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait("tls-aiokafka", b"ak-%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=servers,
        security_protocol="SSL",
        ssl_context=context,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition("tls-aiokafka", 0)])
        await consumer.seek_to_beginning()
        values: list[bytes] = []
        while len(values) < 20:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), WAIT_S)
            values += [m.value for messages in batches.values() for m in messages if m.value]
    finally:
        await consumer.stop()
    assert values == [b"ak-%d" % i for i in range(20)]


def test_metadata_through_each_listener_names_that_listeners_endpoint(
    broker: BackgroundBroker, certificates: Certificates
) -> None:
    plaintext, tls = broker.endpoint("PLAINTEXT"), broker.endpoint("SSL")
    assert plaintext.port != tls.port
    for endpoint, settings in ((plaintext, {}), (tls, certificates.client_properties())):
        admin = AdminClient({"bootstrap.servers": str(endpoint), **settings})
        brokers = admin.list_topics(timeout=WAIT_S).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [(endpoint.host, endpoint.port)]


def test_a_plaintext_client_on_the_ssl_listener_is_disconnected_and_tls_clients_go_on(
    broker: BackgroundBroker, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    host = "127.0.0.31"
    tls = str(broker.endpoint("SSL"))
    admin = AdminClient({"bootstrap.servers": tls, **certificates.client_properties()})
    admin.list_topics(timeout=WAIT_S)
    for _ in range(3):
        client = WireClient(tls, source_host=host)
        try:
            client.send(API_VERSIONS, 0, {})
            assert client.read_frame() is None, "closed without an answer"
        finally:
            client.close()
    assert admin.list_topics(timeout=WAIT_S).brokers, "the TLS client is still served"
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == LISTENER_LOGGER and r.levelno == logging.WARNING and host in r.getMessage()
    ]
    assert len(lines) == 1, "one line for the three attempts"
    assert lines[0].startswith(f"TLS handshake with {host}:")
    assert "on listener SSL failed" in lines[0]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_required_client_certificates_refuse_clients_without_one_and_name_the_rest(
    tmp_path: Path, certificates: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=BROKER_LOGGER)
    config = _config(tmp_path, certificates, ssl_client_auth="required")
    with BackgroundBroker(config) as broker:
        servers = str(broker.endpoint("SSL"))
        anonymous = AdminClient({"bootstrap.servers": servers, **certificates.client_properties()})
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=3)
        alice = AdminClient(
            {"bootstrap.servers": servers, **certificates.client_properties(with_certificate=True)}
        )
        assert alice.list_topics(timeout=WAIT_S).brokers
    principals = [
        r.getMessage().rpartition(" as ")[2]
        for r in caplog.records
        if r.name == BROKER_LOGGER and r.getMessage().startswith("TLS connection from")
    ]
    # CN=alice,OU=eng,O=example mapped by RULE:^CN=([^,]+),.*$/$1/L.
    assert principals
    assert set(principals) == {"User:alice"}


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({"ssl.keystore.type": "JKS"}, "listener SSL: ssl.keystore.type=JKS.*convert"),
        ({"ssl.keystore.location": ""}, "listener SSL: a TLS listener needs a key store"),
        ({"ssl.keystore.location": "/nonexistent/broker.pem"}, "no key store at"),
        ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"}, "invalid rule"),
        ({"listener.name.ssl.ssl.client.auth": "maybe"}, "none, requested, required"),
    ],
)
def test_bad_tls_settings_stop_the_broker_at_start(
    tmp_path: Path, certificates: Certificates, properties: dict[str, str], problem: str
) -> None:
    config = BrokerConfig.from_properties(
        {
            **_config(tmp_path, certificates).as_properties(),
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            **properties,
        }
    )
    with pytest.raises(ConfigError, match=problem):
        BackgroundBroker(config).start()


def test_the_key_password_is_described_without_its_value(
    broker: BackgroundBroker, certificates: Certificates
) -> None:
    admin = AdminClient({"bootstrap.servers": str(broker.endpoint("PLAINTEXT"))})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(WAIT_S)
    password = configs["ssl.key.password"]
    assert password.is_sensitive
    assert password.value is None
    assert configs["ssl.keystore.location"].value == str(certificates.broker)


def test_a_sasl_ssl_listener_asks_for_certificates_only_when_told_by_name(
    tmp_path: Path, certificates: Certificates
) -> None:
    """KIP-684: SASL authenticates a SASL_SSL listener's clients; the broker-wide
    ssl.client.auth does not apply there, the listener's own does."""
    config = _config(
        tmp_path,
        certificates,
        listeners="SSL://127.0.0.1:0,SECURE://127.0.0.1:0,OTHER://127.0.0.1:0",
        listener_security_protocol_map="SSL:SSL,SECURE:SASL_SSL,OTHER:SASL_SSL",
        ssl_client_auth="required",
    )
    config = BrokerConfig.from_properties(
        {**config.as_properties(), "listener.name.other.ssl.client.auth": "requested"}
    )
    modes = {}
    for spec in config.listener_specs():
        tls = listener_tls(config, spec)
        assert tls is not None
        modes[spec.name] = tls.context.verify_mode
    assert modes == {
        "SSL": ssl.CERT_REQUIRED,
        "SECURE": ssl.CERT_NONE,
        "OTHER": ssl.CERT_OPTIONAL,
    }


def test_a_certificate_from_another_authority_is_refused(
    tmp_path: Path, certificates: Certificates
) -> None:
    stranger = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    stranger.private_key_pem.write_to_path(str(tmp_path / "mallory.key"))
    stranger.cert_chain_pems[0].write_to_path(str(tmp_path / "mallory.pem"))
    config = _config(tmp_path / "logs", certificates, ssl_client_auth="required")
    with BackgroundBroker(config) as broker:
        mallory = AdminClient(
            {
                "bootstrap.servers": str(broker.endpoint("SSL")),
                **certificates.client_properties(),
                "ssl.certificate.location": str(tmp_path / "mallory.pem"),
                "ssl.key.location": str(tmp_path / "mallory.key"),
            }
        )
        with pytest.raises(KafkaException):
            mallory.list_topics(timeout=3)


@pytest.mark.asyncio
async def test_the_inter_broker_channel_presents_the_broker_key_store(
    tmp_path: Path, certificates: Certificates
) -> None:
    """What followers, transaction markers and share-state requests use: a
    ``BrokerChannel`` over TLS with the inter-broker client context, accepted by a
    listener that requires a client certificate."""
    config = _config(
        tmp_path,
        certificates,
        inter_broker_listener_name="SSL",
        ssl_client_auth="required",
    )
    context = inter_broker_ssl_context(config)
    assert context is not None
    with BackgroundBroker(config) as strict:
        endpoint = strict.endpoint("SSL")
        channel = BrokerChannel(
            BrokerEndpoint(0, endpoint.host, endpoint.port, "SSL", "SSL"),
            client_id="tls-test",
            timeout_ms=int(WAIT_S * 1000),
            ssl_context=context,
        )
        try:
            body = await channel.request(API_VERSIONS, 0, {})
        finally:
            await channel.close()
    assert body.error_code == 0


def test_stopping_does_not_wait_for_clients_that_never_finish_their_handshake(
    tmp_path: Path, certificates: Certificates
) -> None:
    running = BackgroundBroker(_config(tmp_path, certificates)).start()
    endpoint = running.endpoint("SSL")
    with socket.create_connection((endpoint.host, endpoint.port), timeout=WAIT_S) as silent:
        # Accepted (the listener waits for its ClientHello) but never says anything.
        time.sleep(0.2)
        started = time.monotonic()
        running.stop()
        assert time.monotonic() - started < TLS_HANDSHAKE_TIMEOUT_S / 2
        assert silent.recv(1) == b""


def test_stopping_does_not_wait_for_a_silent_tls_client_to_answer_close_notify(
    tmp_path: Path, certificates: Certificates
) -> None:
    """A client that finished its handshake and then reads nothing never answers the
    broker's close_notify: the broker drops it after TLS_SHUTDOWN_TIMEOUT_S and stops
    cleanly, rather than waiting asyncio's 30 s and failing its thread."""
    running = BackgroundBroker(_config(tmp_path, certificates)).start()
    endpoint = running.endpoint("SSL")
    context = ssl.create_default_context(cafile=str(certificates.ca))
    with (
        socket.create_connection((endpoint.host, endpoint.port), timeout=WAIT_S) as raw,
        context.wrap_socket(raw, server_hostname=endpoint.host) as silent,
    ):
        # ApiVersions, so the broker holds a connection; its answer is never read.
        silent.sendall(encode_request(API_VERSIONS, 0, {}, correlation_id=1))
        time.sleep(0.2)
        started = time.monotonic()
        running.stop()
        assert time.monotonic() - started < TLS_SHUTDOWN_TIMEOUT_S + 3
