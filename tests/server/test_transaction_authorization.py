"""The transaction APIs' per-resource refusals, over the wire, as Kafka's KafkaApis.

A broker with Kafka's ACL authorizer where ``User:ANONYMOUS`` may WRITE transactional id
``seen`` and topic ``orders``. Transactional id ``unseen`` gets a producer while the
principal may still WRITE it, then that grant goes: DescribeTransactions answers it
TRANSACTIONAL_ID_AUTHORIZATION_FAILED after the ids it may describe, ListTransactions
leaves it out, and AddPartitionsToTxn with a topic it may not write adds nothing.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.security import AccessControlEntry, PatternType, ResourcePattern
from tickwheel.security import AclOperation as Op
from tickwheel.security import AclPermissionType as Permission
from tickwheel.security import ResourceType as Resource
from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

E = ErrorCode
TIMEOUT_S = 15.0
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
ADD_PARTITIONS = ApiKey.ADD_PARTITIONS_TO_TXN
DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS
LIST_TRANSACTIONS = ApiKey.LIST_TRANSACTIONS
RETRIABLE = {E.coordinator_not_available, E.coordinator_load_in_progress, E.not_coordinator}
GRANTS = (
    (ResourcePattern(Resource.CLUSTER, "kafka-cluster", PatternType.LITERAL), Op.CREATE),
    (ResourcePattern(Resource.TOPIC, "orders", PatternType.LITERAL), Op.WRITE),
    (ResourcePattern(Resource.TRANSACTIONAL_ID, "seen", PatternType.LITERAL), Op.WRITE),
)
UNSEEN = ResourcePattern(Resource.TRANSACTIONAL_ID, "unseen", PatternType.LITERAL)


def _entry(operation: Op) -> AccessControlEntry:
    return AccessControlEntry("User:ANONYMOUS", "*", operation, Permission.ALLOW)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("txn-authorization")),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "auto.create.topics.enable": "false",
        }
    )
    with BackgroundBroker(config) as running:

        async def grant(started: Broker) -> None:
            store = started.context.acl_store
            assert store is not None
            for pattern, operation in (*GRANTS, (UNSEEN, Op.WRITE)):
                await store.update(pattern, [_entry(operation)], ())

        running.call(grant)
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        for future in admin.create_topics(
            [NewTopic("orders", 1, 1), NewTopic("secret", 1, 1)]
        ).values():
            future.result(TIMEOUT_S)
        client = WireClient(running.bootstrap_servers)
        try:
            for txn_id in ("seen", "unseen"):
                _init_producer(client, txn_id)
        finally:
            client.close()

        async def revoke(started: Broker) -> None:
            store = started.context.acl_store
            assert store is not None
            await store.update(UNSEEN, (), [_entry(Op.WRITE)])

        running.call(revoke)
        yield running


def _init_producer(client: WireClient, txn_id: str) -> None:
    """A producer id for ``txn_id``, once its coordinator (created on first use) serves."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        found = client.call(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
        error = found.coordinators[0].error_code
        if error == E.none:
            values = {"transactional_id": txn_id, "transaction_timeout": 10_000}
            error = client.call(INIT_PRODUCER_ID, 4, values).error_code
            if error == E.none:
                return
        assert error in RETRIABLE, error
        assert time.monotonic() < deadline, f"no producer id for {txn_id}"
        time.sleep(0.05)


@pytest.fixture
def wire(broker: BackgroundBroker) -> Iterator[WireClient]:
    client = WireClient(broker.bootstrap_servers)
    yield client
    client.close()


def _compact_string(frame: bytes, position: int) -> tuple[str, int]:
    end = position + 1 + frame[position] - 1
    return frame[position + 1 : end].decode(), end


def _described(wire: WireClient, *txn_ids: str) -> list[tuple[str, int, str, int]]:
    """DescribeTransactions v0's (id, error, state, start time) per entry, read by hand:
    Kafka's start time -1 (none) is not a datetime kio decodes."""
    wire.send(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(txn_ids)})
    frame = wire.read_frame()
    assert frame is not None
    position = 4 + 1 + 4  # correlation id, header tags, throttle
    count = frame[position] - 1
    position += 1
    entries = []
    for _ in range(count):
        (error,) = struct.unpack_from(">h", frame, position)
        txn_id, position = _compact_string(frame, position + 2)
        state, position = _compact_string(frame, position)
        (start,) = struct.unpack_from(">q", frame, position + 4)
        position += 4 + 8 + 8 + 2  # timeout, start, producer id, epoch
        assert frame[position] == 1, "no partitions in these transactions"
        position += 2  # the empty topics array, the entry's tagged fields
        entries.append((txn_id, error, state, start))
    return entries


def test_describe_answers_the_ids_it_may_not_describe_last_and_refused(wire: WireClient) -> None:
    assert _described(wire, "unseen", "seen") == [
        ("seen", E.none, "Empty", -1),
        ("unseen", E.transactional_id_authorization_failed, "", -1),
    ]
    assert _described(wire, "seen") == [("seen", E.none, "Empty", -1)]


def test_list_leaves_out_the_ids_it_may_not_describe(wire: WireClient) -> None:
    for version in (0, 1):
        listed = wire.call(
            LIST_TRANSACTIONS, version, {"state_filters": [], "producer_id_filters": []}
        )
        assert listed.error_code == E.none
        assert [s.transactional_id for s in listed.transaction_states] == ["seen"]


@pytest.mark.parametrize("version", [0, 3])
def test_add_partitions_with_a_topic_it_may_not_write_adds_none(
    wire: WireClient, version: int
) -> None:
    body = wire.call(
        ADD_PARTITIONS,
        version,
        {
            "v3_and_below_transactional_id": "seen",
            "v3_and_below_producer_id": 0,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [
                {"name": "orders", "partitions": [0]},
                {"name": "secret", "partitions": [0]},
            ],
        },
    )
    assert {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in body.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    } == {("orders", 0): E.operation_not_attempted, ("secret", 0): E.topic_authorization_failed}
