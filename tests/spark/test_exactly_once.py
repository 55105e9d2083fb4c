"""The exactly-once sink: a replayed part writes nothing, a zombie is fenced, and a
Spark driver SIGKILLed at random points of a running pipeline, then restarted on its
checkpoint, leaves every input row exactly once in the output for read_committed readers.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

import tickwheel
from tickwheel.spark import FORMAT_NAME, SinkOptions, SparkKafkaError, _exactly_once
from tickwheel.spark._clients import give_back_idle_producer, take_idle_producer
from tickwheel.spark._exactly_once import TaskPart, write_exactly_once

from .helpers import KafkaHelper, Record

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

TIMEOUT_S = 30.0
PIPELINE = Path(__file__).with_name("eos_pipeline.py")
# The kill test: rows, micro-batch size, kills, and when (after the query started).
ROWS = 3000
MAX_OFFSETS_PER_TRIGGER = 150
KILLS = 4
# Each run is killed after 0, 1 or 2 micro-batches of its own, plus up to this long.
KILL_AFTER_BATCHES = 3
KILL_WITHIN_S = 2.5
# The share of kills that hit Spark's JVM (driver and executors at once) rather than the
# Python driver (whose JVM then shuts down, its Python workers possibly still writing).
JVM_KILLS = 0.5
# Each restart starts a Spark JVM: on a shared 2-core box (the suite's parallel
# workers) that alone has taken more than 90 s.
START_TIMEOUT_S = 180.0
RUN_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 30.0


def _batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})


def _options(kafka: KafkaHelper, topic: str) -> SinkOptions:
    return SinkOptions.parse(
        {"kafka.bootstrap.servers": kafka.bootstrap_servers, "topic": topic, "exactlyOnce": "true"}
    )


def test_a_replayed_part_writes_nothing_and_the_next_batch_writes(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("eos-replay", partitions=1)
    options = _options(kafka, topic)
    query = str(uuid.uuid4())
    first = [b"a", b"b", b"c"]

    written = write_exactly_once(options, iter([_batch(first)]), TaskPart(query, 7, 0))
    replayed = write_exactly_once(options, iter([_batch(first)]), TaskPart(query, 7, 0))
    other_part = write_exactly_once(options, iter([_batch([b"p1"])]), TaskPart(query, 7, 1))
    following = write_exactly_once(options, iter([_batch([b"d"])]), TaskPart(query, 8, 0))

    assert (written.records, written.already_committed) == (3, False)
    assert (replayed.records, replayed.already_committed) == (0, True)
    assert (other_part.records, other_part.already_committed) == (1, False)
    assert (following.records, following.already_committed) == (1, False)
    assert kafka.committed_values(topic, 1) == [b"a", b"b", b"c", b"p1", b"d"]


def test_the_source_reads_what_the_sink_committed(spark: SparkSession, kafka: KafkaHelper) -> None:
    # The topic ends with a transaction marker, which read_committed consumers skip: a
    # batch read up to the end must not wait for a record at the marker's offset.
    topic = kafka.new_topic("eos-read", partitions=1)
    query = str(uuid.uuid4())
    write_exactly_once(_options(kafka, topic), iter([_batch([b"x", b"y"])]), TaskPart(query, 0, 0))

    rows = (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .select("value", "offset")
        .collect()
    )

    assert [(bytes(r.value), r.offset) for r in rows] == [(b"x", 0), (b"y", 1)]


def test_an_empty_part_touches_no_kafka() -> None:
    options = SinkOptions.parse(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "never", "exactlyOnce": "true"}
    )
    outcome = write_exactly_once(options, iter([_batch([])]), TaskPart("q", 0, 0))
    assert (outcome.records, outcome.already_committed) == (0, False)


def test_a_zombie_attempt_is_fenced_and_its_rows_never_seen(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("eos-zombie", partitions=1)
    part = TaskPart(str(uuid.uuid4()), 0, 0)
    zombie = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": part.transactional_id}
    )
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie")
    assert zombie.flush(TIMEOUT_S) == 0

    outcome = write_exactly_once(_options(kafka, topic), iter([_batch([b"retry"])]), part)

    assert outcome.records == 1
    with pytest.raises(Exception, match=r"(?i)fenced"):
        zombie.commit_transaction(TIMEOUT_S)
    assert kafka.committed_values(topic, 1) == [b"retry"]


def test_a_kept_producer_fenced_by_another_worker_starts_anew(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("eos-kept", partitions=1)
    options = _options(kafka, topic)
    query = str(uuid.uuid4())
    write_exactly_once(options, iter([_batch([b"0"])]), TaskPart(query, 0, 0))
    transactional_id = TaskPart(query, 0, 0).transactional_id
    # This worker kept its producer; another worker then writes batch 1 with a new one,
    # fencing it, and the fenced producer is what this worker finds for batch 2.
    kept = take_idle_producer(options.client_config, transactional_id)
    assert kept is not None
    other = write_exactly_once(options, iter([_batch([b"1"])]), TaskPart(query, 1, 0))
    give_back_idle_producer(options.client_config, transactional_id, kept)

    replayed = write_exactly_once(options, iter([_batch([b"1"])]), TaskPart(query, 1, 0))
    after_fencing = write_exactly_once(options, iter([_batch([b"2"])]), TaskPart(query, 2, 0))

    assert (other.records, other.already_committed) == (1, False)
    assert (replayed.records, replayed.already_committed) == (0, True)
    assert (after_fencing.records, after_fencing.already_committed) == (1, False)
    assert take_idle_producer(options.client_config, transactional_id) not in (None, kept)
    assert kafka.committed_values(topic, 1) == [b"0", b"1", b"2"]


def test_a_zombie_holding_the_marker_open_is_aborted_by_a_new_producer(
    kafka: KafkaHelper, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kept producer's task finds its marker unsettled by a zombie's open transaction:
    # after KEPT_MARKER_TIMEOUT_S it starts a new producer, whose init aborts the zombie.
    monkeypatch.setattr(_exactly_once, "KEPT_MARKER_TIMEOUT_S", 1.0)
    topic = kafka.new_topic("eos-open-marker", partitions=1)
    options = _options(kafka, topic)
    query = str(uuid.uuid4())
    write_exactly_once(options, iter([_batch([b"0"])]), TaskPart(query, 0, 0))
    part = TaskPart(query, 1, 0)
    zombie = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": part.transactional_id}
    )
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    group = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": part.marker_group})
    zombie.send_offsets_to_transaction(
        [TopicPartition(topic, 0, part.marker_offset)], group.consumer_group_metadata(), TIMEOUT_S
    )
    zombie.produce(topic, value=b"zombie")
    assert zombie.flush(TIMEOUT_S) == 0

    outcome = write_exactly_once(options, iter([_batch([b"1"])]), part)

    assert (outcome.records, outcome.already_committed) == (1, False)
    with pytest.raises(Exception, match=r"(?i)fenced"):
        zombie.commit_transaction(TIMEOUT_S)
    group.close()
    assert kafka.committed_values(topic, 1) == [b"0", b"1"]


def test_a_part_that_fails_aborts_its_transaction(kafka: KafkaHelper) -> None:
    topic = kafka.new_topic("eos-abort", partitions=1)
    options = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "exactlyOnce": "true",
            "exactlyOnce.markerTopic": topic,
        }
    )
    part = TaskPart(str(uuid.uuid4()), 0, 0)
    rows = pa.RecordBatch.from_pydict(
        {"topic": pa.array([topic, None]), "value": pa.array([b"x", b"y"], pa.binary())}
    )

    with pytest.raises(SparkKafkaError, match="null topic"):
        write_exactly_once(options, iter([rows]), part)

    # The marker went first in the transaction: left open, it would keep the group's
    # offsets unstable and this read_committed fetch would time out.
    marker_reader = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": part.marker_group,
            "isolation.level": "read_committed",
        }
    )
    (marker,) = marker_reader.committed([TopicPartition(topic, 0)], timeout=5.0)
    marker_reader.close()
    assert marker.error is None
    assert marker.offset < 0
    assert kafka.committed_values(topic, 1) == []


def test_exactly_once_options_are_checked(spark: SparkSession, kafka: KafkaHelper) -> None:
    servers = {"kafka.bootstrap.servers": kafka.bootstrap_servers, "exactlyOnce": "true"}
    with pytest.raises(
        SparkKafkaError, match=r"needs the option topic or exactlyOnce\.markerTopic"
    ):
        SinkOptions.parse(servers)
    with pytest.raises(SparkKafkaError, match=r"markerTopic needs exactlyOnce=true"):
        SinkOptions.parse({**servers, "exactlyOnce": "false", "exactlyOnce.markerTopic": "m"})
    marked = SinkOptions.parse({**servers, "topic": "t", "exactlyOnce.markerTopic": "m"})
    assert (marked.topic, marked.marker_topic) == ("t", "m")
    with pytest.raises(SparkKafkaError, match=r"transactional\.id"):
        SinkOptions.parse({**servers, "topic": "t", "kafka.transactional.id": "mine"})
    with pytest.raises(SparkKafkaError, match="exactlyOnce must be true or false"):
        SinkOptions.parse({**servers, "topic": "t", "exactlyOnce": "yes"})
    with pytest.raises(Exception, match="is for streaming queries"):
        (
            spark.createDataFrame([("x",)], "value STRING")
            .write.format(FORMAT_NAME)
            .options(**servers, topic="never")
            .mode("append")
            .save()
        )


class _Driver:
    """One run of eos_pipeline.py in its own session (process group)."""

    def __init__(self, kafka: KafkaHelper, args: list[str], log: Path) -> None:
        env = dict(os.environ)
        src = str(Path(tickwheel.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, str(PIPELINE), kafka.bootstrap_servers, *args],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,
        )

    def lines(self, timeout_s: float) -> Iterator[str]:
        """The driver's stdout lines, until it exits or ``timeout_s`` passes."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    break
                line = self.process.stdout.readline()
                if not line:
                    return
                yield line.decode().strip()
        raise AssertionError(f"the driver said nothing for {timeout_s} s")

    def kill(self, *, jvm: bool = False) -> None:
        """SIGKILL the Python driver (or, ``jvm``, Spark's JVM with the executors in it),
        then wait for the rest of the driver's processes to go too."""
        if jvm:
            for pid in _group_members(self.process.pid, "java"):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait(EXIT_TIMEOUT_S)
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while _group_alive(self.process.pid):
            if time.monotonic() > deadline:
                os.killpg(self.process.pid, signal.SIGKILL)
                break
            time.sleep(0.1)
        self.close()

    def close(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


def _group_members(pgid: int, command: str) -> list[int]:
    """The processes of group ``pgid`` running ``command`` (Linux's /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            in_group = os.getpgid(int(entry.name)) == pgid
            if in_group and (entry / "comm").read_text().strip() == command:
                members.append(int(entry.name))
        except (ProcessLookupError, FileNotFoundError):
            continue
    return members


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(1200)
def test_driver_killed_at_random_points_output_has_every_row_exactly_once(
    kafka: KafkaHelper, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    source = kafka.new_topic("eos-in", partitions=2)
    sink = kafka.new_topic("eos-out", partitions=2)
    sent = [Record(f"k{n}".encode(), f"row-{n}".encode(), n % 2) for n in range(ROWS)]
    kafka.produce(source, sent)
    args = [source, sink, str(tmp_path / "checkpoint"), str(MAX_OFFSETS_PER_TRIGGER)]
    log = tmp_path / "driver.log"

    committed_batches = tmp_path / "checkpoint" / "commits"
    progress: list[int] = []
    for kill in range(KILLS):
        driver = _Driver(kafka, args, log)
        batches = rng.randrange(KILL_AFTER_BATCHES)
        try:
            lines = driver.lines(START_TIMEOUT_S)
            assert "started" in lines, f"run {kill} did not start"
            seen = 0
            while seen < batches:
                seen += next(lines).startswith("batch ")
            # A random point of the next micro-batch (or of the first), not a wait.
            time.sleep(rng.uniform(0, KILL_WITHIN_S))
        finally:
            driver.kill(jvm=rng.random() < JVM_KILLS)
        progress.append(len(list(committed_batches.glob("[0-9]*"))))
    driver = _Driver(kafka, args, log)
    try:
        said = list(driver.lines(START_TIMEOUT_S + RUN_TIMEOUT_S))
        assert driver.process.wait(EXIT_TIMEOUT_S) == 0, log.read_text()[-3000:]
    finally:
        driver.kill()
    assert "done" in said, (seed, said)
    # Some kill fell inside the run, not all before its first batch or after its last.
    total = len(list(committed_batches.glob("[0-9]*")))
    assert any(0 < batches < total for batches in progress), (seed, progress, total)

    got = sorted(kafka.committed_values(sink, 2))
    assert got == sorted(r.value for r in sent if r.value is not None), f"seed {seed}"
