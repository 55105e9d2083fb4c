"""librdkafka clients: a bad ``kafka.*`` option fails with this layer's error; the
planner's latest offsets follow the readers' isolation level; a worker keeps a bounded
number of the exactly-once sink's per-part clients."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.server import BackgroundBroker
from tickwheel.spark import SparkKafkaError
from tickwheel.spark._clients import (
    MAX_PART_CLIENTS_PER_WORKER,
    KafkaMetadata,
    give_back_idle_producer,
    marker_consumer,
    reader_consumer,
    take_idle_producer,
    writer_producer,
)
from tickwheel.spark._offsets import LATEST

BAD = (("bootstrap.servers", "127.0.0.1:9"), ("key.deserializer", "org.example.Java"))
WAIT_S = 30.0


def test_unknown_client_setting_is_refused_with_a_clear_error() -> None:
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        reader_consumer(BAD)
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        writer_producer(BAD)
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        KafkaMetadata(BAD).partition_counts()


def test_per_part_clients_are_kept_least_recently_used_first_out() -> None:
    # No broker behind the address; the clients stay quiet while they retry it.
    config = (("bootstrap.servers", "127.0.0.1:9"), ("log_level", "0"))
    groups = [f"part-{n}" for n in range(MAX_PART_CLIENTS_PER_WORKER + 1)]
    first = marker_consumer(config, groups[0])
    second = marker_consumer(config, groups[1])
    for group in groups[2:]:
        assert marker_consumer(config, groups[1]) is second
        marker_consumer(config, group)
    assert marker_consumer(config, groups[1]) is second
    assert marker_consumer(config, groups[0]) is not first

    producers = {tid: Producer(dict(config)) for tid in groups}
    for tid, producer in producers.items():
        give_back_idle_producer(config, tid, producer)
    assert take_idle_producer(config, groups[0]) is None
    assert take_idle_producer(config, groups[-1]) is producers[groups[-1]]
    assert take_idle_producer(config, groups[-1]) is None
    for tid in groups[1:-1]:
        kept = take_idle_producer(config, tid)
        assert kept is producers[tid]
        kept.close()


@pytest.mark.integration
def test_latest_offsets_end_where_the_readers_isolation_can_read(
    tickwheel_broker: BackgroundBroker,
) -> None:
    """With a transaction open, a read_committed reader (librdkafka's default) gets no
    further than the last stable offset: that is where the planner's ranges end."""
    servers = tickwheel_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic("planned", 1, 1)])["planned"].result(WAIT_S)
    plain = Producer({"bootstrap.servers": servers})
    for value in (b"a", b"b"):
        plain.produce("planned", value, partition=0)
    assert plain.flush(WAIT_S) == 0
    open_txn = Producer({"bootstrap.servers": servers, "transactional.id": "planned"})
    open_txn.init_transactions(WAIT_S)
    open_txn.begin_transaction()
    open_txn.produce("planned", b"pending", partition=0)
    assert open_txn.flush(WAIT_S) == 0
    config = (("bootstrap.servers", servers),)
    uncommitted = (*config, ("isolation.level", "read_uncommitted"))
    assert KafkaMetadata(config).log_offsets([("planned", 0)], LATEST) == {("planned", 0): 2}
    assert KafkaMetadata(uncommitted).log_offsets([("planned", 0)], LATEST) == {("planned", 0): 3}
    open_txn.abort_transaction(WAIT_S)
