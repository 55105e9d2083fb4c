"""The transaction APIs of a running broker, over raw kio requests (manual clock)."""

from __future__ import annotations

import datetime
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.timer import ManualClock

from .wire import WireClient

pytestmark = pytest.mark.integration

E = ErrorCode
API_VERSIONS = ApiKey.API_VERSIONS
METADATA = ApiKey.METADATA
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
ADD_PARTITIONS = ApiKey.ADD_PARTITIONS_TO_TXN
ADD_OFFSETS = ApiKey.ADD_OFFSETS_TO_TXN
END_TXN = ApiKey.END_TXN
DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS
LIST_TRANSACTIONS = ApiKey.LIST_TRANSACTIONS
TIMEOUT_MS = 10_000
CLIENT_TIMEOUT_S = 15.0


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"num.partitions": "2"}


@pytest.fixture
def client(tickwheel_manual_broker: BackgroundBroker) -> Any:
    wire = WireClient(tickwheel_manual_broker.bootstrap_servers)
    body = wire.call(METADATA, 4, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
    assert body.topics[0].error_code == E.none
    # As every client does first; the first one creates __transaction_state.
    found = wire.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1})
    assert found.error_code == E.none
    yield wire
    wire.close()


def init(client: WireClient, version: int = 4, txn_id: str = "tx", **extra: Any) -> Any:
    values = {"transactional_id": txn_id, "transaction_timeout": TIMEOUT_MS, **extra}
    return client.call(INIT_PRODUCER_ID, version, values)


def add(client: WireClient, pid: int, epoch: int, version: int = 3, **topics: list[int]) -> Any:
    body = client.call(
        ADD_PARTITIONS,
        version,
        {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [
                {"name": name, "partitions": parts}
                for name, parts in (topics or {"t": [0]}).items()
            ],
        },
    )
    return {
        (topic.name, p.partition_index): p.partition_error_code
        for topic in body.results_by_topic_v3_and_below
        for p in topic.results_by_partition
    }


def end(client: WireClient, pid: int, epoch: int, version: int = 3, commit: bool = True) -> Any:
    values = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch}
    return client.call(END_TXN, version, {**values, "committed": commit}).error_code


def describe(client: WireClient, *txn_ids: str) -> Any:
    return client.call(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": list(txn_ids)})


def describe_empty(client: WireClient, txn_id: str) -> tuple[int, str, int]:
    """DescribeTransactions of one id with no transaction: error, state, start time.

    Kafka answers start time -1, which kio cannot decode as a datetime; read by hand.
    """
    client.send(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
    frame = client.read_frame()
    assert frame is not None
    # correlation id, header tags, throttle, compact array length 1+1
    position = 4 + 1 + 4 + 1
    (error,) = struct.unpack_from(">h", frame, position)
    position += 2
    position += frame[position]  # compact string: length + 1, then the id
    state_length = frame[position] - 1
    state = frame[position + 1 : position + 1 + state_length].decode()
    position += 1 + state_length + 4  # the state, then the timeout
    (start,) = struct.unpack_from(">q", frame, position)
    return error, state, start


def test_the_transaction_apis_are_advertised(client: WireClient) -> None:
    body = client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {int(k.api_key): (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[ADD_PARTITIONS] == (0, 5)
    assert ranges[ADD_OFFSETS] == (0, 4)
    assert ranges[END_TXN] == (0, 5)
    assert ranges[DESCRIBE_TRANSACTIONS] == (0, 0)
    assert ranges[LIST_TRANSACTIONS] == (0, 1)
    assert ranges[INIT_PRODUCER_ID] == (0, 5)
    assert ranges[FIND_COORDINATOR] == (0, 6)


def test_find_coordinator_of_a_transactional_id(
    client: WireClient, tickwheel_manual_broker: BackgroundBroker
) -> None:
    port = int(tickwheel_manual_broker.bootstrap_servers.rpartition(":")[2])
    single = client.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1})
    assert (single.error_code, single.node_id, single.port) == (E.none, 0, port)
    # Before v4 the one key's answer comes back in the top-level fields, errors too.
    empty = client.call(FIND_COORDINATOR, 3, {"key": "", "key_type": 1})
    assert (empty.error_code, empty.node_id, empty.port) == (E.invalid_request, -1, -1)
    batched = client.call(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["a", ""]})
    assert [(c.key, c.error_code) for c in batched.coordinators] == [
        ("a", E.none),
        ("", E.invalid_request),
    ]
    group = client.call(FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
    assert group.error_code == E.none
    group_v0 = client.call(FIND_COORDINATOR, 0, {"key": "g"})
    assert (group_v0.error_code, group_v0.port) == (E.none, port)
    topics = client.call(METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
    assert "__transaction_state" in {t.name for t in topics.topics}


def test_an_id_before_its_topic_exists_is_not_coordinated_here(
    tickwheel_manual_broker: BackgroundBroker,
) -> None:
    wire = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        assert init(wire).error_code == E.not_coordinator
    finally:
        wire.close()


def test_a_committed_transaction(client: WireClient) -> None:
    answer = init(client)
    assert (answer.error_code, answer.producer_epoch) == (E.none, 0)
    pid = answer.producer_id
    assert add(client, pid, 0, t=[0, 1]) == {("t", 0): E.none, ("t", 1): E.none}
    offsets = client.call(
        ADD_OFFSETS,
        0,
        {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "group_id": "g"},
    )
    assert offsets.error_code == E.none
    (state,) = describe(client, "tx").transaction_states
    assert (state.transaction_state, state.producer_id) == ("Ongoing", pid)
    assert state.transaction_timeout == datetime.timedelta(milliseconds=TIMEOUT_MS)
    assert {(t.topic, t.partitions) for t in state.topics} == {
        ("__consumer_offsets", (0,)),
        ("t", (0, 1)),
    }
    assert end(client, pid, 0, version=0) == E.none
    (state,) = describe(client, "tx").transaction_states
    assert (state.transaction_state, state.topics) == ("CompleteCommit", ())


def test_unknown_partitions_fail_the_whole_request(client: WireClient) -> None:
    pid = init(client).producer_id
    assert add(client, pid, 0, t=[0, 7], nope=[0]) == {
        ("t", 0): E.operation_not_attempted,
        ("t", 7): E.unknown_topic_or_partition,
        ("nope", 0): E.unknown_topic_or_partition,
    }
    assert describe_empty(client, "tx") == (E.none, "Empty", -1)


def test_errors_and_producer_fenced_down_maps(
    client: WireClient, tickwheel_clock: ManualClock
) -> None:
    pid = init(client).producer_id
    assert end(client, pid, 0) == E.invalid_txn_state
    assert add(client, pid, 0) == {("t", 0): E.none}
    assert add(client, pid + 1, 0) == {("t", 0): E.invalid_producer_id_mapping}
    tickwheel_clock.advance(TIMEOUT_MS)  # aborted, epoch bumped: the producer is fenced
    (state,) = describe(client, "tx").transaction_states
    assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", 1)
    for version, expected in ((0, E.invalid_producer_epoch), (1, E.invalid_producer_epoch)):
        assert add(client, pid, 0, version=version) == {("t", 0): expected}
        assert end(client, pid, 0, version=version) == expected
    for version in (2, 3):
        assert add(client, pid, 0, version=version) == {("t", 0): E.producer_fenced}
        assert end(client, pid, 0, version=version) == E.producer_fenced
    offsets = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": 0, "group_id": "g"}
    assert client.call(ADD_OFFSETS, 1, offsets).error_code == E.invalid_producer_epoch
    assert client.call(ADD_OFFSETS, 2, offsets).error_code == E.producer_fenced
    # InitProducerId: fenced by an expected (pid, epoch) that is not the id's.
    stale = {"producer_id": pid + 9, "producer_epoch": 0}
    assert init(client, 3, **stale).error_code == E.invalid_producer_epoch
    assert init(client, 4, **stale).error_code == E.producer_fenced
    half = init(client, 4, producer_id=pid, producer_epoch=-1)
    assert half.error_code == E.invalid_request
    assert init(client, 0, txn_id="").error_code == E.invalid_request
    too_long = client.call(
        INIT_PRODUCER_ID, 0, {"transactional_id": "tx", "transaction_timeout": 900_001}
    )
    assert too_long.error_code == E.invalid_transaction_timeout


def test_a_new_instance_fences_the_open_transaction(client: WireClient) -> None:
    pid = init(client, 0).producer_id
    assert add(client, pid, 0, version=0) == {("t", 0): E.none}
    assert init(client, 0).error_code == E.concurrent_transactions
    again = init(client, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.none, pid, 2)
    assert end(client, pid, 0, version=0) == E.invalid_producer_epoch


def test_describe_and_list(client: WireClient) -> None:
    pid = init(client).producer_id
    init(client, txn_id="idle")
    assert add(client, pid, 0) == {("t", 0): E.none}
    states = describe(client, "tx").transaction_states
    assert [(s.transactional_id, s.error_code, s.transaction_state) for s in states] == [
        ("tx", E.none, "Ongoing"),
    ]
    # Kafka's -1 (no transaction yet) as the start time.
    assert describe_empty(client, "idle") == (E.none, "Empty", -1)
    assert describe_empty(client, "missing")[:2] == (E.transactional_id_not_found, "")
    assert describe_empty(client, "")[:2] == (E.invalid_request, "")
    everything = client.call(LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []})
    assert {(s.transactional_id, s.transaction_state) for s in everything.transaction_states} == {
        ("tx", "Ongoing"),
        ("idle", "Empty"),
    }
    filtered = client.call(
        LIST_TRANSACTIONS,
        1,
        {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    assert [s.transactional_id for s in filtered.transaction_states] == ["tx"]
    assert filtered.unknown_state_filters == ("Bogus",)


def test_transactions_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "2",
        }
    )
    with BackgroundBroker(config, clock=ManualClock()) as broker:
        wire = WireClient(broker.bootstrap_servers)
        wire.call(METADATA, 4, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
        assert wire.call(FIND_COORDINATOR, 1, {"key": "tx", "key_type": 1}).error_code == E.none
        pid = init(wire).producer_id
        assert add(wire, pid, 0) == {("t", 0): E.none}
        wire.close()
    with BackgroundBroker(config, clock=ManualClock()) as broker:
        wire = WireClient(broker.bootstrap_servers)
        (state,) = describe(wire, "tx").transaction_states
        assert (state.error_code, state.transaction_state, state.producer_id) == (
            E.none,
            "Ongoing",
            pid,
        )
        assert end(wire, pid, 0) == E.none
        wire.close()


def test_confluent_kafka_commits_a_transaction(tickwheel_broker: BackgroundBroker) -> None:
    from confluent_kafka import Consumer, Producer  # noqa: PLC0415 - client under test

    servers = tickwheel_broker.bootstrap_servers
    producer = Producer(
        {"bootstrap.servers": servers, "transactional.id": "confluent-tx", "linger.ms": 5}
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    for index in range(10):
        producer.produce("txn-topic", value=b"v%d" % index)
    producer.commit_transaction(CLIENT_TIMEOUT_S)
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "txn-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["txn-topic"])
    values = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    try:
        while len(values) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    # Without keys the records spread over the topic's partitions: any order across them.
    assert sorted(values) == sorted(b"v%d" % index for index in range(10))
