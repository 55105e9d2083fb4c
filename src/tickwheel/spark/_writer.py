"""The sink: streaming and batch writers that produce DataFrame rows to Kafka.

Each task receives its rows as Arrow record batches, produces every row with its
worker's cached ``Producer`` (``acks=all`` by default), then ``flush()``\\es and waits for
every delivery report before returning its commit message. So when Spark commits a
batch, every record of it is acknowledged by all in-sync replicas; a task with any
failed delivery raises, and Spark fails the batch.

Delivery guarantee: **at-least-once.** Kafka records cannot be taken back, and the
producer is not transactional. If a query dies after its tasks flushed but before
Spark recorded the batch as committed, the restarted query replays that batch and its
records are written a second time. ``commit`` itself has no effect on Kafka, so
calling it again for a batch id already committed (as a restart may) changes nothing:
it only logs the batch's record count. ``abort`` likewise cannot undo the records
already delivered by tasks that succeeded; it logs how many there were. Consumers that
need exactly-once deduplicate, e.g. by key.

Concurrency: ``write`` runs in executor worker processes (one task per process at a
time); ``commit``/``abort`` run on the driver, each on a fresh writer instance.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from tickwheel.spark._clients import writer_producer
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions

# The local property Spark sets on every task of a streaming micro-batch.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# How long to let librdkafka drain its queue when it is full before retrying a produce.
_QUEUE_FULL_POLL_S = 0.05
# Unassigned: let the producer's partitioner choose.
_ANY_PARTITION = -1

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one task reports: how many records it delivered, and for which batch."""

    records: int
    task_partition: int
    batch_id: int | None


class _Deliveries:
    """Counts delivery reports and keeps the first failure."""

    def __init__(self) -> None:
        self.delivered = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
        elif self.first_error is None:
            self.first_error = error


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
    """Produce every row of ``batches``, wait for all acknowledgements, report the count."""
    producer = writer_producer(options.client_config)
    deliveries = _Deliveries()
    produced = 0
    for batch in batches:
        produced += _produce_batch(producer, options, batch, deliveries)
        producer.poll(0)
    producer.flush()
    if deliveries.first_error is not None:
        error = deliveries.first_error
        raise SparkKafkaError(f"Kafka refused a record: {error.str()}", error_code=error.code())
    if deliveries.delivered != produced:
        raise SparkKafkaError(
            f"only {deliveries.delivered} of {produced} records were acknowledged"
        )
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return KafkaCommitMessage(
        records=produced,
        task_partition=context.partitionId() if context is not None else 0,
        batch_id=None if batch_id is None else int(batch_id),
    )


def _produce_batch(
    producer: Producer, options: SinkOptions, batch: pa.RecordBatch, deliveries: _Deliveries
) -> int:
    columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    rows: int = batch.num_rows
    values = _bytes_column(columns["value"])
    keys = _bytes_column(columns["key"]) if "key" in columns else [None] * rows
    topics = columns["topic"].to_pylist() if "topic" in columns else [options.topic] * rows
    partitions = columns["partition"].to_pylist() if "partition" in columns else [None] * rows
    headers = columns["headers"].to_pylist() if "headers" in columns else [None] * rows
    for row in range(rows):
        topic = topics[row] if topics[row] is not None else options.topic
        if topic is None:
            raise SparkKafkaError("a row has a null topic and the option topic is not set")
        row_headers = headers[row]
        kwargs: dict[str, Any] = {
            "value": values[row],
            "key": keys[row],
            "partition": _ANY_PARTITION if partitions[row] is None else partitions[row],
            "on_delivery": deliveries,
        }
        if row_headers:
            kwargs["headers"] = [(h["key"], h["value"]) for h in row_headers]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                producer.poll(_QUEUE_FULL_POLL_S)
    return rows


def _bytes_column(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [None if v is None else v.encode() for v in column.to_pylist()]
    values: list[bytes | None] = column.to_pylist()
    return values


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(int(m.records) for m in messages if isinstance(m, KafkaCommitMessage))


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("tickwheel")``: append a DataFrame's rows to Kafka."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self._options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("wrote %d records to Kafka", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.warning(
            "write aborted; %d records already delivered stay in Kafka", _total(messages)
        )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("tickwheel")``: an at-least-once Kafka sink per micro-batch."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self._options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        logger.info("batch %d: %d records in Kafka", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        logger.warning(
            "batch %d aborted; %d records already delivered stay in Kafka",
            batchId,
            _total(messages),
        )
