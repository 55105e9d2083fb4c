"""Executor side of the source: read one offset range of one partition into Arrow.

Spark hands each task an ``OffsetRange`` -- one topic-partition and the offsets
``[from_offset, until_offset)`` the driver planned -- and ``read_range`` yields its
records as ``pyarrow.RecordBatch``\\es in exactly the Arrow schema Spark expects, which
Spark takes without converting row by row.

Two ways to read, chosen per range by the client configuration:

- The wire path (PLAINTEXT, the default): fetch record batches as bytes with the Kafka
  protocol (``_wire_fetch``) and decode them into Arrow columns (``_batch_decode``),
  with no Python object per record. The isolation level is the fetch's own:
  read_committed (the default, as librdkafka's) drops control batches and aborted
  transactions' batches using the response's ``aborted_transactions``, as a Java or
  librdkafka consumer at that level does; ``kafka.isolation.level=read_uncommitted``
  reads them all but markers.
- The librdkafka path (``_consumer_fetch``) for any ``kafka.security.protocol`` other
  than PLAINTEXT (SSL, SASL_*), which the wire path does not speak: a cached
  confluent-kafka ``Consumer``, a ``Message`` per record. confluent-kafka also stays
  the driver's planning client (``_clients.KafkaMetadata``: topics, ListOffsets) and
  answers the wire path's rare question of where a partition's log starts and ends
  after an OFFSET_OUT_OF_RANGE (``get_watermark_offsets``).

Offsets missing inside a range are told apart by the log start offset (each Fetch
response carries it): below it, records were deleted (retention or DeleteRecords) --
data loss, failing the task when ``failOnDataLoss`` is true and skipped otherwise; at
or above it, they were compacted away or were transaction markers -- normal. An
OFFSET_OUT_OF_RANGE, or a log that ends short of ``until_offset``, is data loss too.
A read that makes no progress for ``kafkaConsumer.pollTimeoutMs`` fails the task.

Concurrency: runs in one Spark Python worker thread per task; the fetcher or consumer
it borrows from its per-process cache is used by no one else while the task runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from tickwheel.spark._batch_decode import FetchWindow, decode_fetch
from tickwheel.spark._clients import METADATA_TIMEOUT_S, reader_consumer
from tickwheel.spark._consumer_fetch import consumer_read_range
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._offset_range import OffsetRange
from tickwheel.spark._options import SourceOptions
from tickwheel.spark._wire_fetch import PartitionFetch, WireFetcher, supports, wire_fetcher

__all__ = ["OffsetRange", "read_range"]

_MS_PER_S = 1000
# How long to wait before fetching again when a fetch brought nothing new.
_IDLE_BACKOFF_S = 0.05

logger = logging.getLogger(__name__)


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``offset_range`` as Arrow record batches."""
    if offset_range.size <= 0:
        return
    if not supports(options.client_config):
        yield from consumer_read_range(options, offset_range)
        return
    fetcher = wire_fetcher(options.client_config)
    yield from _WireRangeReader(options, offset_range, fetcher).batches()


class _WireRangeReader:
    """The state of reading one range over the wire: the next offset wanted."""

    def __init__(self, options: SourceOptions, offset_range: OffsetRange, fetcher: WireFetcher):
        self._options = options
        self._range = offset_range
        self._fetcher = fetcher
        self._next_offset = offset_range.from_offset

    def batches(self) -> Iterator[pa.RecordBatch]:
        topic, partition, until = self._range.topic, self._range.partition, self._range.until_offset
        timeout_s = self._options.poll_timeout_ms / _MS_PER_S
        deadline = time.monotonic() + timeout_s
        while self._next_offset < until:
            answer = self._fetcher.fetch(topic, partition, self._next_offset, deadline)
            if answer.error_code == ErrorCode.offset_out_of_range:
                self._out_of_range()
                self._check_deadline(deadline)
                continue
            if answer.error_code != ErrorCode.none:
                raise SparkKafkaError(
                    f"fetching {self._describe()} at offset {self._next_offset}:"
                    f" {answer.error_code.name}",
                    error_code=int(answer.error_code),
                )
            if answer.log_start_offset > self._next_offset:
                start = answer.log_start_offset
                self._lost(self._next_offset, min(start, until), f"the log now starts at {start}")
                self._next_offset = min(start, until)
                continue
            window = FetchWindow(
                topic,
                partition,
                self._next_offset,
                until,
                self._fetcher.read_committed,
                self._options.include_headers,
            )
            decoded = decode_fetch(answer.records, answer.aborted, window)
            if decoded.next_offset > self._next_offset:
                self._next_offset = min(decoded.next_offset, until)
                deadline = time.monotonic() + timeout_s
                yield from decoded.batches
            elif not self._ends_early(answer):
                self._check_deadline(deadline)
                time.sleep(_IDLE_BACKOFF_S)

    def _check_deadline(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise SparkKafkaError(
                f"no record of {self._describe()} at offset {self._next_offset} within"
                f" kafkaConsumer.pollTimeoutMs={self._options.poll_timeout_ms}"
            )

    def _ends_early(self, answer: PartitionFetch) -> bool:
        """Whether an answer without a whole batch says the log ends before the range
        does (then the rest is data loss); False when it says nothing of the kind."""
        if answer.records:
            raise SparkKafkaError(
                f"the record batch of {self._describe()} at offset {self._next_offset} is"
                " larger than the fetch allows: raise kafka.max.partition.fetch.bytes"
            )
        end = answer.last_stable_offset if self._fetcher.read_committed else answer.high_watermark
        if not 0 <= end <= self._next_offset:
            return False
        # Offsets left below ``end`` were markers or aborted records the fetch skipped.
        if end < self._range.until_offset:
            self._lost(self._next_offset, self._range.until_offset, f"the log now ends at {end}")
        self._next_offset = self._range.until_offset
        return True

    def _out_of_range(self) -> None:
        """OFFSET_OUT_OF_RANGE: the offsets below the log start, or past its end, are gone."""
        low, high = reader_consumer(self._options.client_config).get_watermark_offsets(
            TopicPartition(self._range.topic, self._range.partition), timeout=METADATA_TIMEOUT_S
        )
        until = self._range.until_offset
        if low > self._next_offset:
            self._lost(self._next_offset, min(low, until), f"the log now starts at {low}")
            self._next_offset = min(low, until)
        elif high <= self._next_offset:
            self._lost(self._next_offset, until, f"the log now ends at {high}")
            self._next_offset = until

    def _lost(self, first: int, end: int, reason: str) -> None:
        message = f"data loss in {self._describe()}: offsets {first}..{end - 1} are gone ({reason})"
        if self._options.fail_on_data_loss:
            raise SparkKafkaError(message + "; set failOnDataLoss=false to skip them")
        logger.warning("%s; skipped (failOnDataLoss=false)", message)

    def _describe(self) -> str:
        return f"{self._range.topic}-{self._range.partition}"
