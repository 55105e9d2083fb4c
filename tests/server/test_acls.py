"""ACLs through the real clients: the ACL admin APIs, and produce, consume, group join,
topic creation, transactions and Metadata allowed and denied as Kafka's authorizer does.

Every connection here is PLAINTEXT, so every client is ``User:ANONYMOUS``; the broker
runs Kafka's ACL authorizer with no super user and ``allow.everyone.if.no.acl.found``
false, so a client may only do what an ACL for ``User:ANONYMOUS`` (or ``User:*``)
allows. Each test first grants itself ALTER on the cluster through the broker's ACL
store (the only way in when nobody may create ACLs yet), then works through the admin
APIs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ACLResourcePatternType as KPatternType
from kafka.admin import ResourcePattern as KResourcePattern
from kafka.admin import ResourceType as KResourceType

from tickwheel.security import AUTHORIZER_LOGGER
from tickwheel.security import AclOperation as Op
from tickwheel.security import ResourceType as Resource
from tickwheel.server import BackgroundBroker, BrokerConfig

from .acls import (
    ANONYMOUS,
    FAST_CLIENT,
    TIMEOUT_S,
    acl,
    consume_one,
    create_acls,
    create_topics,
    grant,
    produce,
)
from .wire import WireClient

pytestmark = pytest.mark.integration

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"authorizer.class.name": AUTHORIZER, "auto.create.topics.enable": "false"}


@pytest.fixture
def admin(tickwheel_broker: BackgroundBroker) -> AdminClient:
    grant(tickwheel_broker, Resource.CLUSTER, "kafka-cluster", Op.ALTER, Op.CREATE)
    return AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})


ANY_FILTER = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)

ANY_FILTER_FIELDS = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}
"""A DescribeAcls request's filter selecting every ACL (ANY is code 1)."""


# -- the ACL APIs ---------------------------------------------------------------------


def test_admin_client_creates_describes_and_deletes_acls(admin: AdminClient) -> None:
    literal = acl(ResourceType.TOPIC, "orders", AclOperation.WRITE)
    prefixed = acl(
        ResourceType.TOPIC,
        "ord",
        AclOperation.READ,
        AclPermissionType.DENY,
        ResourcePatternType.PREFIXED,
        principal="User:*",
    )
    create_acls(admin, literal, prefixed)
    bad = acl(ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER)
    with pytest.raises(KafkaException) as refused:
        create_acls(admin, bad)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "kafka-cluster" in refused.value.args[0].str()
    # Names a cluster cannot keep as znodes are refused on a single node too.
    for name in ("a/b", ".", ".."):
        with pytest.raises(KafkaException) as refused:
            create_acls(admin, acl(ResourceType.GROUP, name, AclOperation.READ))
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST

    described = admin.describe_acls(ANY_FILTER).result(TIMEOUT_S)
    assert literal in described
    assert prefixed in described
    match_orders = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert sorted(map(str, admin.describe_acls(match_orders).result(TIMEOUT_S))) == sorted(
        [str(literal), str(prefixed)]
    )
    only_prefixed = AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.PREFIXED,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = admin.delete_acls([only_prefixed]).values()
    assert deleted.result(TIMEOUT_S) == [prefixed]
    assert prefixed not in admin.describe_acls(ANY_FILTER).result(TIMEOUT_S)


def test_acl_apis_need_alter_and_describe_on_the_cluster(
    tickwheel_broker: BackgroundBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    with pytest.raises(KafkaException) as refused:
        create_acls(admin, acl(ResourceType.TOPIC, "t", AclOperation.READ))
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka hands a refused DescribeAcls to its caller as an empty list: ask raw.
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        described = wire.call(DESCRIBE_ACLS, 3, ANY_FILTER_FIELDS)
    finally:
        wire.close()
    assert described.error_code == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
    tickwheel_session_broker: BackgroundBroker,
) -> None:
    wire = WireClient(tickwheel_session_broker.bootstrap_servers)
    try:
        described = wire.call(DESCRIBE_ACLS, 3, ANY_FILTER_FIELDS)
        creation = {
            "resource_type": 2,
            "resource_name": "t",
            "resource_pattern_type": 3,
            "principal": ANONYMOUS,
            "host": "*",
            "operation": 3,
            "permission_type": 3,
        }
        created = wire.call(CREATE_ACLS, 3, {"creations": [creation]})
    finally:
        wire.close()
    assert described.error_code == KafkaError.SECURITY_DISABLED
    assert [r.error_code for r in created.results] == [KafkaError.SECURITY_DISABLED]


def test_a_filter_with_unknown_codes_is_an_invalid_request(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    grant(tickwheel_broker, Resource.CLUSTER, "kafka-cluster", Op.DESCRIBE)
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        described = wire.call(DESCRIBE_ACLS, 1, {**ANY_FILTER_FIELDS, "resource_type_filter": 42})
    finally:
        wire.close()
    assert described.error_code == KafkaError.INVALID_REQUEST


def test_kafka_python_admin_manages_acls(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    grant(tickwheel_broker, Resource.CLUSTER, "kafka-cluster", Op.DESCRIBE)
    client = KafkaAdminClient(bootstrap_servers=tickwheel_broker.bootstrap_servers)
    try:
        binding = ACL(
            principal=ANONYMOUS,
            host="*",
            operation=ACLOperation.READ,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=KResourcePattern(KResourceType.GROUP, "pay", KPatternType.PREFIXED),
        )
        created = client.create_acls([binding])
        assert created["failed"] == []
        group_filter = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(KResourceType.GROUP, None, KPatternType.ANY),
        )
        described, _error = client.describe_acls(group_filter)
        assert [(a.resource_pattern.resource_name, a.operation) for a in described] == [
            ("pay", ACLOperation.READ)
        ]
        ((_, deleted, _),) = client.delete_acls([group_filter])
        assert [(a.principal, a.resource_pattern.pattern_type) for a in deleted] == [
            (ANONYMOUS, KPatternType.PREFIXED)
        ]
    finally:
        client.close()


# -- requests allowed and denied ----------------------------------------------------------


def test_produce_needs_write_and_deny_wins(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "orders", "secret", "blocked")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "orders", AclOperation.WRITE),
        acl(ResourceType.TOPIC, "blocked", AclOperation.WRITE, principal="User:*"),
        acl(ResourceType.TOPIC, "blocked", AclOperation.ALL, AclPermissionType.DENY),
    )
    servers = tickwheel_broker.bootstrap_servers
    assert produce(servers, "orders") is None
    denied = produce(servers, "secret")
    assert denied is not None
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    blocked = produce(servers, "blocked")
    assert blocked is not None
    assert blocked.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_idempotent_producers_need_idempotent_write_or_write_on_a_topic(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "orders")
    servers = tickwheel_broker.bootstrap_servers
    refused = produce(servers, "orders", **{"enable.idempotence": True})
    assert refused is not None
    create_acls(admin, acl(ResourceType.TOPIC, "orders", AclOperation.WRITE))
    assert produce(servers, "orders", **{"enable.idempotence": True}) is None


def test_consume_needs_read_on_the_topic_and_the_group(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "orders", "secret")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "orders", AclOperation.ALL),
        acl(ResourceType.TOPIC, "secret", AclOperation.WRITE),
        acl(ResourceType.GROUP, "readers", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
    )
    servers = tickwheel_broker.bootstrap_servers
    assert produce(servers, "orders") is None
    assert produce(servers, "secret") is None
    assert consume_one(servers, "readers-1", "orders", **{"session.timeout.ms": 6000}) == (
        b"value",
        0,
    )
    assert consume_one(servers, "strangers", "orders") == (
        None,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    )
    assert consume_one(servers, "readers-2", "secret")[1] == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The consumer protocol (KIP-848): ConsumerGroupHeartbeat is authorized the same way.
    kip848 = {"group.protocol": "consumer"}
    assert consume_one(servers, "readers-3", "orders", **kip848) == (b"value", 0)
    assert consume_one(servers, "strangers", "orders", **kip848)[1] == (
        KafkaError.GROUP_AUTHORIZATION_FAILED
    )


def test_fetch_of_a_topic_without_read_is_refused(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "secret")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "secret", AclOperation.DESCRIBE),
        acl(ResourceType.GROUP, "g", AclOperation.READ),
    )
    consumer = Consumer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "g", **FAST_CLIENT}
    )
    consumer.assign([TopicPartition("secret", 0, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                assert message.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                return
    finally:
        consumer.close()
    raise AssertionError("the fetch was never refused")


def test_metadata_hides_the_topics_the_principal_may_not_describe(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "public-1", "public-2", "secret")
    create_acls(
        admin,
        acl(
            ResourceType.TOPIC,
            "public-",
            AclOperation.DESCRIBE,
            pattern=ResourcePatternType.PREFIXED,
        ),
    )
    listed = admin.list_topics(timeout=TIMEOUT_S)
    assert sorted(listed.topics) == ["public-1", "public-2"]
    asked = admin.list_topics(topic="secret", timeout=TIMEOUT_S)
    assert asked.topics["secret"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    described = admin.describe_topics(
        TopicCollection(["public-1"]), include_authorized_operations=True
    )["public-1"].result(TIMEOUT_S)
    assert described.authorized_operations == [AclOperation.DESCRIBE]
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        cluster = wire.call(60, 0, {"include_cluster_authorized_operations": True})
    finally:
        wire.close()
    # ALTER and CREATE granted by the fixture; ALTER implies DESCRIBE.
    operations = (AclOperation.ALTER, AclOperation.CREATE, AclOperation.DESCRIBE)
    assert cluster.cluster_authorized_operations == sum(1 << op.value for op in operations)
    # librdkafka asks for them through Metadata v10: the same answer.
    through_metadata = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert sorted(through_metadata.authorized_operations) == sorted(operations)


def test_topic_creation_needs_create_on_the_cluster_or_the_topic(
    tickwheel_broker: BackgroundBroker,
) -> None:
    grant(tickwheel_broker, Resource.CLUSTER, "kafka-cluster", Op.ALTER)
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    create_acls(
        admin,
        acl(
            ResourceType.TOPIC, "team-a.", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED
        ),
    )
    create_topics(admin, "team-a.orders")
    with pytest.raises(KafkaException) as refused:
        create_topics(admin, "team-b.orders")
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    create_acls(admin, acl(ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE))
    create_topics(admin, "team-b.orders")


def test_transactions_need_write_on_the_transactional_id(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "ledger")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "ledger", AclOperation.WRITE),
        acl(ResourceType.TRANSACTIONAL_ID, "tx-ok", AclOperation.WRITE),
    )
    servers = tickwheel_broker.bootstrap_servers
    allowed = Producer({"bootstrap.servers": servers, "transactional.id": "tx-ok", **FAST_CLIENT})
    allowed.init_transactions(TIMEOUT_S)
    allowed.begin_transaction()
    allowed.produce("ledger", b"committed")
    allowed.commit_transaction(TIMEOUT_S)
    refused = Producer({"bootstrap.servers": servers, "transactional.id": "tx-no", **FAST_CLIENT})
    with pytest.raises(KafkaException) as error:
        refused.init_transactions(TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_denials_are_audited_in_kafkas_form(
    tickwheel_broker: BackgroundBroker, admin: AdminClient, caplog: pytest.LogCaptureFixture
) -> None:
    create_topics(admin, "secret")
    # DESCRIBE only: the producer finds the topic, then its Produce is refused.
    create_acls(admin, acl(ResourceType.TOPIC, "secret", AclOperation.DESCRIBE))
    with caplog.at_level(logging.INFO, logger=AUTHORIZER_LOGGER):
        assert produce(tickwheel_broker.bootstrap_servers, "secret") is not None
    lines = [r.getMessage() for r in caplog.records if r.name == AUTHORIZER_LOGGER]
    assert (
        "Principal = User:ANONYMOUS is Denied operation = WRITE from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:secret for request = Produce with resourceRefCount = 1"
    ) in lines


# -- persistence --------------------------------------------------------------------------


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        }
    )
    kept = acl(ResourceType.GROUP, "g", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    with BackgroundBroker(config) as broker:
        grant(broker, Resource.CLUSTER, "kafka-cluster", Op.ALTER, Op.DESCRIBE)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        create_acls(admin, kept)
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = admin.describe_acls(ANY_FILTER).result(TIMEOUT_S)
    assert kept in described
    assert acl(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER) in described


def commit_offset(bootstrap_servers: str, group_id: str, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group_id})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def test_group_admin_sees_only_the_groups_the_principal_may_describe(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "orders")
    hidden_read = acl(ResourceType.GROUP, "hidden", AclOperation.READ)
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "orders", AclOperation.ALL),
        acl(ResourceType.GROUP, "visible", AclOperation.ALL),
        hidden_read,
    )
    servers = tickwheel_broker.bootstrap_servers
    commit_offset(servers, "visible", "orders")
    commit_offset(servers, "hidden", "orders")
    # Last: ALTER on the cluster implies DESCRIBE, which would list every group.
    cluster_filter = AclBindingFilter(
        ResourceType.BROKER,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    hidden_filter = AclBindingFilter(
        ResourceType.GROUP,
        "hidden",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for future in admin.delete_acls([cluster_filter, hidden_filter]).values():
        future.result(TIMEOUT_S)

    listed = admin.list_consumer_groups().result(TIMEOUT_S)
    assert [g.group_id for g in listed.valid] == ["visible"]
    described = admin.describe_consumer_groups(["visible", "hidden"])
    assert described["visible"].result(TIMEOUT_S).group_id == "visible"
    with pytest.raises(KafkaException) as refused:
        described["hidden"].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as not_deleted:
        admin.delete_consumer_groups(["hidden"])["hidden"].result(TIMEOUT_S)
    assert not_deleted.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def share_poll(bootstrap_servers: str, group_id: str, topic: str) -> tuple[bytes | None, int]:
    """Join share group ``group_id`` on ``topic`` and poll, producing a record every
    second (a share group starts at the latest offset), until a record or an error."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, **FAST_CLIENT})
    consumer = ShareConsumer({"bootstrap.servers": bootstrap_servers, "group.id": group_id})
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    produced_s = 0.0
    try:
        while time.monotonic() < deadline:
            if time.monotonic() - produced_s > 1.0:
                producer.produce(topic, b"shared")
                producer.flush(TIMEOUT_S)
                produced_s = time.monotonic()
            try:
                messages = consumer.poll(0.2) or []
            except KafkaException as exc:
                return None, int(exc.args[0].code())
            for message in messages:
                error = message.error()
                return (None, error.code()) if error is not None else (message.value(), 0)
    finally:
        consumer.close()
    raise AssertionError(f"share group {group_id} got nothing from {topic}")


def test_share_groups_need_read_on_the_group(
    tickwheel_broker: BackgroundBroker, admin: AdminClient
) -> None:
    create_topics(admin, "queue")
    create_acls(
        admin,
        acl(ResourceType.TOPIC, "queue", AclOperation.ALL),
        acl(ResourceType.GROUP, "share-ok", AclOperation.READ),
    )
    servers = tickwheel_broker.bootstrap_servers
    assert share_poll(servers, "share-ok", "queue") == (b"shared", 0)
    assert share_poll(servers, "share-no", "queue") == (None, KafkaError.GROUP_AUTHORIZATION_FAILED)
