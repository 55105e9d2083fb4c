"""The sink: streaming and batch writers that produce DataFrame rows to Kafka.

Delivery guarantee: **at-least-once** by default, as Spark's own Kafka sink;
**exactly-once** for ``read_committed`` readers of a streaming query with
``exactlyOnce=true`` (see ``_exactly_once`` for the design and its assumptions: a
deterministic batch -> partition plan, a marker topic).

At-least-once: each task receives its rows as Arrow record batches, produces every row
with its worker's cached ``Producer`` (``acks=all`` by default), then ``flush()``\\es
and waits for every delivery report before returning its commit message. So when Spark
commits a batch, every record of it is acknowledged by all in-sync replicas; a task
with any failed delivery raises, and Spark fails the batch. Kafka records cannot be
taken back: if a query dies after its tasks flushed but before Spark recorded the batch
as committed, the restarted query replays that batch and its records are written a
second time. ``abort`` likewise cannot undo the records already delivered by tasks
that succeeded; it logs how many there were.

Exactly-once: each task writes its part ``(query, batch, partition)`` of the
micro-batch in one Kafka transaction that also commits the part's marker, after
fencing earlier attempts and skipping a part whose marker is already there. The query
id and batch id come from the task's local properties, which Spark sets on every task
of a micro-batch. Batch writes (``df.write``) refuse the option: without a query and a
checkpoint there is no replay to make idempotent.

Avro columns (``valueFormat=avro``) are encoded in the task before either mode
produces them (``_avro_write``: the schema was registered on the driver).

In both modes ``commit`` and ``abort`` on the driver only log: the tasks' writes are
final (or, exactly-once, aborted) before the driver hears of them, and calling ``commit``
again for a batch already committed (as a restart may) changes nothing.

Concurrency: ``write`` runs in executor worker processes (one task per process at a
time); ``commit``/``abort`` run on the driver, each on a fresh writer instance.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tickwheel.spark._avro_write import AvroEncoding, encode_batches
from tickwheel.spark._clients import writer_producer
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._exactly_once import TaskPart, write_exactly_once
from tickwheel.spark._options import SinkOptions
from tickwheel.spark._produce import Deliveries, produce_batch

# The local properties Spark sets on every task of a streaming micro-batch.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one task reports: how many records it delivered, and for which batch.

    ``already_committed``: exactly-once only, the task found its part written by an
    earlier attempt and wrote nothing."""

    records: int
    task_partition: int
    batch_id: int | None
    already_committed: bool = False


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
    """Produce every row of ``batches``, wait for all acknowledgements, report the count."""
    producer = writer_producer(options.client_config)
    deliveries = Deliveries()
    produced = 0
    for batch in batches:
        produced += produce_batch(producer, options.topic, batch, deliveries)
        producer.poll(0)
    producer.flush()
    deliveries.check(produced)
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return KafkaCommitMessage(
        records=produced,
        task_partition=context.partitionId() if context is not None else 0,
        batch_id=None if batch_id is None else int(batch_id),
    )


def write_part(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
    """Exactly-once: write this task's part of the micro-batch (see ``_exactly_once``)."""
    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if context is None or query_id is None or batch_id is None:
        raise SparkKafkaError("exactlyOnce=true works in a streaming query's tasks only")
    part = TaskPart(query_id=query_id, batch_id=int(batch_id), partition=context.partitionId())
    outcome = write_exactly_once(options, batches, part)
    return KafkaCommitMessage(
        records=outcome.records,
        task_partition=part.partition,
        batch_id=part.batch_id,
        already_committed=outcome.already_committed,
    )


def _encoded(
    batches: Iterator[pa.RecordBatch], avro: tuple[AvroEncoding, ...]
) -> Iterator[pa.RecordBatch]:
    """``batches`` with their Avro columns encoded (``_avro_write``), if any."""
    return encode_batches(batches, avro) if avro else batches


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(int(m.records) for m in messages if isinstance(m, KafkaCommitMessage))


def _replayed(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(1 for m in messages if isinstance(m, KafkaCommitMessage) and m.already_committed)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("tickwheel")``: append a DataFrame's rows to Kafka."""

    def __init__(self, options: SinkOptions, *, avro: tuple[AvroEncoding, ...] = ()) -> None:
        self._options = options
        self._avro = avro

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self._options, _encoded(iterator, self._avro))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("wrote %d records to Kafka", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning(
            "write aborted; %d records already delivered stay in Kafka", _total(messages)
        )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("tickwheel")``: a Kafka sink per micro-batch, at-least-once
    or (``exactlyOnce=true``) exactly-once."""

    def __init__(self, options: SinkOptions, *, avro: tuple[AvroEncoding, ...] = ()) -> None:
        self._options = options
        self._avro = avro

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        batches = _encoded(iterator, self._avro)
        if self._options.exactly_once:
            return write_part(self._options, batches)
        return write_batches(self._options, batches)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        logger.info(
            "batch %d: %d records in Kafka, %d parts written by an earlier attempt",
            batchId,
            _total(messages),
            _replayed(messages),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        if self._options.exactly_once:
            logger.warning(
                "batch %d aborted; %d records committed by finished parts (a retry skips them)",
                batchId,
                _total(messages),
            )
            return
        logger.warning(
            "batch %d aborted; %d records already delivered stay in Kafka",
            batchId,
            _total(messages),
        )
