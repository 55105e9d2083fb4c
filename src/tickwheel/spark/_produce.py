"""Turning the sink's Arrow record batches into ``Producer.produce`` calls.

Both sinks -- the at-least-once one in ``_writer`` and the transactional one in
``_exactly_once`` -- hand every row of a record batch to a librdkafka ``Producer`` the
same way: ``value`` and ``key`` as bytes (strings UTF-8 encoded), the option ``topic``
or else the row's ``topic`` -- the option overrides the column, as in
Spark -- the row's ``partition`` or else the producer's partitioner, and ``headers``.
``Deliveries`` counts the delivery reports and keeps the first failure, so a task can
tell that every record it produced was acknowledged.

Concurrency: one task (one thread) uses a ``Deliveries`` and a producer at a time;
librdkafka calls ``Deliveries`` from that thread's ``poll``/``flush``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer

from tickwheel.spark._errors import SparkKafkaError

# How long to let librdkafka drain its queue when it is full before retrying a produce.
_QUEUE_FULL_POLL_S = 0.05
# Unassigned: let the producer's partitioner choose.
_ANY_PARTITION = -1


class Deliveries:
    """Counts delivery reports and keeps the first failure."""

    def __init__(self) -> None:
        self.delivered = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
        elif self.first_error is None:
            self.first_error = error

    def check(self, produced: int) -> None:
        """Raise unless all ``produced`` records were acknowledged."""
        if self.first_error is not None:
            error = self.first_error
            raise SparkKafkaError(f"Kafka refused a record: {error.str()}", error_code=error.code())
        if self.delivered != produced:
            raise SparkKafkaError(f"only {self.delivered} of {produced} records were acknowledged")


def produce_batch(
    producer: Producer, option_topic: str | None, batch: pa.RecordBatch, deliveries: Deliveries
) -> int:
    """Produce every row of ``batch`` to ``option_topic``, or when it is None to each
    row's ``topic``; returns how many rows it had."""
    columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    rows: int = batch.num_rows
    values = _bytes_column(columns["value"])
    keys = _bytes_column(columns["key"]) if "key" in columns else [None] * rows
    if option_topic is not None or "topic" not in columns:
        topics: list[str | None] = [option_topic] * rows
    else:
        topics = columns["topic"].to_pylist()
    partitions = columns["partition"].to_pylist() if "partition" in columns else [None] * rows
    headers = columns["headers"].to_pylist() if "headers" in columns else [None] * rows
    for row in range(rows):
        topic = topics[row]
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
