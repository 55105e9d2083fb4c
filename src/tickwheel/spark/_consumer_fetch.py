"""The source's librdkafka reader: one offset range through a confluent-kafka Consumer.

The fallback of ``_fetch`` for what the wire fetcher does not speak (any
``kafka.security.protocol`` but PLAINTEXT: TLS, SASL): slower, since librdkafka hands
out one ``Message`` per record, but it reads through every security setting librdkafka
has. The task positions its worker's cached consumer with ``assign`` at
``from_offset`` (a seek; no group, no commit), pulls messages in batches, and yields
``pyarrow.RecordBatch``\\es of at most ``ARROW_BATCH_ROWS`` rows in the source's Arrow
schema. librdkafka applies the isolation level itself (read_committed by default).

Offsets that are missing inside a range are told apart by the log start offset:
below it, records were deleted (retention or DeleteRecords) -- data loss, failing the
task when ``failOnDataLoss`` is true and skipped otherwise; at or above it, they were
compacted away or were transaction markers -- normal. A range that the log no longer
reaches (an end-of-partition event short of ``until_offset``) is data loss too.

Concurrency: runs in one Spark Python worker thread per task; the consumer it borrows
from ``_clients`` is used by no one else while the task runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from tickwheel.spark._batch_decode import arrow_schema
from tickwheel.spark._clients import METADATA_TIMEOUT_S, reader_consumer
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._offset_range import OffsetRange
from tickwheel.spark._options import SourceOptions

# Spark reads Arrow batches of 10k-50k rows fastest (see the benchmark notes); smaller
# batches pay per-batch overhead, larger ones hold more memory per task.
ARROW_BATCH_ROWS = 20_000
# The longest single wait in consume(): bounds the delay a gap in a range can cause.
POLL_SLICE_S = 0.2
_MS_TO_US = 1000
_MS_PER_S = 1000
# librdkafka's timestamp types are Kafka's plus one (0 = not available).
_LIBRDKAFKA_TIMESTAMP_TYPE_OFFSET = 1

logger = logging.getLogger(__name__)


def consumer_read_range(
    options: SourceOptions, offset_range: OffsetRange
) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` (not empty) as Arrow record batches."""
    consumer = reader_consumer(options.client_config)
    consumer.assign(
        [TopicPartition(offset_range.topic, offset_range.partition, offset_range.from_offset)]
    )
    try:
        yield from _RangeReader(options, offset_range, consumer).batches()
    finally:
        consumer.unassign()


class _RangeReader:
    """The state of reading one range: where the next record should be."""

    def __init__(self, options: SourceOptions, offset_range: OffsetRange, consumer: Consumer):
        self._options = options
        self._range = offset_range
        self._consumer = consumer
        self._next_offset = offset_range.from_offset
        self._schema = arrow_schema(options.include_headers)

    def batches(self) -> Iterator[pa.RecordBatch]:
        until = self._range.until_offset
        timeout_s = self._options.poll_timeout_ms / _MS_PER_S
        deadline = time.monotonic() + timeout_s
        while self._next_offset < until:
            wanted = min(ARROW_BATCH_ROWS, until - self._next_offset)
            # consume() waits until it has `wanted` messages or its timeout passes; a
            # range with gaps never fills it, so wait in short slices and keep the
            # user's poll timeout as the limit on a stall.
            messages = self._consumer.consume(wanted, min(POLL_SLICE_S, timeout_s))
            if not messages:
                if time.monotonic() > deadline:
                    raise SparkKafkaError(
                        f"no record of {self._describe()} at offset {self._next_offset} within"
                        f" kafkaConsumer.pollTimeoutMs={self._options.poll_timeout_ms}"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            records, offsets = self._accept(messages)
            if records:
                yield self._to_arrow(records, offsets)

    def _accept(self, messages: list[Message]) -> tuple[list[Message], list[int]]:
        """The records inside the range and their offsets; applies failOnDataLoss to gaps."""
        # Every fetched record and end-of-partition event carries an offset.
        offsets = cast(list[int], list(map(Message.offset, messages)))
        first, last = self._next_offset, len(messages) - 1
        if (
            offsets[0] == first
            and offsets[last] == first + last
            and not any(map(Message.error, messages))
        ):
            # The common case: consecutive records from where the range stands, no event.
            keep = min(len(messages), self._range.until_offset - first)
            self._next_offset = first + keep
            return messages[:keep], offsets[:keep]
        records = self._accept_one_by_one(messages)
        return records, cast(list[int], [m.offset() for m in records])

    def _accept_one_by_one(self, messages: Sequence[Message]) -> list[Message]:
        """``_accept`` for batches with gaps or events, looking at each message."""
        until = self._range.until_offset
        records: list[Message] = []
        for message in messages:
            error = message.error()
            offset = message.offset() or 0
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise SparkKafkaError(
                        f"fetching {self._describe()}: {error.str()}", error_code=error.code()
                    )
                if offset < until:
                    self._lost(
                        max(offset, self._next_offset), until, f"the log now ends at {offset}"
                    )
                # At or past the range's end: any offsets left were transaction markers
                # or aborted records, which a read_committed consumer skips.
                self._next_offset = until
                break
            if offset > self._next_offset:
                self._check_gap(offset)
            if offset >= until:
                self._next_offset = until
                break
            records.append(message)
            self._next_offset = offset + 1
        return records

    def _check_gap(self, offset: int) -> None:
        low, _ = self._consumer.get_watermark_offsets(
            TopicPartition(self._range.topic, self._range.partition), timeout=METADATA_TIMEOUT_S
        )
        if low > self._next_offset:
            self._lost(self._next_offset, min(low, offset), f"the log now starts at {low}")

    def _lost(self, first: int, end: int, reason: str) -> None:
        message = f"data loss in {self._describe()}: offsets {first}..{end - 1} are gone ({reason})"
        if self._options.fail_on_data_loss:
            raise SparkKafkaError(message + "; set failOnDataLoss=false to skip them")
        logger.warning("%s; skipped (failOnDataLoss=false)", message)

    def _describe(self) -> str:
        return f"{self._range.topic}-{self._range.partition}"

    def _to_arrow(self, records: list[Message], offsets: list[int]) -> pa.RecordBatch:
        # map() over the unbound methods and Arrow compute keep the per-record work in C:
        # this loop is the source's throughput.
        schema = self._schema
        count = len(records)
        kinds, stamps_ms = zip(*map(Message.timestamp, records), strict=True)
        columns = [
            pa.array(list(map(Message.key, records)), schema.field(0).type),
            pa.array(list(map(Message.value, records)), schema.field(1).type),
            pa.repeat(pa.scalar(self._range.topic, schema.field(2).type), count),
            pa.repeat(pa.scalar(self._range.partition, schema.field(3).type), count),
            pa.array(offsets, schema.field(4).type),
            pc.multiply(pa.array(stamps_ms, pa.int64()), _MS_TO_US).cast(schema.field(5).type),
            pc.subtract(pa.array(kinds, schema.field(6).type), _LIBRDKAFKA_TIMESTAMP_TYPE_OFFSET),
        ]
        if self._options.include_headers:
            columns.append(pa.array(list(map(Message.headers, records)), schema.field(7).type))
        return pa.RecordBatch.from_arrays(columns, schema=schema)
