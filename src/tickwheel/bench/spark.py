"""``tickwheel bench spark``: the Kafka source's cost inside Spark, beside Spark's floor,
and the sink's, exactly-once beside at-least-once.

Two measurements, each run on the ``tickwheel`` source and, in the same run and the same
SparkSession, on a trivial in-memory Python data source with the same columns (the
floor: what Spark's Python data source machinery costs when reading is free):

1. Throughput: 1,000,000 small records (8-byte keys, 16-byte values, two partitions)
   through an ``availableNow`` query into Spark's ``noop`` sink, in one micro-batch (or
   micro-batches of ``--batch-rows``). Rows/s = rows / the sum of the batches' trigger
   times, so a query's start-up is left out but each batch's fixed cost (about 0.3 s of
   planning and checkpoint writes, the same for both sources) is in.
   Beside it, the Parquet-file floor: the same rows, written once to a Parquet file
   (read from the topic by the source), read with ``spark.read.parquet`` into ``noop``
   -- what Spark's fastest built-in columnar reader costs for these rows -- and, read
   the same way as batch queries, the source (``spark.read.format("tickwheel")``) and
   the in-memory floor (the bound of any Python data source).
   Rows/s = rows / the wall-clock time of the ``save()``, planning included.
   Targets: the streaming source at least 1,500,000 rows/s and at least 0.6x the
   Parquet file's rows/s.
2. Per-micro-batch overhead: ``--tiny-batches`` micro-batches of ``--tiny-rows`` records
   (``maxOffsetsPerTrigger``), median trigger time per batch, the first batch left out
   as warm-up. Target: within 1.3x of the floor's.
3. The sink: ``--sink-records`` rows of the in-memory floor source written by the
   ``tickwheel`` sink into a two-partition topic (``key`` and ``value``, in the
   micro-batches of ``--batch-rows``), at-least-once and with ``exactlyOnce=true``
   (a Kafka transaction per task and micro-batch). Rows/s as in 1. Target: the
   exactly-once sink at least 0.7x the at-least-once one.

Each query runs ``--repeats`` times after one warm-up round, alternating source and
floor; medians and ratios are printed. The broker is tickwheel's own, in the background
on loopback, unless ``--bootstrap`` names another. Record the figures in the
"## Spark" section of docs/benchmarks.md.

Concurrency: single-threaded driver; Spark runs tasks in its own worker processes.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.streaming.listener import StreamingQueryProgress
from pyspark.sql.types import StructType

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.spark import FORMAT_NAME, local_session, source_schema

THROUGHPUT_TARGET_ROWS_S = 1_500_000
PARQUET_TARGET_RATIO = 0.6
PARQUET_FLOOR = "parquet file"
BATCH_SOURCE = "tickwheel batch"
BATCH_FLOOR = "in-memory floor batch"
OVERHEAD_TARGET_RATIO = 1.3
EXACTLY_ONCE_TARGET_RATIO = 0.7
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
PARTITIONS = 2
KEY_BYTES = 8
VALUE_BYTES = 16
ARROW_BATCH_ROWS = 20_000
FLOOR_SOURCE = "tickwheel_bench_floor"
QUERY_TIMEOUT_S = 600
_MS_PER_S = 1000
_PRODUCER_SETTINGS = {"acks": "all", "linger.ms": "20", "batch.size": str(1 << 20)}


def _floor_partitions(begin: int, until: int) -> list[InputPartition]:
    share = -(-(until - begin) // PARTITIONS)
    cuts = [min(until, begin + i * share) for i in range(PARTITIONS + 1)]
    return [InputPartition((a, b)) for a, b in itertools.pairwise(cuts) if b > a]


def _floor_batches(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    begin, until = partition.value
    template = _template_batch()
    while begin < until:
        rows = min(ARROW_BATCH_ROWS, until - begin)
        yield template.slice(0, rows)
        begin += rows


class _FloorBatchReader(DataSourceReader):
    """The floor as a batch query: ``total_rows`` prebuilt rows in two partitions."""

    def __init__(self, total_rows: int) -> None:
        self._total_rows = total_rows

    def partitions(self) -> Sequence[InputPartition]:
        return _floor_partitions(0, self._total_rows)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _floor_batches(partition)


class _FloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Serves ``total_rows`` prebuilt rows in two partitions; reading costs nothing."""

    def __init__(self, total_rows: int, max_rows: int | None) -> None:
        self._total_rows = total_rows
        self._max_rows = max_rows

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark API)
        return {"rows": 0}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark API)
        return ReadAllAvailable() if self._max_rows is None else ReadMaxRows(self._max_rows)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark API)
        """The data never grows: nothing to record."""

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 (Spark API)
        begin = int(start["rows"])
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else self._total_rows
        return {"rows": min(self._total_rows, begin + budget)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return _floor_partitions(int(start["rows"]), int(end["rows"]))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _floor_batches(partition)


_template: list[pa.RecordBatch] = []


def _template_batch() -> pa.RecordBatch:
    if not _template:
        schema = to_arrow_schema(source_schema(include_headers=False), timezone="UTC")
        rows = ARROW_BATCH_ROWS
        columns = [
            pa.array([b"k" * KEY_BYTES] * rows, pa.binary()),
            pa.array([b"v" * VALUE_BYTES] * rows, pa.binary()),
            pa.array(["floor"] * rows, pa.string()),
            pa.array([0] * rows, pa.int32()),
            pa.array(range(rows), pa.int64()),
            pa.array([0] * rows, schema.field(5).type),
            pa.array([0] * rows, pa.int32()),
        ]
        _template.append(pa.RecordBatch.from_arrays(columns, schema=schema))
    return _template[0]


class FloorSource(DataSource):
    """The in-memory peer: options ``rows`` and ``maxOffsetsPerTrigger``."""

    @classmethod
    def name(cls) -> str:
        return FLOOR_SOURCE

    def schema(self) -> StructType:
        return source_schema(include_headers=False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _FloorBatchReader(int(self.options["rows"]))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark API)
        max_rows = self.options.get("maxOffsetsPerTrigger")
        return _FloorReader(int(self.options["rows"]), None if max_rows is None else int(max_rows))


def _produce(bootstrap: str, topic: str, records: int) -> float:
    """Create ``topic`` and fill it with ``records`` small records; returns seconds taken."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap, **_PRODUCER_SETTINGS})
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value, n.to_bytes(KEY_BYTES, "big"), n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(QUERY_TIMEOUT_S):
        raise RuntimeError(f"records for {topic} were not all acknowledged")
    return time.perf_counter() - started


def _run(
    spark: SparkSession,
    fmt: str,
    options: dict[str, str],
    checkpoint: Path,
    sink_options: dict[str, str] | None = None,
) -> list[StreamingQueryProgress]:
    """One availableNow query into the noop sink (or, given ``sink_options``, the
    ``tickwheel`` sink); returns its progress reports."""
    reader = spark.readStream.format(fmt)
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.load()
    if sink_options is None:
        writer = frame.writeStream.format("noop")
    else:
        writer = frame.select("key", "value").writeStream.format(FORMAT_NAME)
        for key, value in sink_options.items():
            writer = writer.option(key, value)
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    if not query.awaitTermination(QUERY_TIMEOUT_S):
        query.stop()
        raise RuntimeError(f"{fmt} query did not finish in {QUERY_TIMEOUT_S} s")
    return list(query.recentProgress)


def _noop_rows_per_s(frame: DataFrame, rows: int) -> float:
    """Rows/s of a batch query of ``frame`` into the noop sink, by the wall clock."""
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return rows / (time.perf_counter() - started)


def _rows_per_s(progress: list[StreamingQueryProgress]) -> float:
    rows = sum(p.numInputRows for p in progress)
    trigger_ms = sum(p.durationMs["triggerExecution"] for p in progress)
    return rows * _MS_PER_S / trigger_ms


def _batch_ms(progress: list[StreamingQueryProgress]) -> float:
    return statistics.median(p.durationMs["triggerExecution"] for p in progress[1:])


def main(argv: list[str]) -> int:
    """Run the benchmark; returns 0, or 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="tickwheel bench spark", description=__doc__)
    parser.add_argument("--bootstrap", help="an existing broker (default: start tickwheel's)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--batch-rows", type=int, help="maxOffsetsPerTrigger (default: all in one micro-batch)"
    )
    parser.add_argument("--tiny-batches", type=int, default=20)
    parser.add_argument("--tiny-rows", type=int, default=10)
    parser.add_argument("--sink-records", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    add_png_argument(parser)
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tw-bench-")))
        bootstrap = args.bootstrap or _start_broker(stack, workdir)
        return _bench(args, bootstrap, workdir)


def _start_broker(stack: contextlib.ExitStack, workdir: Path) -> str:
    from tickwheel.server import BackgroundBroker, BrokerConfig  # noqa: PLC0415 (only without --bootstrap)

    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(workdir / "broker")}
    )
    broker = stack.enter_context(BackgroundBroker(config))
    return str(broker.bootstrap_servers)


def _bench(args: argparse.Namespace, bootstrap: str, workdir: Path) -> int:
    tag = str(int(time.time()))
    big, tiny, sink = f"bench-big-{tag}", f"bench-tiny-{tag}", f"bench-sink-{tag}"
    tiny_records = args.tiny_batches * args.tiny_rows
    print(f"broker {bootstrap}: producing {args.records:,} + {tiny_records} records", flush=True)
    produce_s = _produce(bootstrap, big, args.records)
    _produce(bootstrap, tiny, tiny_records)
    _produce(bootstrap, sink, 0)
    print(f"  produced in {produce_s:.1f} s; starting Spark (local[2])", flush=True)
    spark = local_session("tickwheel-bench")
    spark.dataSource.register(FloorSource)
    kafka = {"kafka.bootstrap.servers": bootstrap, "startingOffsets": "earliest"}
    per_batch = {} if args.batch_rows is None else {"maxOffsetsPerTrigger": str(args.batch_rows)}
    cases = {
        "throughput": (
            {**kafka, "subscribe": big, **per_batch},
            {"rows": str(args.records), **per_batch},
            _rows_per_s,
        ),
        "overhead": (
            {**kafka, "subscribe": tiny, "maxOffsetsPerTrigger": str(args.tiny_rows)},
            {"rows": str(tiny_records), "maxOffsetsPerTrigger": str(args.tiny_rows)},
            _batch_ms,
        ),
    }
    source_batch = (
        spark.read.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", big)
        .load()
    )
    parquet_path = str(workdir / "floor.parquet")
    source_batch.write.parquet(parquet_path)
    batch_frames = {
        BATCH_SOURCE: source_batch,
        BATCH_FLOOR: spark.read.format(FLOOR_SOURCE).option("rows", str(args.records)).load(),
        PARQUET_FLOOR: spark.read.parquet(parquet_path),
    }
    results: dict[tuple[str, str], list[float]] = {}
    run = 0
    # Round 0 warms up the JVM, the Python workers and their cached clients; only the
    # rounds after it are counted.
    for repeat in range(args.repeats + 1):
        for case, (source_options, floor_options, measure) in cases.items():
            for fmt, options in ((FORMAT_NAME, source_options), (FLOOR_SOURCE, floor_options)):
                run += 1
                progress = _run(spark, fmt, options, workdir / f"checkpoint-{run}")
                value = measure(progress)
                if repeat:
                    results.setdefault((case, fmt), []).append(value)
                label = f"repeat {repeat}" if repeat else "warm-up "
                print(f"  {label} {case:<10} {fmt:<22} {value:>12,.1f}", flush=True)
        for name, frame in batch_frames.items():
            value = _noop_rows_per_s(frame, args.records)
            if repeat:
                results.setdefault(("throughput", name), []).append(value)
            label = f"repeat {repeat}" if repeat else "warm-up "
            print(f"  {label} {'batch':<10} {name:<22} {value:>12,.1f}", flush=True)
        for mode in (AT_LEAST_ONCE, EXACTLY_ONCE):
            run += 1
            sink_options = {
                "kafka.bootstrap.servers": bootstrap,
                "topic": sink,
                "exactlyOnce": str(mode == EXACTLY_ONCE).lower(),
            }
            floor_options = {"rows": str(args.sink_records), **per_batch}
            checkpoint = workdir / f"checkpoint-{run}"
            progress = _run(spark, FLOOR_SOURCE, floor_options, checkpoint, sink_options)
            value = _rows_per_s(progress)
            if repeat:
                results.setdefault(("sink", mode), []).append(value)
            label = f"repeat {repeat}" if repeat else "warm-up "
            print(f"  {label} {'sink':<10} {mode:<22} {value:>12,.1f}", flush=True)
    spark.stop()
    return _report(results, args.png)


def _report(results: dict[tuple[str, str], list[float]], png: str | None) -> int:
    median = {key: statistics.median(values) for key, values in results.items()}
    source_rows = median[("throughput", FORMAT_NAME)]
    floor_rows = median[("throughput", FLOOR_SOURCE)]
    source_ms = median[("overhead", FORMAT_NAME)]
    floor_ms = median[("overhead", FLOOR_SOURCE)]
    overhead_ratio = source_ms / floor_ms
    parquet_rows = median[("throughput", PARQUET_FLOOR)]
    batch_rows = median[("throughput", BATCH_SOURCE)]
    batch_floor_rows = median[("throughput", BATCH_FLOOR)]
    parquet_ratio = source_rows / parquet_rows
    parquet_ok = parquet_ratio >= PARQUET_TARGET_RATIO
    rows_ok = source_rows >= THROUGHPUT_TARGET_ROWS_S
    overhead_ok = overhead_ratio <= OVERHEAD_TARGET_RATIO
    plain_rows = median[("sink", AT_LEAST_ONCE)]
    exact_rows = median[("sink", EXACTLY_ONCE)]
    sink_ratio = exact_rows / plain_rows
    sink_ok = sink_ratio >= EXACTLY_ONCE_TARGET_RATIO
    print()
    print("| measure | tickwheel source | in-memory floor | ratio | target |")
    print("|---|---|---|---|---|")
    print(
        f"| rows/s into noop (median) | {source_rows:,.0f} | {floor_rows:,.0f}"
        f" | {source_rows / floor_rows:.2f}x of floor"
        f" | >= {THROUGHPUT_TARGET_ROWS_S:,} {'met' if rows_ok else 'MISSED'} |"
    )
    print(
        f"| rows/s into noop (median) | {source_rows:,.0f} | Parquet file {parquet_rows:,.0f}"
        f" | {parquet_ratio:.2f}x of Parquet | >= {PARQUET_TARGET_RATIO}x"
        f" {'met' if parquet_ok else 'MISSED'} |"
    )
    print(
        f"| rows/s, batch query into noop (median) | {batch_rows:,.0f}"
        f" | Parquet file {parquet_rows:,.0f} | {batch_rows / parquet_rows:.2f}x of Parquet | - |"
    )
    print(
        f"| rows/s, batch query into noop (median) | {batch_rows:,.0f}"
        f" | in-memory floor {batch_floor_rows:,.0f}"
        f" ({batch_floor_rows / parquet_rows:.2f}x of Parquet)"
        f" | {batch_rows / batch_floor_rows:.2f}x of floor | - |"
    )
    print(
        f"| ms per tiny micro-batch (median) | {source_ms:.0f} | {floor_ms:.0f}"
        f" | {overhead_ratio:.2f}x | <= {OVERHEAD_TARGET_RATIO}x"
        f" {'met' if overhead_ok else 'MISSED'} |"
    )
    print()
    print("| tickwheel sink (in-memory source) | exactly-once | at-least-once | ratio | target |")
    print("|---|---|---|---|---|")
    print(
        f"| rows/s (median) | {exact_rows:,.0f} | {plain_rows:,.0f} | {sink_ratio:.2f}x"
        f" | >= {EXACTLY_ONCE_TARGET_RATIO}x {'met' if sink_ok else 'MISSED'} |"
    )
    save_png(
        png,
        "tickwheel bench spark - availableNow into the noop sink",
        [
            Bars(
                title="throughput",
                unit="rows/s (median)",
                values={
                    "tickwheel source": {"": source_rows},
                    "in-memory floor": {"": floor_rows},
                    "Parquet file": {"": parquet_rows},
                },
            ),
            Bars(
                title="tiny micro-batches",
                unit="ms per micro-batch (median)",
                values={"tickwheel source": {"": source_ms}, "in-memory floor": {"": floor_ms}},
            ),
            Bars(
                title="tickwheel sink",
                unit="rows/s (median)",
                values={EXACTLY_ONCE: {"": exact_rows}, AT_LEAST_ONCE: {"": plain_rows}},
            ),
        ],
    )
    return 0 if rows_ok and parquet_ok and overhead_ok and sink_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
