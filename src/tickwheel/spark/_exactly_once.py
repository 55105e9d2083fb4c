"""The exactly-once sink: each task's part of a micro-batch in one Kafka transaction.

With ``exactlyOnce=true`` a streaming query's output is exactly once as seen by
``read_committed`` consumers, across task retries, executor loss, and a driver killed
at any moment and restarted from its checkpoint. Spark's own Kafka sink is
at-least-once.

How a task writes its part ``(query, batch, partition)`` -- the query's id (kept in the
checkpoint, so the same after a restart), the micro-batch id, the Spark partition id:

1. A fresh transactional producer whose ``transactional.id`` is
   ``tickwheel-spark-<query>-<partition>``. ``init_transactions`` fences every earlier
   producer with that id -- a zombie task of an attempt Spark gave up on, or of a
   driver that was killed -- and waits until the transaction it had open is aborted
   or committed, so what the next step reads is settled.
2. The part's *marker*: the offset committed for the topic-partition
   ``(<option topic>, 0)`` in the consumer group ``tickwheel-spark-eos-<query>-<partition>``.
   It is ``batch + 1`` once the part of batch ``batch`` (or a later one) is in Kafka.
   If it is there, the part is a replay of a committed one: the task writes nothing.
3. Otherwise, in one transaction: every row of the part, and the marker ``batch + 1``
   (``send_offsets_to_transaction``, i.e. ``TxnOffsetCommit`` to that group). The rows
   and the marker become visible together at ``commit_transaction``, or not at all; a
   fenced zombie's commit fails.

So whichever attempts of a part run, and in whatever order they are killed, exactly one
commits its rows: the first to commit writes the marker, and every later attempt fences
the earlier ones before it reads the marker. A task with no rows touches no Kafka at all
(replaying it writes nothing either way).

Assumptions, as for Spark's exactly-once file sink:

- **A deterministic batch -> partition plan.** A replayed micro-batch must give each
  Spark partition the same rows as the first run did: the same source offsets (Spark
  replays a batch from its offset log), the same planning (this package's source plans
  its ranges from the offsets alone; other sources must too), and a deterministic
  query between source and sink (no ``rand()``, no non-deterministic repartitioning;
  a shuffle's output partitioning is fixed by ``spark.sql.shuffle.partitions`` in the
  checkpoint). If a replay gave partition 3 different rows, the marker would still
  skip them.
- The query id is the checkpoint's: a query started on a new checkpoint is a new query
  and writes everything again.
- Readers use ``isolation.level=read_committed`` (librdkafka's default; Java's default
  is ``read_uncommitted``, which also sees aborted records).
- The option ``topic`` names an existing topic: its partition 0 carries the markers.
  Rows may still go to other topics through a ``topic`` column.
- An aborted or abandoned transaction keeps ``read_committed`` readers of its partitions
  waiting at its first offset until it is aborted: by the next attempt of the same part
  at once, else by the transaction coordinator after ``transaction.timeout.ms``
  (``kafka.transaction.timeout.ms``, librdkafka's default 60 s). The same timeout
  bounds how long one task may take to write its part: a longer one is aborted by the
  coordinator, its task fails, and Spark's retry writes the part again.

Costs per task and micro-batch: one producer, ``InitProducerId``, an ``OffsetFetch``
(the marker consumer is kept per worker process and group), ``AddPartitionsToTxn``,
``AddOffsetsToTxn``, ``TxnOffsetCommit`` and ``EndTxn``; a producer per task because
librdkafka allows ``init_transactions`` once per producer, and only ``init_transactions``
fences a zombie.

Concurrency: ``write_exactly_once`` runs in an executor's Python worker, one task per
process at a time; its producer is the task's own, its marker consumer the worker's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tickwheel.spark._clients import marker_consumer, transactional_producer
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions
from tickwheel.spark._produce import Deliveries, produce_batch

TRANSACTIONAL_ID_PREFIX = "tickwheel-spark-"
MARKER_GROUP_PREFIX = "tickwheel-spark-eos-"
MARKER_PARTITION = 0
# How long a transactional call may take: init_transactions waits here for an earlier
# attempt's transaction to be aborted or committed.
TRANSACTION_CALL_TIMEOUT_S = 60.0
# librdkafka's "no committed offset" (OFFSET_INVALID).
_NO_OFFSET = -1001


@dataclass(frozen=True, slots=True)
class TaskPart:
    """One task's part of a micro-batch: the unit of exactly-once writing."""

    query_id: str
    batch_id: int
    partition: int

    @property
    def transactional_id(self) -> str:
        """The same for every attempt at this query's partition, in any batch."""
        return f"{TRANSACTIONAL_ID_PREFIX}{self.query_id}-{self.partition}"

    @property
    def marker_group(self) -> str:
        """The consumer group whose committed offset records the last batch written."""
        return f"{MARKER_GROUP_PREFIX}{self.query_id}-{self.partition}"

    @property
    def marker_offset(self) -> int:
        """The marker once this part is written: the next batch's id."""
        return self.batch_id + 1


@dataclass(frozen=True, slots=True)
class PartOutcome:
    """What a task did: the records it committed, or that an earlier attempt had."""

    records: int
    already_committed: bool


def write_exactly_once(
    options: SinkOptions, batches: Iterator[pa.RecordBatch], part: TaskPart
) -> PartOutcome:
    """Write ``part``'s rows in one transaction with its marker, unless already written."""
    marker_topic = options.topic
    if marker_topic is None:
        raise SparkKafkaError("exactlyOnce=true needs the option topic (it carries the markers)")
    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return PartOutcome(records=0, already_committed=False)
    rest = chain([first], batches)
    try:
        producer = transactional_producer(options.client_config, part.transactional_id)
        producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
        consumer = marker_consumer(options.client_config, part.marker_group)
        marker = TopicPartition(marker_topic, MARKER_PARTITION)
        (committed,) = consumer.committed([marker], timeout=TRANSACTION_CALL_TIMEOUT_S)
    except KafkaException as exc:
        raise _failure(f"{part}: could not start", exc) from None
    if committed.error is not None:
        raise SparkKafkaError(f"{part}: reading the marker failed: {committed.error}")
    if committed.offset != _NO_OFFSET and committed.offset >= part.marker_offset:
        for _ in rest:
            pass  # Spark expects the task to consume its input.
        producer.close()
        return PartOutcome(records=0, already_committed=True)
    records = _commit_part(producer, options, rest, part, marker_topic, consumer)
    producer.close()
    return PartOutcome(records=records, already_committed=False)


def _commit_part(
    producer: Producer,
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    part: TaskPart,
    marker_topic: str,
    consumer: Consumer,
) -> int:
    deliveries = Deliveries()
    produced = 0
    try:
        producer.begin_transaction()
        for batch in batches:
            produced += produce_batch(producer, options.topic, batch, deliveries)
            producer.poll(0)
        marker = TopicPartition(marker_topic, MARKER_PARTITION, part.marker_offset)
        producer.send_offsets_to_transaction(
            [marker],
            consumer.consumer_group_metadata(),
            TRANSACTION_CALL_TIMEOUT_S,
        )
        producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_S)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.txn_requires_abort():
            producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
        raise _failure(f"{part}: transaction failed", exc) from None
    deliveries.check(produced)
    return produced


def _failure(context: str, exc: KafkaException) -> SparkKafkaError:
    error: KafkaError = exc.args[0]
    return SparkKafkaError(f"{context}: {error.str()}", error_code=error.code())
