"""The exactly-once sink: each task's part of a micro-batch in one Kafka transaction.

With ``exactlyOnce=true`` a streaming query's output is exactly once as seen by
``read_committed`` consumers, across task retries, executor loss, and a driver killed
at any moment and restarted from its checkpoint. Spark's own Kafka sink is
at-least-once.

How a task writes its part ``(query, batch, partition)`` -- the query's id (kept in the
checkpoint, so the same after a restart), the micro-batch id, the Spark partition id:

1. A transactional producer whose ``transactional.id`` is
   ``tickwheel-spark-<query>-<partition>``. A new one runs ``init_transactions``, which
   fences every earlier producer with that id -- a zombie task of an attempt Spark gave
   up on, of another worker, or of a driver that was killed -- and waits until the
   transaction it had open is aborted or committed, so what the next step reads is
   settled.
2. The part's *marker*: the offset committed for the topic-partition
   ``(<marker topic>, 0)`` in the consumer group ``tickwheel-spark-eos-<query>-<partition>``.
   It is ``batch + 1`` once the part of batch ``batch`` (or a later one) is in Kafka.
   If it is there, the part is a replay of a committed one: the task writes nothing.
3. Otherwise, in one transaction: first the marker ``batch + 1``
   (``send_offsets_to_transaction``, i.e. ``AddOffsetsToTxn`` and ``TxnOffsetCommit``
   to that group), then every row of the part. The rows and the marker become visible
   together at ``commit_transaction``, or not at all; a fenced zombie's commit fails.

So whichever attempts of a part run, and in whatever order they are killed, exactly one
commits its rows: the first to commit writes the marker, and every later attempt fences
the earlier ones before it reads the marker. A task with no rows touches no Kafka at all
(replaying it writes nothing either way).

A worker keeps its producer after a committed transaction (``_clients``), because
``init_transactions`` is slow -- librdkafka waits for a connection to the coordinator
it looked up, 55-500 ms here -- and a part's next batch often runs in the same worker.
A kept producer skips step 1, which is safe because the marker goes first in step 3:
``AddOffsetsToTxn`` answers ``PRODUCER_FENCED`` when any producer with the id was
initialised since this one, and then no row has been taken from Spark yet, so the task
drops the kept producer and starts again at step 1 with a new one. When it is not
fenced, no other producer with the id has committed since its own last commit, so the
marker it read just before is current. Its marker read waits at most
``KEPT_MARKER_TIMEOUT_S`` (a zombie's open transaction keeps it unstable), then the
task goes to step 1, whose ``init_transactions`` aborts that transaction. A task that
fails aborts its transaction (so ``read_committed`` readers are not held back) and
drops its producer.

Assumptions, as for Spark's exactly-once file sink:

- **A deterministic batch -> partition plan.** A replayed micro-batch must give each
  Spark partition the same rows as the first run did: the same source offsets (Spark
  replays a batch from its offset log), the same planning (this package's source plans
  its ranges from the offsets and its ``minPartitions`` and ``maxRecordsPerPartition``,
  so those must not change across a restart; other sources must plan as
  deterministically), and a deterministic
  query between source and sink (no ``rand()``, no non-deterministic repartitioning;
  a shuffle's output partitioning is fixed by ``spark.sql.shuffle.partitions`` in the
  checkpoint). If a replay gave partition 3 different rows, the marker would still
  skip them.
- The query id is the checkpoint's: a query started on a new checkpoint is a new query
  and writes everything again.
- A marker lives as long as its group's offsets: a group without members loses them
  after ``offsets.retention.minutes`` (7 days by default). A query restarted later than
  that, whose last batch had committed some parts but not reached Spark's commit log,
  writes those parts again. Each query leaves one such group per Spark partition of
  its output (``spark.sql.shuffle.partitions`` after a shuffle).
- Readers use ``isolation.level=read_committed`` (librdkafka's default; Java's default
  is ``read_uncommitted``, which also sees aborted records).
- The marker topic -- the option ``exactlyOnce.markerTopic``, else the option
  ``topic`` -- is an existing topic: its partition 0 carries the markers (as consumer
  group offsets; no record is written to it). Without the option ``topic``, rows go to
  the topics of their ``topic`` column.
- An aborted or abandoned transaction keeps ``read_committed`` readers of its partitions
  waiting at its first offset until it is aborted: by the next attempt of the same part
  at once, else by the transaction coordinator after ``transaction.timeout.ms``
  (``kafka.transaction.timeout.ms``, librdkafka's default 60 s). The same timeout
  bounds how long one task may take to write its part: a longer one is aborted by the
  coordinator, its task fails, and Spark's retry writes the part again.

Costs per task and micro-batch, with a kept producer: an ``OffsetFetch`` (the marker
consumer is kept per worker process and group), ``AddOffsetsToTxn``,
``TxnOffsetCommit``, ``AddPartitionsToTxn`` and ``EndTxn``; a new producer adds its
connections and ``InitProducerId``.

Concurrency: ``write_exactly_once`` runs in an executor's Python worker, one task per
process at a time; the producer it takes from the worker's cache is the task's alone
until it gives it back, the marker consumer is the worker's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tickwheel.spark._clients import (
    give_back_idle_producer,
    marker_consumer,
    take_idle_producer,
    transactional_producer,
)
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions
from tickwheel.spark._produce import Deliveries, produce_batch

TRANSACTIONAL_ID_PREFIX = "tickwheel-spark-"
MARKER_GROUP_PREFIX = "tickwheel-spark-eos-"
MARKER_PARTITION = 0
# How long a transactional call may take: init_transactions waits here for an earlier
# attempt's transaction to be aborted or committed.
TRANSACTION_CALL_TIMEOUT_S = 60.0
# How long a kept producer's task waits for its marker to settle before it starts a new
# producer instead (whose init_transactions aborts whatever keeps it unsettled).
KEPT_MARKER_TIMEOUT_S = 5.0

logger = logging.getLogger(__name__)


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
    marker_topic = options.marker_topic
    if marker_topic is None:
        raise SparkKafkaError("exactlyOnce=true needs the option topic or exactlyOnce.markerTopic")
    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return PartOutcome(records=0, already_committed=False)
    rest = chain([first], batches)
    config = options.client_config
    marker = TopicPartition(marker_topic, MARKER_PARTITION)
    consumer = marker_consumer(config, part.marker_group)
    producer = take_idle_producer(config, part.transactional_id)
    begun = None if producer is None else _begin_kept(producer, part, marker, consumer)
    if producer is None or begun is None:
        producer = transactional_producer(config, part.transactional_id)
        begun = _begin_new(producer, part, marker, consumer)
    if not begun:
        for _ in rest:
            pass  # Spark expects the task to consume its input.
        give_back_idle_producer(config, part.transactional_id, producer)
        return PartOutcome(records=0, already_committed=True)
    records = _write_rows(producer, options, rest, part)
    give_back_idle_producer(config, part.transactional_id, producer)
    return PartOutcome(records=records, already_committed=False)


def _begin_new(
    producer: Producer, part: TaskPart, marker: TopicPartition, consumer: Consumer
) -> bool:
    """Steps 1-3 with a new producer: True when a transaction with the marker is open,
    False when the part is already committed."""
    try:
        producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
        committed = _committed_marker(consumer, marker, TRANSACTION_CALL_TIMEOUT_S)
        if committed >= part.marker_offset:
            return False
        _open_with_marker(producer, part, marker, consumer)
    except KafkaException as exc:
        raise _failure(f"{part}: could not start", exc) from None
    return True


def _begin_kept(
    producer: Producer, part: TaskPart, marker: TopicPartition, consumer: Consumer
) -> bool | None:
    """Steps 2-3 with a kept producer, as ``_begin_new``; None when the producer was
    fenced or the marker stayed unsettled (the producer is dropped)."""
    try:
        committed = _committed_marker(consumer, marker, KEPT_MARKER_TIMEOUT_S)
        if committed >= part.marker_offset:
            return False
        _open_with_marker(producer, part, marker, consumer)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        logger.info("%s: a kept producer cannot go on (%s); starting a new one", part, error)
        return None
    return True


def _committed_marker(consumer: Consumer, marker: TopicPartition, timeout_s: float) -> int:
    (committed,) = consumer.committed([marker], timeout=timeout_s)
    if committed.error is not None:
        raise KafkaException(committed.error)
    offset: int = committed.offset
    return offset


def _open_with_marker(
    producer: Producer, part: TaskPart, marker: TopicPartition, consumer: Consumer
) -> None:
    producer.begin_transaction()
    try:
        producer.send_offsets_to_transaction(
            [TopicPartition(marker.topic, marker.partition, part.marker_offset)],
            consumer.consumer_group_metadata(),
            TRANSACTION_CALL_TIMEOUT_S,
        )
    except KafkaException as exc:
        _abort(producer, exc.args[0])
        raise


def _write_rows(
    producer: Producer, options: SinkOptions, batches: Iterator[pa.RecordBatch], part: TaskPart
) -> int:
    deliveries = Deliveries()
    produced = 0
    try:
        for batch in batches:
            produced += produce_batch(producer, options.topic, batch, deliveries)
            producer.poll(0)
        producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_S)
    except KafkaException as exc:
        _abort(producer, exc.args[0])
        raise _failure(f"{part}: transaction failed", exc) from None
    except Exception:
        # A row the sink cannot write (a null topic, say): the part fails as a whole.
        _abort(producer, None)
        raise
    deliveries.check(produced)
    return produced


def _abort(producer: Producer, error: KafkaError | None) -> None:
    """Abort the transaction open on ``producer``, after ``error`` (None: not Kafka's), so
    that ``read_committed`` readers of what it touched -- the marker's group too -- are
    not held back until ``transaction.timeout.ms``. A fenced (fatal) producer has nothing
    to abort; an abort that fails is left to the next attempt's ``init_transactions``."""
    if error is not None and error.fatal():
        return
    try:
        producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
    except KafkaException as exc:
        logger.warning("could not abort a failed part's transaction: %s", exc.args[0])


def _failure(context: str, exc: KafkaException) -> SparkKafkaError:
    error: KafkaError = exc.args[0]
    return SparkKafkaError(f"{context}: {error.str()}", error_code=error.code())
