"""TLS, SASL and ACLs together, through the real clients, on one broker.

The broker listens on PLAINTEXT (loopback, ``User:ANONYMOUS``) and on SASL_SSL (PLAIN with
admin, alice and bob from the listener's JAAS line, SCRAM-SHA-256 and SCRAM-SHA-512 with
credentials made through the admin API), and runs Kafka's ACL authorizer with
``super.users=User:admin``. confluent-kafka, kafka-python and aiokafka log in with every
mechanism over TLS and produce and consume at exact offsets; a SCRAM user created by the
super user logs in; a user without ACLs may neither create users nor ACLs; ACLs for the
SASL principals allow and deny produce, group consumption, topic creation under a
prefix and transactions, DENY beats an ALLOW for ``User:*``, Metadata hides what the
principal may not describe, and the audit line names the SASL principal. A wrong
password is an authentication error, and a PLAINTEXT client on the SASL_SSL port is
disconnected while the others go on.

One broker serves the whole module: each test uses its own topics, groups and
transactional ids, and ACLs that name them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import aiokafka
import kafka
import pytest
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from security.certs import Certificates, write_certificates
from tickwheel.protocol import ApiKey
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.security import AUTHORIZER_LOGGER
from tickwheel.server import BackgroundBroker, BrokerConfig

from .acls import FAST_CLIENT, acl, consume_one, create_acls, create_topics, produce
from .sasl import (
    ADMIN,
    ADMIN_PASSWORD,
    ALICE,
    ALICE_PASSWORD,
    BOB,
    BOB_PASSWORD,
    PLAIN_JAAS,
    TIMEOUT_S,
    auth_error,
    client_config,
    create_scram_user,
)
from .wire import WireClient

pytestmark = pytest.mark.integration

SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
MECHANISMS = ["PLAIN", *SCRAMS]
PASSWORDS = {ADMIN: ADMIN_PASSWORD, ALICE: ALICE_PASSWORD, BOB: BOB_PASSWORD}
API_VERSIONS = ApiKey.API_VERSIONS
RECORDS = 5
CLIENTS_PREFIX = "clients-"
"""alice may do anything with topics and groups named so (granted by the fixture)."""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return write_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, certificates: Certificates
) -> Iterator[BackgroundBroker]:
    """The module's broker, with alice's SCRAM credentials and her ``clients-`` ACLs."""
    config = BrokerConfig.from_properties(
        {
            **TEST_BROKER_PROPERTIES,
            **certificates.broker_properties(),
            "log.dirs": str(tmp_path_factory.mktemp("logs")),
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN}",
            "auto.create.topics.enable": "false",
        }
    )
    with BackgroundBroker(config) as running:
        servers = str(running.endpoint("SASL_SSL"))
        tls = certificates.client_properties("SASL_SSL")
        for mechanism in SCRAMS:
            create_scram_user(servers, ALICE, ALICE_PASSWORD, mechanism, settings=tls)
        admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD, tls))
        create_acls(
            admin,
            *(
                acl(
                    resource,
                    CLIENTS_PREFIX,
                    AclOperation.ALL,
                    pattern=ResourcePatternType.PREFIXED,
                    principal=f"User:{ALICE}",
                )
                for resource in (ResourceType.TOPIC, ResourceType.GROUP)
            ),
        )
        yield running


@pytest.fixture(scope="module")
def servers(broker: BackgroundBroker) -> str:
    """The SASL_SSL listener's host:port."""
    return str(broker.endpoint("SASL_SSL"))


@pytest.fixture(scope="module")
def admin(servers: str, certificates: Certificates) -> AdminClient:
    """The super user's AdminClient over SASL_SSL."""
    return AdminClient(login(servers, certificates, ADMIN))


def login(
    servers: str, certificates: Certificates, user: str, mechanism: str = "PLAIN"
) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` on the SASL_SSL listener."""
    tls = certificates.client_properties("SASL_SSL")
    return {**client_config(servers, mechanism, user, PASSWORDS[user], tls), **FAST_CLIENT}


def error_code(raised: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(raised.value.args[0].code())


def values(prefix: str) -> list[bytes]:
    return [b"%s-%d" % (prefix.encode(), i) for i in range(RECORDS)]


# -- every client, every mechanism, over TLS ---------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_over_sasl_ssl(
    servers: str, certificates: Certificates, admin: AdminClient, mechanism: str
) -> None:
    config = login(servers, certificates, ALICE, mechanism)
    topic = f"{CLIENTS_PREFIX}ck-{mechanism}"
    create_topics(admin, topic)
    producer = Producer(config)
    offsets: list[int] = []
    for value in values(topic):
        producer.produce(
            topic, value, partition=0, on_delivery=lambda e, m: offsets.append(e or m.offset())
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert offsets == list(range(RECORDS))
    consumer = Consumer({**config, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(received) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                received.append((message.offset(), message.value() or b""))
    finally:
        consumer.close()
    assert received == list(enumerate(values(topic)))


def kafka_python_settings(
    servers: str, certificates: Certificates, mechanism: str
) -> dict[str, Any]:
    return {
        "bootstrap_servers": servers,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(certificates.ca),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": ALICE,
        "sasl_plain_password": ALICE_PASSWORD,
    }


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_over_sasl_ssl(
    servers: str, certificates: Certificates, admin: AdminClient, mechanism: str
) -> None:
    settings = kafka_python_settings(servers, certificates, mechanism)
    topic = f"{CLIENTS_PREFIX}kp-{mechanism}"
    create_topics(admin, topic)
    producer = kafka.KafkaProducer(**settings)
    try:
        offsets = [
            producer.send(topic, value, partition=0).get(TIMEOUT_S).offset
            for value in values(topic)
        ]
    finally:
        producer.close()
    assert offsets == list(range(RECORDS))
    consumer = kafka.KafkaConsumer(
        **settings, consumer_timeout_ms=int(TIMEOUT_S * 1000), enable_auto_commit=False
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        received = [(m.offset, m.value) for _, m in zip(range(RECORDS), consumer, strict=False)]
    finally:
        consumer.close()
    assert received == list(enumerate(values(topic)))


@pytest.mark.asyncio
@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_aiokafka_over_sasl_ssl(
    servers: str, certificates: Certificates, admin: AdminClient, mechanism: str
) -> None:
    settings: dict[str, Any] = {
        "bootstrap_servers": servers,
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=str(certificates.ca)),
        "sasl_mechanism": mechanism,
        "sasl_plain_username": ALICE,
        "sasl_plain_password": ALICE_PASSWORD,
    }
    topic = f"{CLIENTS_PREFIX}ak-{mechanism}"
    await asyncio.to_thread(create_topics, admin, topic)
    producer = aiokafka.AIOKafkaProducer(**settings, acks="all")
    await producer.start()
    try:
        offsets = [
            (await producer.send_and_wait(topic, value, partition=0)).offset
            for value in values(topic)
        ]
    finally:
        await producer.stop()
    assert offsets == list(range(RECORDS))
    consumer = aiokafka.AIOKafkaConsumer(**settings, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        received: list[tuple[int, bytes]] = []
        while len(received) < RECORDS:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), TIMEOUT_S)
            received += [(m.offset, m.value or b"") for ms in batches.values() for m in ms]
    finally:
        await consumer.stop()
    assert received == list(enumerate(values(topic)))


# -- SCRAM users through the admin API ---------------------------------------------------


def test_a_scram_user_created_by_the_super_user_logs_in(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    upsertion = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret"
    )
    admin.alter_user_scram_credentials([upsertion])["carol"].result(TIMEOUT_S)
    create_topics(admin, "carol-topic")
    create_acls(
        admin, acl(ResourceType.TOPIC, "carol-topic", AclOperation.WRITE, principal="User:carol")
    )
    tls = certificates.client_properties("SASL_SSL")
    carol = client_config(servers, "SCRAM-SHA-512", "carol", "carol-secret", tls)
    assert produce(servers, "carol-topic", **carol) is None


def test_a_user_without_acls_may_create_neither_users_nor_acls(
    servers: str, certificates: Certificates
) -> None:
    bob = AdminClient(login(servers, certificates, BOB))
    upsertion = UserScramCredentialUpsertion(
        "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"mallory-secret"
    )
    with pytest.raises(KafkaException) as refused:
        bob.alter_user_scram_credentials([upsertion])["mallory"].result(TIMEOUT_S)
    assert error_code(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        create_acls(bob, acl(ResourceType.TOPIC, "any", AclOperation.ALL, principal="User:bob"))
    assert error_code(refused) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


# -- ACLs for SASL principals -------------------------------------------------------------


def test_write_lets_alice_produce_and_not_bob(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "orders")
    create_acls(
        admin, acl(ResourceType.TOPIC, "orders", AclOperation.WRITE, principal="User:alice")
    )
    assert produce(servers, "orders", **login(servers, certificates, ALICE)) is None
    refused = produce(servers, "orders", **login(servers, certificates, BOB))
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_read_on_the_topic_and_the_group_lets_alice_consume_and_not_bob(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "grouped")
    assert produce(servers, "grouped", **login(servers, certificates, ADMIN)) is None
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "grouped", AclOperation.READ, principal="User:alice"),
        acl(ResourceType.GROUP, "alice-group", AclOperation.READ, principal="User:alice"),
        # bob may read the topic: only the group stops him.
        acl(ResourceType.TOPIC, "grouped", AclOperation.READ, principal="User:bob"),
    )
    alice = login(servers, certificates, ALICE)
    assert consume_one(servers, "alice-group", "grouped", **alice) == (b"value", 0)
    bob = login(servers, certificates, BOB)
    assert consume_one(servers, "bob-group", "grouped", **bob) == (
        None,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    )


def test_create_on_a_prefix_lets_alice_create_only_her_topics(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_acls(
        admin,
        acl(
            ResourceType.TOPIC,
            "alice-",
            AclOperation.CREATE,
            pattern=ResourcePatternType.PREFIXED,
            principal="User:alice",
        ),
    )
    alice = AdminClient(login(servers, certificates, ALICE))
    create_topics(alice, "alice-events")
    with pytest.raises(KafkaException) as refused:
        create_topics(alice, "team-events")
    assert error_code(refused) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alice-events" in admin.list_topics(timeout=TIMEOUT_S).topics


def test_a_transactional_producer_needs_write_on_its_transactional_id(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "ledger")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "ledger", AclOperation.WRITE, principal="User:alice"),
        acl(ResourceType.TRANSACTIONAL_ID, "alice-tx", AclOperation.WRITE, principal="User:alice"),
    )
    alice = login(servers, certificates, ALICE)
    allowed = Producer({**alice, "transactional.id": "alice-tx"})
    allowed.init_transactions(TIMEOUT_S)
    allowed.begin_transaction()
    allowed.produce("ledger", b"committed", partition=0)
    allowed.commit_transaction(TIMEOUT_S)
    refused = Producer({**alice, "transactional.id": "other-tx"})
    with pytest.raises(KafkaException) as error:
        refused.init_transactions(TIMEOUT_S)
    assert error_code(error) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # The committed record and its marker: offsets 0 and 1, read by the super user.
    reader = Consumer(
        {
            **login(servers, certificates, ADMIN),
            "group.id": "ledger-reader",
            "isolation.level": "read_committed",
        }
    )
    reader.assign([TopicPartition("ledger", 0, 0)])
    try:
        message = None
        deadline = time.monotonic() + TIMEOUT_S
        while message is None and time.monotonic() < deadline:
            message = reader.poll(0.2)
    finally:
        reader.close()
    assert message is not None
    assert (message.error(), message.offset(), message.value()) == (None, 0, b"committed")


def test_a_deny_for_alice_beats_an_allow_for_everyone(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "contested")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "contested", AclOperation.WRITE, principal="User:*"),
        acl(
            ResourceType.TOPIC,
            "contested",
            AclOperation.WRITE,
            AclPermissionType.DENY,
            principal="User:alice",
        ),
    )
    assert produce(servers, "contested", **login(servers, certificates, BOB)) is None
    refused = produce(servers, "contested", **login(servers, certificates, ALICE))
    assert refused is not None
    assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_the_super_user_needs_no_acl(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "super-topic")
    config = login(servers, certificates, ADMIN)
    assert produce(servers, "super-topic", **config) is None
    assert consume_one(servers, "super-group", "super-topic", **config) == (b"value", 0)
    assert "super-topic" in admin.list_topics(timeout=TIMEOUT_S).topics
    mine = AclBindingFilter(
        ResourceType.TOPIC,
        "super-topic",
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(mine).result(TIMEOUT_S) == []


def test_metadata_lists_to_bob_only_what_he_may_describe(
    broker: BackgroundBroker, servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    create_topics(admin, "visible-to-bob", "hidden-from-bob")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "visible-to-bob", AclOperation.DESCRIBE, principal="User:bob"),
    )
    bob = AdminClient(login(servers, certificates, BOB))
    listed = set(bob.list_topics(timeout=TIMEOUT_S).topics)
    assert "visible-to-bob" in listed
    assert "hidden-from-bob" not in listed
    assert {"visible-to-bob", "hidden-from-bob"} <= set(admin.list_topics(timeout=TIMEOUT_S).topics)
    # User:ANONYMOUS, on the PLAINTEXT listener, sees neither (only topics that an ACL
    # for User:* lets everyone describe).
    anonymous = AdminClient({"bootstrap.servers": str(broker.endpoint("PLAINTEXT"))})
    seen = set(anonymous.list_topics(timeout=TIMEOUT_S).topics)
    assert not seen & {"visible-to-bob", "hidden-from-bob"}


def test_the_audit_line_names_the_sasl_principal(
    servers: str,
    certificates: Certificates,
    admin: AdminClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    create_topics(admin, "audited")
    # DESCRIBE only: bob's producer finds the topic, then its Produce is refused.
    create_acls(
        admin, acl(ResourceType.TOPIC, "audited", AclOperation.DESCRIBE, principal="User:bob")
    )
    with caplog.at_level(logging.INFO, logger=AUTHORIZER_LOGGER):
        assert produce(servers, "audited", **login(servers, certificates, BOB)) is not None
    lines = [r.getMessage() for r in caplog.records if r.name == AUTHORIZER_LOGGER]
    assert (
        "Principal = User:bob is Denied operation = WRITE from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:audited for request = Produce with resourceRefCount = 1"
    ) in lines


# -- failed logins -----------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_is_an_authentication_error(
    servers: str, certificates: Certificates, mechanism: str
) -> None:
    tls = certificates.client_properties("SASL_SSL")
    error = auth_error(client_config(servers, mechanism, ALICE, "wrong", tls))
    assert error.code() == KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism " + mechanism in error.str()


def test_a_plaintext_client_on_the_sasl_ssl_port_is_disconnected(
    servers: str, certificates: Certificates, admin: AdminClient
) -> None:
    logged_in = Producer(login(servers, certificates, ALICE))
    topic = f"{CLIENTS_PREFIX}plaintext-intruder"
    create_topics(admin, topic)
    logged_in.produce(topic, b"before", partition=0)
    assert logged_in.flush(TIMEOUT_S) == 0
    stranger = WireClient(servers)
    try:
        stranger.send(API_VERSIONS, 0, {})
        assert stranger.read_frame() is None, "closed without an answer"
    finally:
        stranger.close()
    # librdkafka speaking PLAINTEXT gets nowhere: its record times out.
    never = produce(servers, topic, **{"message.timeout.ms": 1000})
    assert never is not None
    assert never.code() == KafkaError._MSG_TIMED_OUT
    logged_in.produce(topic, b"after", partition=0)
    assert logged_in.flush(TIMEOUT_S) == 0
