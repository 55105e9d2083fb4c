"""``tickwheel demo``: a clickstream pipeline from producer to Spark to Kafka and back.

The README's main job, end to end on one machine with no other service:

1. start an embedded single-node tickwheel broker (a ``BackgroundBroker`` on a free
   loopback port, logs in a temporary directory);
2. create the topics ``pageviews`` and ``pageview-counts``;
3. produce a synthetic clickstream -- page views of a skewed set of pages by many
   users, event times spread over ``--minutes`` minutes and a little out of order --
   with ``acks=all``; the record timestamp is the event time;
4. run a Structured Streaming query through ``tickwheel.spark``: page views per page
   per one-minute event-time window, with a watermark, appended to
   ``pageview-counts`` through the sink, in micro-batches of at most
   ``--batch-records`` records (``Trigger.AvailableNow``);
5. read the counts back with a batch query, check them against the producer's own
   tally, and print them with the broker's purgatory metrics and the timings.

Append mode writes a window once, when the watermark has passed it, so the last few
minutes (within the watermark's delay of the newest event) stay open and unwritten, as
they would in a running pipeline until later events arrive; the demo says how many.

``--exactly-once`` writes through the sink's ``exactlyOnce=true`` (one Kafka
transaction per task and micro-batch): a repeated window then fails the check, and a
second query mirrors ``pageviews`` into ``pageviews-mirror`` through the same sink,
whose records the final check compares with the produced ones row by row (each
``(key, value)`` exactly once).

``--bootstrap`` runs the same pipeline against another cluster (tickwheel or Apache
Kafka), and ``--master`` on a Spark cluster; the module also runs under
``spark-submit`` (see docs/spark.md). Everything the demo starts it stops, and its
temporary directory is removed, also on Ctrl-C or failure.

Concurrency: one thread drives everything; the broker runs on its own thread, Spark in
its JVM and worker processes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)
from pyspark.sql.streaming.listener import StreamingQueryProgress

from tickwheel.spark import FORMAT_NAME, local_session

if TYPE_CHECKING:
    # Imported at run time only when the demo embeds a broker (see ``_start_broker``).
    from tickwheel.server import BackgroundBroker

VIEWS_TOPIC = "pageviews"
COUNTS_TOPIC = "pageview-counts"
MIRROR_TOPIC = "pageviews-mirror"
VIEWS_PARTITIONS = 3
COUNTS_PARTITIONS = 1
_TOPICS = ((VIEWS_TOPIC, VIEWS_PARTITIONS), (COUNTS_TOPIC, COUNTS_PARTITIONS))
# --exactly-once only: the mirror of pageviews, partitioned alike.
_MIRROR = (MIRROR_TOPIC, VIEWS_PARTITIONS)
DEFAULT_PAGE_VIEWS = 300_000
DEFAULT_MINUTES = 30
DEFAULT_USERS = 5_000
DEFAULT_BATCH_RECORDS = 60_000
WATERMARK = "2 minutes"
WINDOW = "1 minute"
# Events arrive up to this much out of event-time order (well within the watermark).
MAX_DISORDER_MS = 20_000
PAGES = (
    "/",
    "/search",
    "/products",
    "/products/kettle",
    "/products/teapot",
    "/products/mug",
    "/cart",
    "/checkout",
    "/account",
    "/help",
    "/blog",
    "/about",
)
# Zipf-like popularity: page i is viewed in proportion to 1 / (i + 1).
_PAGE_WEIGHTS = [1 / (rank + 1) for rank in range(len(PAGES))]
_MS_PER_MINUTE = 60_000
_MS_PER_S = 1000
DEFAULT_SEED = 7
"""Seeds the page-view generator: runs with the same settings make the same views."""
REPLICATION_FACTOR = 1
"""One copy of each partition: the embedded broker is a single node."""
# librdkafka's syslog level: errors only (its informational lines would break the output).
_CLIENT_LOG_LEVEL = "3"
_EPOCH_YEAR = "1970"
_PROGRESS_EVERY = 50_000
_TIMEOUT_S = 60.0
_TOP_WINDOWS = 8
_PRODUCER_SETTINGS = {
    "acks": "all",
    "linger.ms": "20",
    "batch.size": str(1 << 20),
    "log_level": _CLIENT_LOG_LEVEL,
}


@dataclass
class _Timings:
    """Wall-clock seconds per step, in order."""

    steps: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def step(self, number: int, total: int, title: str) -> Iterator[None]:
        print(f"\n[{number}/{total}] {title}", flush=True)
        started = time.perf_counter()
        yield
        self.steps[title] = time.perf_counter() - started
        print(f"      done in {self.steps[title]:.1f} s", flush=True)


def main(argv: list[str]) -> int:
    """Run the demo; returns 0 when the counts read back match what was produced."""
    parser = argparse.ArgumentParser(prog="tickwheel demo", description=__doc__.split("\n")[0])
    parser.add_argument("--page-views", type=int, default=DEFAULT_PAGE_VIEWS)
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES)
    parser.add_argument("--batch-records", type=int, default=DEFAULT_BATCH_RECORDS)
    parser.add_argument("--bootstrap", help="use this Kafka cluster instead of an embedded broker")
    parser.add_argument("--master", help="Spark master URL (default: local[2])")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="write through the exactly-once sink and check a mirror of the input row by row",
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tw-demo-")))
        return _Demo(args, workdir, stack).run()


class _Demo:
    def __init__(self, args: argparse.Namespace, workdir: Path, stack: contextlib.ExitStack):
        self.args = args
        self.workdir = workdir
        self.stack = stack
        self.timings = _Timings()
        self.broker: BackgroundBroker | None = None
        self.bootstrap = ""
        self.tally: Counter[tuple[str, int]] = Counter()
        # --exactly-once: every produced (key, value), to compare the mirror with.
        self.sent: Counter[tuple[bytes, bytes]] = Counter()
        self.max_event_ms = 0

    def run(self) -> int:
        started = time.perf_counter()
        total = 7 if self.args.exactly_once else 6
        first_step = "use the given cluster" if self.args.bootstrap else "start the broker"
        with self.timings.step(1, total, first_step):
            self._start_broker()
        names = ", ".join(name for name, _ in self._topics())
        with self.timings.step(2, total, f"create topics {names}"):
            self._create_topics()
        with self.timings.step(3, total, f"produce {self.args.page_views:,} page views"):
            self._produce()
        with self.timings.step(4, total, "start Spark"):
            spark = local_session("tickwheel-demo", master=self.args.master)
            self.stack.callback(spark.stop)
            print(f"      Spark {spark.version}, master {spark.sparkContext.master}")
        with self.timings.step(5, total, "stream: views per page per minute -> Kafka"):
            self._stream(spark)
        with self.timings.step(6, total, f"read {COUNTS_TOPIC} back (batch query)"):
            written, repeats = self._read_back(spark)
        ok = self._report(written)
        if self.args.exactly_once:
            ok = ok and not repeats
            with self.timings.step(7, total, f"compare {MIRROR_TOPIC} with {VIEWS_TOPIC}"):
                ok = self._check_mirror(spark) and ok
        print(f"\ntotal {time.perf_counter() - started:.1f} s")
        for title, seconds in self.timings.steps.items():
            print(f"  {seconds:7.1f} s  {title}")
        return 0 if ok else 1

    def _start_broker(self) -> None:
        if self.args.bootstrap:
            self.bootstrap = self.args.bootstrap
            print(f"      using the cluster at {self.bootstrap}")
            return
        from tickwheel.server import BackgroundBroker, BrokerConfig  # noqa: PLC0415 (embedded only)

        config = BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.workdir / "broker")}
        )
        broker = self.stack.enter_context(BackgroundBroker(config))
        self.broker = broker
        self.bootstrap = broker.bootstrap_servers
        print(f"      tickwheel broker on {self.bootstrap}, logs in {self.workdir / 'broker'}")

    def _create_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": _CLIENT_LOG_LEVEL})
        existing = admin.list_topics(timeout=_TIMEOUT_S).topics
        topics = self._topics()
        wanted = [
            NewTopic(name, partitions, REPLICATION_FACTOR)
            for name, partitions in topics
            if name not in existing
        ]
        if len(wanted) < len(topics):
            names = "/".join(name for name, _ in topics)
            raise SystemExit(
                f"topics {names} exist already on {self.bootstrap}: the demo needs fresh ones"
            )
        for future in admin.create_topics(wanted).values():
            future.result(_TIMEOUT_S)

    def _topics(self) -> tuple[tuple[str, int], ...]:
        return (*_TOPICS, _MIRROR) if self.args.exactly_once else _TOPICS

    def _produce(self) -> None:
        args = self.args
        rng = random.Random(args.seed)
        start_ms = (int(time.time() * _MS_PER_S) // _MS_PER_MINUTE - args.minutes) * _MS_PER_MINUTE
        span_ms = args.minutes * _MS_PER_MINUTE
        producer = Producer({"bootstrap.servers": self.bootstrap, **_PRODUCER_SETTINGS})
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        count = args.page_views
        pages = rng.choices(PAGES, _PAGE_WEIGHTS, k=count)
        for n, page in enumerate(pages):
            # Spread evenly over the span, then pulled back by up to MAX_DISORDER_MS,
            # so events arrive a little out of order (and never before the span).
            in_order_ms = start_ms + MAX_DISORDER_MS + n * (span_ms - MAX_DISORDER_MS) // count
            event_ms = in_order_ms - rng.randrange(MAX_DISORDER_MS)
            user = f"user-{rng.randrange(DEFAULT_USERS)}"
            value = json.dumps({"page": page, "user": user}).encode()
            while True:
                try:
                    producer.produce(
                        VIEWS_TOPIC,
                        value,
                        user.encode(),
                        timestamp=event_ms,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            self.tally[(page, event_ms // _MS_PER_MINUTE)] += 1
            if args.exactly_once:
                self.sent[(user.encode(), value)] += 1
            self.max_event_ms = max(self.max_event_ms, event_ms)
            if (n + 1) % _PROGRESS_EVERY == 0:
                producer.poll(0)
                print(f"      {n + 1:>9,} sent", flush=True)
        if producer.flush(_TIMEOUT_S) or failures:
            raise SystemExit(f"not every page view was acknowledged: {failures[:3]}")
        print(
            f"      all acknowledged (acks=all); {len(PAGES)} pages, event time"
            f" {_clock(start_ms)}..{_clock(self.max_event_ms)} UTC"
        )

    def _stream(self, spark: SparkSession) -> None:
        views = (
            spark.readStream.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", VIEWS_TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(self.args.batch_records))
            .load()
        )
        counts = (
            views.select(
                F.col("timestamp").alias("event_time"),
                F.get_json_object(F.col("value").cast("string"), "$.page").alias("page"),
            )
            .withWatermark("event_time", WATERMARK)
            .groupBy(F.window("event_time", WINDOW), "page")
            .count()
        )
        exactly_once = "true" if self.args.exactly_once else "false"
        query = (
            _as_records(counts)
            .writeStream.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", COUNTS_TOPIC)
            .option("exactlyOnce", exactly_once)
            .option("checkpointLocation", str(self.workdir / "checkpoint"))
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        self.stack.callback(query.stop)
        print(
            f"      watermark {WATERMARK}, windows of {WINDOW}, <= {self.args.batch_records:,}"
            f" records per micro-batch; sink exactlyOnce={exactly_once}"
        )
        mirror = None
        if self.args.exactly_once:
            mirror = (
                views.select("key", "value")
                .writeStream.format(FORMAT_NAME)
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("topic", MIRROR_TOPIC)
                .option("exactlyOnce", "true")
                .option("checkpointLocation", str(self.workdir / "mirror-checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            self.stack.callback(mirror.stop)
            print(f"      and {VIEWS_TOPIC} -> {MIRROR_TOPIC} as it is (exactly once)")
        seen: set[int] = set()
        while not query.awaitTermination(1):
            self._print_progress(query.recentProgress, seen)
        self._print_progress(query.recentProgress, seen)
        if mirror is not None:
            mirror.awaitTermination()

    @staticmethod
    def _print_progress(progress: list[StreamingQueryProgress], seen: set[int]) -> None:
        for report in progress:
            if report.batchId in seen:
                continue
            seen.add(report.batchId)
            rows = report.numInputRows
            seconds = report.durationMs.get("triggerExecution", 0) / _MS_PER_S
            watermark = report.eventTime.get("watermark", "")
            # Spark reports the epoch until the first batch has set a watermark.
            mark = "-" if watermark.startswith(_EPOCH_YEAR) else watermark[11:19]
            print(
                f"      batch {report.batchId:>2}: {rows:>7,} views in {seconds:5.1f} s"
                f" ({rows / max(seconds, 1e-3):>9,.0f} rows/s), watermark {mark}",
                flush=True,
            )

    def _read_back(self, spark: SparkSession) -> tuple[dict[tuple[str, int], int], int]:
        frame = (
            spark.read.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", COUNTS_TOPIC)
            .load()
        )
        rows = frame.select(F.col("value").cast("string").alias("json")).collect()
        written: dict[tuple[str, int], int] = {}
        for row in rows:
            record = json.loads(row.json)
            minute = _parse_minute(record["window_start"])
            written[(record["page"], minute)] = int(record["views"])
        repeats = len(rows) - len(written)
        # The sink is at-least-once: a replayed batch would show up as repeated windows
        # (with --exactly-once, never: a repeat fails the check).
        note = f", {repeats} repeated (a replayed batch)" if repeats else ", no window repeated"
        print(f"      {len(rows):,} count records in {COUNTS_TOPIC}{note}")
        return written, repeats

    def _check_mirror(self, spark: SparkSession) -> bool:
        """Every produced (key, value) exactly once in the mirror (read_committed)."""
        rows = (
            spark.read.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", MIRROR_TOPIC)
            .load()
            .select("key", "value")
            .collect()
        )
        mirrored: Counter[tuple[bytes, bytes]] = Counter(
            (bytes(row.key), bytes(row.value)) for row in rows
        )
        missing = sum((self.sent - mirrored).values())
        extra = sum((mirrored - self.sent).values())
        print(
            f"      {len(rows):,} records in {MIRROR_TOPIC} (read_committed),"
            f" {sum(self.sent.values()):,} produced: {missing} missing, {extra} repeated"
            " or unknown"
        )
        return missing == 0 and extra == 0

    def _report(self, written: dict[tuple[str, int], int]) -> bool:
        closed = {key: n for key, n in self.tally.items() if key in written}
        open_windows = len(self.tally) - len(closed)
        mismatched = [key for key, n in written.items() if self.tally.get(key) != n]
        _print_table(written)
        print(
            f"\nchecked: {len(written) - len(mismatched)} of {len(written)} windows written"
            f" match the producer's tally ({sum(closed.values()):,} views);"
            f" {open_windows} windows within the watermark stay open (append mode writes a"
            " window once, when final)"
        )
        self._print_purgatories()
        return not mismatched and bool(written)

    def _print_purgatories(self) -> None:
        broker = self.broker
        if broker is None:
            return
        metrics = broker.metrics()
        print(
            "\nbroker purgatories (Kafka's DelayedOperationPurgatory metrics): a produce"
            " waits there for acks=all,\na fetch for data (long poll); 'expired' ones"
            " timed out, as an idle consumer's fetches do"
        )
        print(f"  {'purgatory':<14} {'waiting now':>12} {'in watch lists':>15} {'expired':>9}")
        for name, m in sorted(metrics.items()):
            print(
                f"  {name:<14} {m.num_delayed_operations:>12,} {m.purgatory_size:>15,}"
                f" {m.expirations:>9,}"
            )


def _as_records(counts: DataFrame) -> DataFrame:
    """Window counts as Kafka records: key = page, value = JSON."""
    return counts.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.col("page"),
                F.date_format("window.start", "yyyy-MM-dd'T'HH:mm").alias("window_start"),
                F.col("count").alias("views"),
            )
        ).alias("value"),
    )


def _parse_minute(text: str) -> int:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M").replace(tzinfo=UTC)
    return int(moment.timestamp()) * _MS_PER_S // _MS_PER_MINUTE


def _clock(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / _MS_PER_S, UTC).strftime("%H:%M:%S")


def _print_table(written: dict[tuple[str, int], int]) -> None:
    by_page: dict[str, int] = Counter()
    busiest: dict[str, tuple[int, int]] = {}
    for (page, minute), views in written.items():
        by_page[page] += views
        if views > busiest.get(page, (0, 0))[1]:
            busiest[page] = (minute, views)
    print(f"\n{'page':<18} {'views':>9} {'windows':>8} {'busiest minute':>15} {'views':>6}")
    windows = Counter(page for page, _ in written)
    for page, views in sorted(by_page.items(), key=lambda item: -item[1]):
        minute, peak = busiest[page]
        print(
            f"{page:<18} {views:>9,} {windows[page]:>8} "
            f"{_clock(minute * _MS_PER_MINUTE)[:5]:>15} {peak:>6,}"
        )
    top = sorted(written.items(), key=lambda item: -item[1])[:_TOP_WINDOWS]
    print(
        "\nbusiest windows: "
        + ", ".join(
            f"{page} {_clock(minute * _MS_PER_MINUTE)[:5]} ({views:,})"
            for (page, minute), views in top
        )
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
