"""SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 through the real clients.

confluent-kafka, kafka-python and aiokafka log in and produce and consume; a wrong
password (or an unknown user) is an authentication error for the client, answered after
the broker's 100 ms delay; a client that speaks Kafka without logging in is disconnected
while a logged-in one goes on; SCRAM users created, described and deleted through
confluent-kafka's AdminClient survive a restart; librdkafka re-authenticates (KIP-368)
when sessions are short; the JAAS line is sensitive in DescribeConfigs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from pathlib import Path

import aiokafka
import aiokafka.errors
import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .sasl import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    SASL_PROPERTIES,
    TIMEOUT_S,
    auth_error,
    client_config,
    create_scram_user,
)
from .wire import WireClient

pytestmark = pytest.mark.integration

METADATA = ApiKey.METADATA
FAILED_AUTHENTICATION_DELAY_MS = 100
CLOCK_SLACK_MS = 2
SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return dict(SASL_PROPERTIES)


def _produce_and_consume(config: dict[str, object], topic: str) -> None:
    producer = Producer(config)
    producer.produce(topic, b"over sasl", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**config, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    message = None
    try:
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.2)
    finally:
        consumer.close()
    assert message is not None
    assert message.error() is None
    assert message.value() == b"over sasl"


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAMS])
def test_confluent_kafka_produces_and_consumes(
    tickwheel_broker: BackgroundBroker, mechanism: str
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    password = ALICE_PASSWORD
    if mechanism != "PLAIN":
        password = f"{mechanism}-secret"
        create_scram_user(servers, ALICE, password, mechanism)
    _produce_and_consume(client_config(servers, mechanism, ALICE, password), f"ck-{mechanism}")


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAMS])
def test_wrong_password_is_an_authentication_error(
    tickwheel_broker: BackgroundBroker, mechanism: str
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    if mechanism != "PLAIN":
        create_scram_user(servers, ALICE, ALICE_PASSWORD, mechanism)
    error = auth_error(client_config(servers, mechanism, ALICE, "wrong"))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism " + mechanism in error.str()
    # librdkafka says how long its request waited: the broker held the answer for
    # connection.failed.authentication.delay.ms (Kafka's 100 by default).
    waited = re.search(r"after (\d+)ms in state AUTH_REQ", error.str())
    assert waited is not None, error.str()
    assert int(waited[1]) >= FAILED_AUTHENTICATION_DELAY_MS - CLOCK_SLACK_MS
    # An unknown user is told the same thing.
    unknown = auth_error(client_config(servers, mechanism, "mallory", "wrong"))
    assert unknown.str().split("(after")[0] == error.str().split("(after")[0]


@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAMS])
def test_kafka_python_produces_and_consumes(
    tickwheel_broker: BackgroundBroker, mechanism: str
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    password = ALICE_PASSWORD
    if mechanism != "PLAIN":
        password = f"kp-{mechanism}"
        create_scram_user(servers, ALICE, password, mechanism)
    settings = {
        "bootstrap_servers": servers,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": ALICE,
        "sasl_plain_password": password,
    }
    topic = f"kp-{mechanism}"
    producer = kafka.KafkaProducer(**settings)
    try:
        producer.send(topic, b"kafka-python", partition=0).get(TIMEOUT_S)
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(
        **settings, consumer_timeout_ms=int(TIMEOUT_S * 1000), enable_auto_commit=False
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        message = next(iter(consumer))
    finally:
        consumer.close()
    assert message.value == b"kafka-python"


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", ["PLAIN", *SCRAMS])
async def test_aiokafka_produces_and_consumes(tmp_path: Path, mechanism: str) -> None:
    config = BrokerConfig.from_properties(
        {
            **SASL_PROPERTIES,
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    with BackgroundBroker(config) as broker:
        servers = broker.bootstrap_servers
        password = ALICE_PASSWORD
        if mechanism != "PLAIN":
            password = f"ak-{mechanism}"
            await asyncio.to_thread(create_scram_user, servers, ALICE, password, mechanism)
        settings = {
            "bootstrap_servers": servers,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": ALICE,
            "sasl_plain_password": password,
        }
        topic = f"ak-{mechanism}"
        producer = aiokafka.AIOKafkaProducer(**settings)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka", partition=0)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(**settings, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            message = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        finally:
            await consumer.stop()
        assert message.value == b"aiokafka"


def test_unauthenticated_client_is_disconnected_others_go_on(
    tickwheel_broker: BackgroundBroker,
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    logged_in = Producer(client_config(servers))
    logged_in.produce("before", b"1", partition=0)
    assert logged_in.flush(TIMEOUT_S) == 0
    stranger = WireClient(servers)
    try:
        stranger.send(
            METADATA,
            12,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert stranger.read_frame() is None, "a Metadata request before login closes"
    finally:
        stranger.close()
    # A PLAINTEXT client (librdkafka without SASL) gets nowhere either.
    errors: list[KafkaError] = []
    plaintext = Producer({"bootstrap.servers": servers, "error_cb": errors.append})
    plaintext.produce("before", b"never", partition=0)
    assert plaintext.flush(1.0) == 1
    logged_in.produce("before", b"2", partition=0)
    assert logged_in.flush(TIMEOUT_S) == 0


def test_scram_user_lifecycle_through_the_admin_client(tmp_path: Path) -> None:
    properties = {
        **SASL_PROPERTIES,
        "log.dirs": str(tmp_path),
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        servers = broker.bootstrap_servers
        create_scram_user(servers, "carol", "carol-secret", "SCRAM-SHA-512", iterations=8192)
        _produce_and_consume(
            client_config(servers, "SCRAM-SHA-512", "carol", "carol-secret"), "carol-1"
        )
        admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD))
        described = admin.describe_user_scram_credentials().result(TIMEOUT_S)
        (info,) = described["carol"].scram_credential_infos
        assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
        missing = admin.describe_user_scram_credentials(["nobody"])["nobody"]
        with pytest.raises(KafkaException) as raised:
            missing.result(TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    # The credential survives a restart (and the file holds no password).
    users_file = (tmp_path / "tickwheel-users.json").read_text()
    assert "carol-secret" not in users_file
    assert "stored_key=" in users_file
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        servers = broker.bootstrap_servers
        config = client_config(servers, "SCRAM-SHA-512", "carol", "carol-secret")
        _produce_and_consume(config, "carol-2")
        admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD))
        deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
        admin.alter_user_scram_credentials([deletion])["carol"].result(TIMEOUT_S)
        again = admin.alter_user_scram_credentials([deletion])["carol"]
        with pytest.raises(KafkaException) as raised:
            again.result(TIMEOUT_S)
        assert raised.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
        error = auth_error(config)
        assert error.code() == KafkaError._AUTHENTICATION
    assert ErrorCode.resource_not_found.value == KafkaError.RESOURCE_NOT_FOUND


def test_a_failed_users_file_write_keeps_the_old_credential(tmp_path: Path) -> None:
    """The file is written before the change applies: when it cannot be, the client is
    told UNKNOWN_SERVER_ERROR and the user's old password still logs in."""
    properties = {**SASL_PROPERTIES, "log.dirs": str(tmp_path)}
    users_file = tmp_path / "tickwheel-users.json"
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        servers = broker.bootstrap_servers
        create_scram_user(servers, "dave", "dave-old", "SCRAM-SHA-256")
        assert users_file.stat().st_mode & 0o777 == 0o600
        # A non-empty directory where the file goes: the atomic rename fails.
        users_file.unlink()
        (users_file / "blocker").mkdir(parents=True)
        # At the wire: confluent-kafka's future never resolves on UNKNOWN_SERVER_ERROR.
        assert _alter_as_admin(servers, "dave", b"dave-new") == ErrorCode.unknown_server_error
        old = client_config(servers, "SCRAM-SHA-256", "dave", "dave-old")
        AdminClient(old).list_topics(timeout=TIMEOUT_S)
        new = client_config(servers, "SCRAM-SHA-256", "dave", "dave-new")
        assert auth_error(new).code() == KafkaError._AUTHENTICATION


def _alter_as_admin(servers: str, user: str, password: bytes) -> ErrorCode:
    """Set ``user``'s SCRAM-SHA-256 password over a connection logged in as admin (PLAIN);
    the user's error code."""
    wire = WireClient(servers)
    try:
        assert wire.call(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        login = b"\0" + ADMIN.encode() + b"\0" + ADMIN_PASSWORD.encode()
        assert wire.call(36, 2, {"auth_bytes": login}).error_code == ErrorCode.none
        salt, iterations = b"salt-of-dave", 4096
        salted = hashlib.pbkdf2_hmac("sha256", password, salt, iterations)
        upsertion = {
            "name": user,
            "mechanism": 1,
            "iterations": iterations,
            "salt": salt,
            "salted_password": salted,
        }
        response = wire.call(51, 0, {"deletions": [], "upsertions": [upsertion]})
        (result,) = response.results
        return ErrorCode(result.error_code)
    finally:
        wire.close()


REAUTH_MS = 1500
REAUTH_RUN_S = 5.0


def test_librdkafka_reauthenticates_and_keeps_consuming(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With connections.max.reauth.ms small, librdkafka re-authenticates (KIP-368) on
    each connection before its session expires, and the consumer goes on."""
    caplog.set_level(logging.DEBUG, logger="tickwheel.server.apis._sasl")
    properties = {
        **SASL_PROPERTIES,
        "log.dirs": str(tmp_path),
        "offsets.topic.num.partitions": "1",
        "connections.max.reauth.ms": str(REAUTH_MS),
    }
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        config = client_config(broker.bootstrap_servers)
        producer = Producer(config)
        consumer = Consumer({**config, "group.id": "reauth", "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition("reauth", 0, 0)])
        sent = received = 0
        errors: list[str] = []
        deadline = time.monotonic() + REAUTH_RUN_S
        try:
            while time.monotonic() < deadline:
                producer.produce("reauth", b"%d" % sent, partition=0)
                producer.poll(0)
                sent += 1
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    received += 1
                elif message is not None:
                    errors.append(str(message.error()))
            assert producer.flush(TIMEOUT_S) == 0
            while received < sent and time.monotonic() < deadline + TIMEOUT_S:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    received += 1
        finally:
            consumer.close()
        assert errors == []
        assert received == sent
    reauthentications = [r for r in caplog.records if "re-authenticated" in r.getMessage()]
    assert len(reauthentications) >= 2


def test_the_jaas_line_is_sensitive_in_describe_configs(
    tickwheel_broker: BackgroundBroker,
) -> None:
    servers = tickwheel_broker.bootstrap_servers
    admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD))
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    (future,) = admin.describe_configs([resource]).values()
    entries = future.result(TIMEOUT_S)
    jaas = entries["sasl.jaas.config"]
    assert jaas.is_sensitive
    assert jaas.value is None
    assert entries["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.mark.asyncio
async def test_aiokafka_is_told_the_password_is_wrong(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = BrokerConfig.from_properties({**SASL_PROPERTIES, "log.dirs": str(tmp_path)})
    with BackgroundBroker(config) as broker:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username=ALICE,
            sasl_plain_password="wrong",
        )
        try:
            with pytest.raises(aiokafka.errors.KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()
    assert any("SaslAuthenticationFailed" in r.getMessage() for r in caplog.records)
