"""The executors' wire path through a real broker, against the librdkafka path.

``read_range`` is called as a Spark task calls it (no SparkSession needed); the
librdkafka reader (``consumer_read_range``) over the same range is the reference: the
two must give the same rows, over aborted and committed transactions at both isolation
levels and over a compacted log.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tickwheel.server import BackgroundBroker
from tickwheel.spark import _clients, _wire_fetch
from tickwheel.spark._batch_decode import FetchWindow, decode_fetch
from tickwheel.spark._consumer_fetch import consumer_read_range
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._fetch import OffsetRange, read_range
from tickwheel.spark._options import SourceOptions
from tickwheel.spark._wire_fetch import supports, wire_fetcher

from .helpers import TIMEOUT_S, KafkaHelper, Record

pytestmark = pytest.mark.integration

SEGMENT_MS = 300
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "segment.ms": str(SEGMENT_MS),
    "min.cleanable.dirty.ratio": "0.01",
}


def options(bootstrap: str, topic: str, **extra: str) -> SourceOptions:
    return SourceOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "includeHeaders": "true",
            **extra,
        },
        streaming=False,
    )


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def both_paths(opts: SourceOptions, offset_range: OffsetRange) -> list[dict[str, Any]]:
    """The wire path's rows, after checking they equal the librdkafka path's."""
    wire = rows(list(read_range(opts, offset_range)))
    assert wire == rows(list(consumer_read_range(opts, offset_range)))
    return wire


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    return producer


def test_read_committed_skips_aborted_transactions_and_markers(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("txn", partitions=1)
    bootstrap = kafka.bootstrap_servers
    kafka.produce(topic, [Record(b"plain", b"0", 0, (("h", b"1"), ("n", None)))])
    producer = transactional_producer(bootstrap, f"{topic}-txn")
    for outcome in ("commit", "abort", "commit", "abort"):
        producer.begin_transaction()
        for n in range(3):
            producer.produce(topic, value=f"{outcome}-{n}".encode(), key=b"k", partition=0)
        producer.flush(TIMEOUT_S)
        kafka.produce(topic, [Record(None, f"between-{outcome}".encode(), 0)])
        if outcome == "commit":
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
    end = kafka.end_offsets(topic, 1)[0]
    whole = OffsetRange(topic, 0, 0, end)

    committed = both_paths(options(bootstrap, topic), whole)
    values = [row["value"] for row in committed]
    assert values == [
        b"0",
        b"commit-0",
        b"commit-1",
        b"commit-2",
        b"between-commit",
        b"between-abort",
        b"commit-0",
        b"commit-1",
        b"commit-2",
        b"between-commit",
        b"between-abort",
    ]
    assert committed[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    assert committed[1]["headers"] is None

    uncommitted = both_paths(
        options(bootstrap, topic, **{"kafka.isolation.level": "read_uncommitted"}), whole
    )
    assert sum(1 for row in uncommitted if b"abort-" in row["value"]) == 6
    assert len(uncommitted) == 1 + 4 * 3 + 4

    # A range starting inside an aborted transaction still skips the rest of it.
    offsets = [row["offset"] for row in uncommitted]
    inside = offsets[[row["value"] for row in uncommitted].index(b"abort-1")]
    tail = both_paths(options(bootstrap, topic), OffsetRange(topic, 0, inside, end))
    assert not any(b"abort-" in row["value"] for row in tail)


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"log.cleaner.backoff.ms": "50", "log.cleaner.min.cleanable.ratio": "0.01"}


def test_a_compacted_range_reads_the_kept_records_with_their_offsets(
    tickwheel_broker: BackgroundBroker,
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=COMPACTED)])[topic].result(TIMEOUT_S)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": "5"}
    )
    for n in range(300):
        producer.produce(topic, key=b"key-%d" % (n % 7), value=b"value-%d" % n, partition=0)
    producer.flush(TIMEOUT_S)
    time.sleep(SEGMENT_MS / 1000 + 0.1)
    producer.produce(topic, key=b"roll", value=b"", partition=0)
    producer.flush(TIMEOUT_S)
    checkpoint = Path(str(tickwheel_broker.broker.config.log_dirs)) / f"{topic}-0"
    deadline = time.monotonic() + TIMEOUT_S
    while not (checkpoint / "cleaner-offset-checkpoint").exists():
        assert time.monotonic() < deadline, "the log was not cleaned"
        time.sleep(0.05)
    opts = options(bootstrap, topic)
    try:
        read = both_paths(opts, OffsetRange(topic, 0, 5, 301))
    finally:
        # This broker stops after the test: drop the clients cached for it.
        _clients._consumers.pop(opts.client_config).close()
        _wire_fetch._fetchers.pop(opts.client_config).close()
    kept = {row["key"]: (row["offset"], row["value"]) for row in read}
    assert len(read) < 300
    assert kept[b"key-6"] == (293, b"value-293")
    assert kept[b"roll"][0] == 300


def test_a_leader_that_moved_is_looked_up_again(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("moved", partitions=1)
    kafka.produce(topic, [Record(b"k", b"v", 0)])
    opts = options(kafka.bootstrap_servers, topic)
    fetcher = wire_fetcher(opts.client_config)
    # A stale leader: nothing listens at port 1.
    fetcher._leaders[(topic, 0)] = ("127.0.0.1", 1)
    assert [row["value"] for row in rows(list(read_range(opts, OffsetRange(topic, 0, 0, 1))))] == [
        b"v"
    ]


def test_a_range_past_the_log_end_is_data_loss(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("short", partitions=1)
    kafka.produce(topic, [Record(b"k", b"v", 0)])
    beyond = OffsetRange(topic, 0, 0, 5)
    with pytest.raises(SparkKafkaError, match=r"data loss in .*-0: offsets 1\.\.4 are gone"):
        list(read_range(options(kafka.bootstrap_servers, topic), beyond))
    opts = options(kafka.bootstrap_servers, topic, failOnDataLoss="false")
    assert len(rows(list(read_range(opts, beyond)))) == 1


def test_only_plaintext_goes_over_the_wire() -> None:
    assert supports((("bootstrap.servers", "h:1"),))
    assert supports((("security.protocol", "PLAINTEXT"),))
    assert not supports((("security.protocol", "SASL_SSL"),))
    assert not supports((("security.protocol", "ssl"),))


@pytest.mark.parametrize("version", [4, 7, 12])
def test_each_fetch_version_reads_the_records(
    kafka: KafkaHelper, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    topic = kafka.new_topic(f"fetch-v{version}", partitions=1)
    kafka.produce(topic, [Record(b"k", b"%d" % n, 0) for n in range(3)])
    monkeypatch.setattr(_wire_fetch, "_FETCH_VERSIONS", (version, version))
    monkeypatch.setattr(_wire_fetch, "_METADATA_VERSIONS", (1, 1))
    fetcher = _wire_fetch.WireFetcher(options(kafka.bootstrap_servers, topic).client_config)
    try:
        answer = fetcher.fetch(topic, 0, 1, time.monotonic() + TIMEOUT_S)
    finally:
        fetcher.close()
    assert answer.error_code == ErrorCode.none
    assert answer.high_watermark == 3
    window = FetchWindow(topic, 0, 1, 3, True, False)
    assert [row["value"] for row in rows(decode_fetch(answer.records, [], window).batches)] == [
        b"1",
        b"2",
    ]
