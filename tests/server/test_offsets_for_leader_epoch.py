"""OffsetsForLeaderEpoch and ListOffsets' epochs on the wire, and librdkafka's use of them.

The leader changes here are the ReplicaManager's own (``bump_leader_epoch``,
``make_follower``, ``mark_offline``), run on the broker's loop, as the controller's
decisions reach it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from kio.schema.errors import ErrorCode

from tickwheel.bench._batches import make_batch
from tickwheel.protocol import ApiKey
from tickwheel.replica import LeaderAndIsr, Partition, TopicPartition, become_leader
from tickwheel.server import BackgroundBroker, Broker

from .wire import WireClient

pytestmark = pytest.mark.integration

PRODUCE = ApiKey.PRODUCE
LIST_OFFSETS = ApiKey.LIST_OFFSETS
CREATE_TOPICS = ApiKey.CREATE_TOPICS
OFFSET_FOR_LEADER_EPOCH = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = [2, 3, 4]
CONSUMER = -1
FOLLOWER_ID = 7
TOPIC = "epochs"
TP = TopicPartition(TOPIC, 0)
UNDEFINED = (-1, -1)
TIMEOUT_S = 15.0


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[WireClient]:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    body = wire.call(
        CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout": 1000,
        },
    )
    assert body.topics[0].error_code == ErrorCode.none
    yield wire
    wire.close()


def produce(client: WireClient, count: int, timestamp_ms: int = 1_000, acks: int = -1) -> None:
    records = make_batch([b"v"] * count, timestamp_ms=timestamp_ms)
    body = client.call(
        PRODUCE,
        9,
        {
            "acks": acks,
            "timeout": 1000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.none


def ask(
    client: WireClient,
    leader_epoch: int,
    *,
    version: int = 4,
    current_leader_epoch: int = -1,
    replica_id: int = CONSUMER,
    topic: str = TOPIC,
    partition: int = 0,
) -> Any:
    """The EpochEndOffset answered for one partition."""
    values: dict[str, Any] = {
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": current_leader_epoch,
                        "leader_epoch": leader_epoch,
                    }
                ],
            }
        ]
    }
    if version >= 3:
        values["replica_id"] = replica_id
    body = client.call(OFFSET_FOR_LEADER_EPOCH, version, values)
    assert body.throttle_time.total_seconds() == 0
    (topic_result,) = body.topics
    assert topic_result.topic == topic
    (answer,) = topic_result.partitions
    assert answer.partition == partition
    return answer


def answered(answer: Any) -> tuple[ErrorCode, int, int]:
    return answer.error_code, answer.leader_epoch, answer.end_offset


@pytest.mark.parametrize("version", VERSIONS)
def test_the_latest_epoch_ends_at_the_log_end(client: WireClient, version: int) -> None:
    produce(client, 2)
    produce(client, 3)
    assert answered(ask(client, 0, version=version)) == (ErrorCode.none, 0, 5)
    # Newer than any epoch the log holds, or undefined: Kafka's (-1, -1).
    assert answered(ask(client, 1, version=version)) == (ErrorCode.none, *UNDEFINED)
    assert answered(ask(client, -1, version=version)) == (ErrorCode.none, *UNDEFINED)


def test_a_new_leaders_empty_log_knows_its_own_epoch(client: WireClient) -> None:
    # Becoming leader records the epoch as starting at the log end (Kafka's makeLeader),
    # so a consumer asking before anything is written keeps its offset.
    assert answered(ask(client, 0)) == (ErrorCode.none, 0, 0)
    assert answered(ask(client, 1)) == (ErrorCode.none, *UNDEFINED)


@pytest.mark.parametrize("replica_id", [CONSUMER, FOLLOWER_ID])
def test_after_a_leader_change_an_old_epoch_ends_where_the_next_began(
    tickwheel_broker: BackgroundBroker, client: WireClient, replica_id: int
) -> None:
    produce(client, 4)
    assert tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP)) == 1
    produce(client, 2)
    assert answered(ask(client, 0, replica_id=replica_id)) == (ErrorCode.none, 0, 4)
    assert answered(ask(client, 1, replica_id=replica_id)) == (ErrorCode.none, 1, 6)
    assert answered(ask(client, 1, current_leader_epoch=1)) == (ErrorCode.none, 1, 6)


def test_an_epoch_the_leader_never_had_answers_with_the_one_before(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    produce(client, 3)
    for _ in range(3):
        tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    produce(client, 1)
    # Epochs 1 and 2 wrote nothing here: a follower asking for 2 learns that epoch 0
    # is the newest at or below it, ending where epoch 3 began (KIP-279).
    assert answered(ask(client, 2)) == (ErrorCode.none, 0, 3)


@pytest.mark.parametrize(
    ("current_leader_epoch", "error"),
    [(0, ErrorCode.fenced_leader_epoch), (2, ErrorCode.unknown_leader_epoch)],
)
def test_the_current_leader_epoch_fences_the_asker(
    tickwheel_broker: BackgroundBroker,
    client: WireClient,
    current_leader_epoch: int,
    error: ErrorCode,
) -> None:
    produce(client, 1)
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    answer = ask(client, 0, current_leader_epoch=current_leader_epoch)
    assert answered(answer) == (error, *UNDEFINED)


@pytest.mark.parametrize("replica_id", [CONSUMER, FOLLOWER_ID])
def test_only_the_leader_answers(
    tickwheel_broker: BackgroundBroker, client: WireClient, replica_id: int
) -> None:
    produce(client, 1)
    tickwheel_broker.call(lambda broker: broker.replica_manager.make_follower(TP, FOLLOWER_ID, 1))
    answer = ask(client, 0, replica_id=replica_id)
    assert answered(answer) == (ErrorCode.not_leader_or_follower, *UNDEFINED)


def test_partitions_not_hosted_get_kafkas_errors(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    assert ask(client, 0, topic="nowhere").error_code == ErrorCode.unknown_topic_or_partition
    assert ask(client, 0, partition=3).error_code == ErrorCode.unknown_topic_or_partition
    tickwheel_broker.call(lambda broker: broker.replica_manager.mark_offline(TP))
    assert ask(client, 0).error_code == ErrorCode.kafka_storage_error


def test_every_partition_is_answered_in_order(client: WireClient) -> None:
    produce(client, 2)
    body = client.call(
        OFFSET_FOR_LEADER_EPOCH,
        3,
        {
            "replica_id": CONSUMER,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
                        {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0},
                    ],
                },
                {
                    "topic": "nowhere",
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                },
            ],
        },
    )
    assert [(t.topic, [(p.partition, answered(p)) for p in t.partitions]) for t in body.topics] == [
        (
            TOPIC,
            [
                (0, (ErrorCode.none, 0, 2)),
                (9, (ErrorCode.unknown_topic_or_partition, *UNDEFINED)),
            ],
        ),
        ("nowhere", [(0, (ErrorCode.unknown_topic_or_partition, *UNDEFINED))]),
    ]


def list_offsets(client: WireClient, timestamp: int) -> tuple[int, int]:
    found = list_offsets_answer(client, timestamp)
    assert found.error_code == ErrorCode.none
    return found.offset, found.leader_epoch


def list_offsets_answer(client: WireClient, timestamp: int) -> Any:
    body = client.call(
        LIST_OFFSETS,
        7,
        {
            "replica_id": CONSUMER,
            "isolation_level": 0,
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}
            ],
        },
    )
    return body.topics[0].partitions[0]


def test_list_offsets_answers_kafkas_leader_epochs(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    produce(client, 2, timestamp_ms=1_000)
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    produce(client, 2, timestamp_ms=2_000)
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    assert list_offsets(client, -1) == (4, 2)  # latest: the partition's leader epoch
    assert list_offsets(client, -2) == (0, 0)  # earliest: the first epoch
    assert list_offsets(client, 1_500) == (2, 1)  # by time: the batch's epoch
    assert list_offsets(client, -3) == (2, 1)  # max timestamp: the batch's epoch
    assert list_offsets(client, 9_000) == (-1, -1)


def test_offsets_are_not_available_until_the_hw_reaches_the_epoch_start(
    tickwheel_broker: BackgroundBroker, client: WireClient
) -> None:
    """Just after an election the new leader's HW may lag its log end; until the
    followers catch up, latest (and a time past the HW) answer OFFSET_NOT_AVAILABLE."""

    def partition(broker: Broker) -> Partition:
        found = broker.replica_manager.get_partition(TP)
        assert found is not None
        return found

    def lead_with_a_follower(broker: Broker) -> None:
        config = partition(broker).log.config
        state = LeaderAndIsr(0, 1, (0, FOLLOWER_ID))
        become_leader(broker.replica_manager, TP, state, (0, FOLLOWER_ID), config)

    tickwheel_broker.call(lead_with_a_follower)
    produce(client, 2, timestamp_ms=1_000, acks=1)  # the HW stays at 0: 7 has not fetched
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    assert list_offsets_answer(client, -1).error_code == ErrorCode.offset_not_available
    assert list_offsets_answer(client, 1_000).error_code == ErrorCode.offset_not_available
    assert list_offsets(client, -2) == (0, 1)
    assert list_offsets_answer(client, 5_000).error_code == ErrorCode.offset_not_available
    tickwheel_broker.call(
        lambda broker: partition(broker).update_follower_fetch_state(FOLLOWER_ID, 2)
    )
    assert list_offsets(client, -1) == (2, 2)
    assert list_offsets(client, 1_000) == (0, 1)
    assert list_offsets(client, 5_000) == (-1, -1)  # no such time, and no longer lagging


# -- librdkafka ---------------------------------------------------------------------


def requests_handled(broker: BackgroundBroker, name: str) -> float:
    text = broker.call(lambda b: b.context.metrics.render())
    assert isinstance(text, bytes)
    prefix = f'kafka_network_RequestMetrics_RequestsPerSec_total{{request="{name}"}} '
    for line in text.decode().splitlines():
        if line.startswith(prefix):
            return float(line.removeprefix(prefix))
    return 0.0


def produce_with_librdkafka(broker: BackgroundBroker, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50})
    for value in values:
        producer.produce(TOPIC, value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def consume(consumer: Consumer, count: int) -> list[tuple[int, bytes, int]]:
    """(offset, value, leader epoch) of ``count`` messages; any error fails the test."""
    received: list[tuple[int, bytes, int]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(received) < count and time.monotonic() < deadline:
        message: Message | None = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        received.append((message.offset(), value, message.leader_epoch()))
    return received


@pytest.fixture
def consumer(tickwheel_broker: BackgroundBroker, client: WireClient) -> Iterator[Consumer]:
    """A librdkafka consumer; ``client`` has created the topic."""
    consumer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "epochs",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    yield consumer
    consumer.close()


def test_a_consumer_assigned_with_a_leader_epoch_validates_and_fetches(
    tickwheel_broker: BackgroundBroker, consumer: Consumer
) -> None:
    produce_with_librdkafka(tickwheel_broker, [b"a0", b"a1", b"a2", b"a3"])
    consumer.assign([ClientTopicPartition(TOPIC, 0, 2, leader_epoch=0)])
    assert consume(consumer, 2) == [(2, b"a2", 0), (3, b"a3", 0)]
    validations = requests_handled(tickwheel_broker, "OffsetForLeaderEpoch")
    assert validations >= 1
    # A leader change: the consumer is fenced, refreshes its metadata, validates its
    # position against the new epoch, and carries on.
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    produce_with_librdkafka(tickwheel_broker, [b"b4", b"b5"])
    assert consume(consumer, 2) == [(4, b"b4", 1), (5, b"b5", 1)]
    assert requests_handled(tickwheel_broker, "OffsetForLeaderEpoch") > validations


def test_a_consumer_past_a_truncation_resumes_where_the_logs_diverged(
    tickwheel_broker: BackgroundBroker, consumer: Consumer
) -> None:
    produce_with_librdkafka(tickwheel_broker, [b"a0", b"a1", b"a2"])
    consumer.assign([ClientTopicPartition(TOPIC, 0, 0)])
    assert [offset for offset, _, _ in consume(consumer, 3)] == [0, 1, 2]
    tickwheel_broker.call(lambda broker: broker.replica_manager.bump_leader_epoch(TP))
    produce_with_librdkafka(tickwheel_broker, [b"b3", b"b4"])
    assert consume(consumer, 2) == [(3, b"b3", 1), (4, b"b4", 1)]

    def lose_epoch_1(broker: Broker) -> int:
        # A new leader that never had epoch 1's records: they are gone, and its
        # epoch 2 writes other records at their offsets.
        partition = broker.replica_manager.get_partition(TP)
        assert partition is not None
        partition.log.truncate_to(3)
        return broker.replica_manager.bump_leader_epoch(TP)

    assert tickwheel_broker.call(lose_epoch_1) == 2
    produce_with_librdkafka(tickwheel_broker, [b"c3", b"c4", b"c5"])
    # Its position (5, epoch 1) is past the end of epoch 1 (offset 3): the consumer
    # seeks back there instead of skipping c3 and c4.
    assert consume(consumer, 3) == [(3, b"c3", 2), (4, b"c4", 2), (5, b"c5", 2)]
