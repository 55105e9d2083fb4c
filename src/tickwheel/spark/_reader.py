"""Driver side of the source: plan offset ranges for streaming and batch queries.

Streaming (``KafkaStreamReader``). Spark keeps one reader on the driver for the life of
a query and asks it, per trigger:

1. ``initialOffset()`` -- only for a query without a checkpoint: the starting bound
   (``startingTimestamp``, ``startingOffsetsByTimestamp`` or ``startingOffsets``)
   resolved against the logs, for every partition the subscription selects now; a
   time through ListOffsets by timestamp.
2. ``latestOffset(start, limit)`` -- where the next micro-batch ends: each partition's
   log end offset (or, under ``Trigger.AvailableNow``, the end recorded by
   ``prepareForTriggerAvailableNow``), capped by the read limit (``maxOffsetsPerTrigger``
   becomes ``ReadMaxRows``; see ``limit_offsets``). With ``minOffsetsPerTrigger`` it
   returns ``start`` -- no batch -- while fewer records wait and less than
   ``maxTriggerDelay`` has passed since the last batch it let through, as Spark's
   connector does (the first call of a reader always lets one through, so a one-time
   trigger reads everything). PySpark's ``ReadMinRows`` cannot carry the delay, so the
   reader keeps that state itself and Spark's read limit stays ``maxOffsetsPerTrigger``'s;
   the minimum does not apply under ``Trigger.AvailableNow``. A partition that appears
   after the query started -- a new topic matching the subscription or partitions added
   to a topic -- is read from offset 0, its beginning. A partition never leaves the
   offsets once in them (Spark needs both ends of a range).
3. ``partitions(start, end)`` -- one ``OffsetRange`` per partition with records to
   read, split further by ``minPartitions`` (``split_ranges``). Spark calls it again
   with checkpointed offsets when it replays the last uncommitted batch after a
   restart, so it depends on its arguments only.
4. ``commit(end)`` -- nothing to do: offsets live in Spark's checkpoint, never in a
   consumer group.
5. ``reportLatestOffset()`` -- the log end offsets the last ``latestOffset`` saw, which
   Spark puts in the progress as the source's ``latestOffset``. PySpark 4.3 gives a
   Python source no way to report progress ``metrics`` (its JVM stream does not
   implement ``ReportsSourceMetrics`` and the Python runner has no call for them), so
   Spark's ``avg/max/minOffsetsBehindLatest`` are computed by the user from
   ``endOffset`` and ``latestOffset`` (docs/spark.md).

Offsets that went backwards (a deleted and re-created topic) or partitions that
vanished are data loss: the query fails when ``failOnDataLoss`` is true, and otherwise
skips them.

Batch (``KafkaBatchReader``): one ``OffsetRange`` per partition (or more, with
``minPartitions``) from the starting to the ending bound, resolved when Spark plans
the query.

Both readers are pickled into executor tasks, which only call ``read()``; the
``KafkaMetadata`` client is created lazily on the driver and never pickled. A reader
with Avro columns carries them as planned (``_avro_read.AvroColumn``: the subject's
latest version when the query started) and the schema Spark planned with, and its
tasks decode them into that schema.

Concurrency: Spark calls a driver reader from one thread at a time; ``read()`` runs
in executor worker processes on their own pickled copies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from tickwheel.spark._avro_read import AvroColumn, decode_batches
from tickwheel.spark._clients import KafkaMetadata
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._fetch import OffsetRange, read_range
from tickwheel.spark._offsets import (
    LATEST,
    OffsetMap,
    TopicPartitionId,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    sorted_offsets,
)
from tickwheel.spark._options import OffsetBound, SourceOptions

logger = logging.getLogger(__name__)
_NOTHING = OffsetRange("", 0, 0, 0)
_MS_PER_S = 1000


def _wall_clock_ms() -> int:
    """Milliseconds since the epoch (Spark measures maxTriggerDelay on the wall clock)."""
    return int(time.time() * _MS_PER_S)


def split_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """``ranges`` split as Spark's KafkaOffsetRangeCalculator does. First, with
    ``max_records_per_partition``, each range into the fewest even parts of at most
    that many offsets. Then, when fewer than ``min_partitions`` remain, into about
    ``min_partitions``: each range gets a number of parts proportional to its size
    (rounded half up, at least one), the ranges getting one part being left out of the
    proportion. A range's parts differ in size by at most one offset, the remainder
    going to the last parts. Empty ranges are dropped.
    """
    nonempty = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        # -(-a // b) is the ceiling of a / b: the fewest parts of at most b offsets.
        nonempty = [
            part
            for r in nonempty
            for part in _even_parts(r, -(-r.size // max_records_per_partition))
        ]
    if min_partitions is None or len(nonempty) >= min_partitions:
        return nonempty
    total = sum(r.size for r in nonempty)
    whole = [r for r in nonempty if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in whole)
    split_parts = max(min_partitions - len(whole), 1)
    return [
        part
        for r in nonempty
        for part in _even_parts(
            r, 1 if r in whole else _part_count(r.size, split_total, split_parts)
        )
    ]


def _even_parts(offset_range: OffsetRange, parts: int) -> list[OffsetRange]:
    """``offset_range`` in ``parts`` non-empty pieces whose sizes differ by at most one."""
    result: list[OffsetRange] = []
    begin, remaining = offset_range.from_offset, offset_range.size
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        if size > 0:
            result.append(
                OffsetRange(offset_range.topic, offset_range.partition, begin, begin + size)
            )
        begin += size
    return result


def _part_count(size: int, total: int, parts: int) -> int:
    """``round(size / total * parts)``, half up, at least 1, in whole numbers."""
    return max((2 * size * parts + total) // (2 * total), 1)


class _Planner:
    """What both readers share: options, lazy metadata, and turning offsets into ranges."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._metadata: KafkaMetadata | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors need the options only; the admin client holds sockets and threads.
        return {"options": self.options, "_metadata": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self._metadata = None

    @property
    def metadata(self) -> KafkaMetadata:
        if self._metadata is None:
            self._metadata = KafkaMetadata(self.options.client_config)
        return self._metadata

    def selected_partitions(self) -> list[TopicPartitionId]:
        return self.options.subscription.select(self.metadata.partition_counts())

    def bound_offsets(
        self, bound: OffsetBound, partitions: Sequence[TopicPartitionId]
    ) -> OffsetMap:
        """``bound`` for each of ``partitions``, resolved to real offsets."""
        unknown = sorted(bound.named_partitions() - set(partitions))
        if unknown:
            names = ", ".join(f"{t}-{p}" for t, p in unknown)
            raise SparkKafkaError(f"offsets given for partitions that are not read: {names}")
        stamps = bound.timestamps_for(partitions)
        given = bound.per_partition()
        wanted = {tp: given.get(tp, bound.default) for tp in partitions if tp not in stamps}
        for tp, found in self.metadata.offsets_for_times(stamps).items():
            offset = found
            if found < 0:
                if bound.no_match is None:
                    raise SparkKafkaError(
                        f"{tp[0]}-{tp[1]} has no record at or after timestamp {stamps[tp]}"
                        " (startingOffsetsByTimestampStrategy=error; set it to latest to"
                        " start there)"
                    )
                offset = bound.no_match
            wanted[tp] = offset
        return self.metadata.resolve(wanted)

    def ranges(self, start: OffsetMap, end: OffsetMap) -> list[InputPartition]:
        """The ``OffsetRange``\\s from ``start`` to ``end`` (see ``split_ranges``)."""
        ranges: list[OffsetRange] = []
        for tp, until in end.items():
            begin = start.get(tp, 0)
            if until < begin:
                self.data_loss(f"{tp[0]}-{tp[1]} went back from offset {begin} to {until}")
            elif until > begin:
                ranges.append(OffsetRange(tp[0], tp[1], begin, until))
        # Given no partition, Spark still runs one task and calls read(None): give it an
        # empty range instead.
        planned: list[InputPartition] = [
            *split_ranges(
                ranges, self.options.min_partitions, self.options.max_records_per_partition
            )
        ]
        return planned or [_NOTHING]

    def data_loss(self, what: str) -> None:
        if self.options.fail_on_data_loss:
            raise SparkKafkaError(f"data loss: {what}; set failOnDataLoss=false to go on")
        logger.warning("data loss: %s; going on (failOnDataLoss=false)", what)

    def close(self) -> None:
        if self._metadata is not None:
            self._metadata.close()
            self._metadata = None


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader over Kafka topic-partitions with admission control."""

    def __init__(
        self,
        options: SourceOptions,
        *,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        avro: tuple[AvroColumn, ...] = (),
        schema: StructType | None = None,
    ) -> None:
        self._planner = _Planner(options)
        self._avro = avro
        self._schema = schema
        self._available_now_end: OffsetMap | None = None
        self._clock_ms = clock_ms
        # When the last batch was let through (Spark's connector starts from 0 too, so
        # the first call never waits).
        self._last_trigger_ms = 0
        self._latest_seen: OffsetMap | None = None

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark API)
        planner = self._planner
        partitions = planner.selected_partitions()
        return offsets_to_json(planner.bound_offsets(planner.options.starting, partitions))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark API)
        max_records = self._planner.options.max_offsets_per_trigger
        return ReadAllAvailable() if max_records is None else ReadMaxRows(max_records)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark API)
        self._available_now_end = self._log_end_offsets()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: N802 (Spark API)
        begin = offsets_from_json(start, what="start offset")
        latest = (
            self._available_now_end
            if self._available_now_end is not None
            else self._log_end_offsets()
        )
        for tp in begin.keys() - latest.keys():
            self._planner.data_loss(f"partition {tp[0]}-{tp[1]} is gone")
        # A vanished partition stays, at its start offset: the range is empty.
        latest = sorted_offsets({**begin, **latest})
        self._latest_seen = latest
        if self._delays_batch(begin, latest):
            return offsets_to_json(begin)
        if isinstance(limit, ReadMaxRows):
            latest = limit_offsets(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def _delays_batch(self, begin: OffsetMap, latest: OffsetMap) -> bool:
        """Whether minOffsetsPerTrigger holds the next batch back (see the module doc)."""
        options = self._planner.options
        min_records = options.min_offsets_per_trigger
        if min_records is None or self._available_now_end is not None:
            return False
        now_ms = self._clock_ms()
        if now_ms - self._last_trigger_ms < options.max_trigger_delay_ms:
            waiting = sum(max(0, latest[tp] - begin.get(tp, 0)) for tp in latest)
            if waiting < min_records:
                return True
        self._last_trigger_ms = now_ms
        return False

    def reportLatestOffset(self) -> dict[str, Any] | None:  # noqa: N802 (Spark API)
        """The log end offsets the last ``latestOffset`` call saw (progress ``latestOffset``)."""
        return None if self._latest_seen is None else offsets_to_json(self._latest_seen)

    def _log_end_offsets(self) -> OffsetMap:
        # A topic deleted between the listing and ListOffsets is left out here, and
        # found gone by latestOffset as one missing from the listing would be.
        planner = self._planner
        return planner.metadata.log_offsets(planner.selected_partitions(), LATEST, gone_ok=True)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return self._planner.ranges(
            offsets_from_json(start, what="start offset"), offsets_from_json(end, what="end offset")
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self._planner.options, partition, self._avro, self._schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets are in Spark's checkpoint already."""

    def stop(self) -> None:
        self._planner.close()


class KafkaBatchReader(DataSourceReader):
    """Reader of a fixed offset range per partition (``startingOffsets``..``endingOffsets``)."""

    def __init__(
        self,
        options: SourceOptions,
        *,
        avro: tuple[AvroColumn, ...] = (),
        schema: StructType | None = None,
    ) -> None:
        self._planner = _Planner(options)
        self._avro = avro
        self._schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        planner = self._planner
        partitions = planner.selected_partitions()
        start = planner.bound_offsets(planner.options.starting, partitions)
        end = planner.bound_offsets(planner.options.ending, partitions)
        planner.close()
        return planner.ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self._planner.options, partition, self._avro, self._schema)


def _read(
    options: SourceOptions,
    partition: InputPartition,
    avro: tuple[AvroColumn, ...],
    schema: StructType | None,
) -> Iterator[pa.RecordBatch]:
    """The records of ``partition``, Avro columns decoded into the planned ``schema``."""
    batches = read_range(options, _offset_range(partition))
    if not avro or schema is None:
        return batches
    return decode_batches(batches, avro, schema)


def _offset_range(partition: InputPartition) -> OffsetRange:
    if not isinstance(partition, OffsetRange):
        raise TypeError(f"expected an OffsetRange from partitions(), got {partition!r}")
    return partition
