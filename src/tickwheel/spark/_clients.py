"""librdkafka clients (confluent-kafka) for the driver and the executors.

The driver asks a ``KafkaMetadata`` (one ``AdminClient``) which partitions exist and
where their logs begin and end. Executors read with a ``Consumer`` and write with a
``Producer`` kept per Python worker process and per client configuration (the
exactly-once sink keeps its idle transactional producers per worker and
``transactional.id``, and a marker ``Consumer`` per worker and consumer group, at most
``MAX_PART_CLIENTS_PER_WORKER`` of each):
Spark reuses worker processes across tasks, so a task pays for a connection only once
per worker, as Spark's own connector caches its consumers and producers.

Reading needs no consumer group -- offsets live in Spark's checkpoint -- but
confluent-kafka refuses to build a ``Consumer`` without ``group.id``. The reader sets
one and never uses it: it only ``assign()``\\s with explicit offsets, never subscribes
and never commits (librdkafka still looks the group's coordinator up once).

The cached clients are closed when the process exits (``close_cached_clients``, also
callable before), so a worker's consumers leave cleanly instead of being torn down by
the interpreter.

Concurrency: a ``KafkaMetadata`` belongs to the driver's single reader thread. The
per-process caches are guarded by ``_cache_lock``; a cached client is used by one task
at a time (a Python worker runs one task at a time).
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._offsets import EARLIEST, OffsetMap, TopicPartitionId, sorted_offsets
from tickwheel.spark._options import TRANSACTIONAL_ID

ClientConfig = tuple[tuple[str, str], ...]
_Client = TypeVar("_Client")

# How long a metadata or ListOffsets round trip may take before the query fails.
METADATA_TIMEOUT_S = 30.0
# The group.id confluent-kafka insists on; never joined, never committed to.
READER_GROUP_ID = "tickwheel-spark-reader"
_READER_SETTINGS = {
    "group.id": READER_GROUP_ID,
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    # The reader seeks to offsets it was given. When one is gone (deleted records) the
    # consumer restarts at the log start, and the reader sees the gap and applies
    # failOnDataLoss; an end-of-partition event tells it the log ends early.
    "auto.offset.reset": "earliest",
    "enable.partition.eof": "true",
    # A task reads a range that exists, so long polls buy nothing, and they cost: the
    # prefetch past a range's end waits at the log end for this long, and the next
    # task's first fetch on the same connection waits behind it (500 ms by default,
    # per micro-batch and task).
    "fetch.wait.max.ms": "10",
    # Bulk reads are limited by fetch round trips, not CPU: librdkafka's defaults (1 MiB
    # per partition and fetch, 100,000 messages queued) kept a task waiting on the
    # broker 85% of the time; larger fetches and a deeper queue (still capped by
    # queued.max.messages.kbytes, 64 MiB) read 500,000 small records 3-5x faster.
    "max.partition.fetch.bytes": str(8 << 20),
    "queued.min.messages": "1000000",
}
# librdkafka's log level for the driver's admin client: warnings and errors. At its
# default (informational) it prints a line on stderr whenever a client is dropped.
_ADMIN_DEFAULTS = {"log_level": "4"}
# At-least-once needs every write acknowledged by all in-sync replicas.
_WRITER_DEFAULTS = {"acks": "all", "linger.ms": "5"}

# The exactly-once sink's consumer only reads and commits offsets inside transactions;
# read_committed makes librdkafka ask for stable offsets (no pending transactional ones).
_ISOLATION_LEVEL = "isolation.level"
_READ_COMMITTED = "read_committed"
_MARKER_SETTINGS = {"enable.auto.commit": "false", _ISOLATION_LEVEL: _READ_COMMITTED}
# Idle transactional producers and marker consumers a worker keeps, of each (one per
# part a worker has written; each holds librdkafka threads and connections): the least
# recently used beyond this is closed.
MAX_PART_CLIENTS_PER_WORKER = 16


_cache_lock = threading.Lock()
_consumers: dict[ClientConfig, Consumer] = {}
_producers: dict[ClientConfig, Producer] = {}
_marker_consumers: OrderedDict[tuple[ClientConfig, str], Consumer] = OrderedDict()
_idle_transactional: OrderedDict[tuple[ClientConfig, str], Producer] = OrderedDict()


def reader_consumer(client_config: ClientConfig) -> Consumer:
    """This worker process's reading consumer for ``client_config``."""
    with _cache_lock:
        consumer = _consumers.get(client_config)
        if consumer is None:
            consumer = _build(Consumer, {**_READER_SETTINGS, **dict(client_config)})
            _consumers[client_config] = consumer
        return consumer


def writer_producer(client_config: ClientConfig) -> Producer:
    """This worker process's producer for ``client_config`` (acks=all unless overridden)."""
    with _cache_lock:
        producer = _producers.get(client_config)
        if producer is None:
            producer = _build(Producer, {**_WRITER_DEFAULTS, **dict(client_config)})
            _producers[client_config] = producer
        return producer


def transactional_producer(client_config: ClientConfig, transactional_id: str) -> Producer:
    """A new transactional producer; its caller runs ``init_transactions`` once."""
    return _build(
        Producer,
        {**_WRITER_DEFAULTS, **dict(client_config), TRANSACTIONAL_ID: transactional_id},
    )


def take_idle_producer(client_config: ClientConfig, transactional_id: str) -> Producer | None:
    """This worker's idle, initialised producer for ``transactional_id``, taken out of
    the cache (a task owns it until it gives it back), or None."""
    with _cache_lock:
        return _idle_transactional.pop((client_config, transactional_id), None)


def give_back_idle_producer(
    client_config: ClientConfig, transactional_id: str, producer: Producer
) -> None:
    """Keep ``producer`` (initialised, no transaction open) for this worker's next task
    with ``transactional_id``; closes the least recently used one past the limit."""
    with _cache_lock:
        _idle_transactional[(client_config, transactional_id)] = producer
        evicted = []
        while len(_idle_transactional) > MAX_PART_CLIENTS_PER_WORKER:
            evicted.append(_idle_transactional.popitem(last=False)[1])
    for old in evicted:
        old.close()


def marker_consumer(client_config: ClientConfig, group_id: str) -> Consumer:
    """This worker process's consumer of ``group_id``'s committed offsets (never subscribes)."""
    key = (client_config, group_id)
    evicted = []
    with _cache_lock:
        consumer = _marker_consumers.get(key)
        if consumer is None:
            settings = {**dict(client_config), **_MARKER_SETTINGS, "group.id": group_id}
            consumer = _build(Consumer, settings)
            _marker_consumers[key] = consumer
            while len(_marker_consumers) > MAX_PART_CLIENTS_PER_WORKER:
                evicted.append(_marker_consumers.popitem(last=False)[1])
        else:
            _marker_consumers.move_to_end(key)
    for old in evicted:
        old.close()
    return consumer


def close_cached_clients() -> None:
    """Close and forget every client this process keeps (a worker about to end, or a
    process whose brokers are about to go): a cached client would otherwise retry its
    broker for as long as the process lives."""
    with _cache_lock:
        clients: list[Consumer | Producer] = [
            *_consumers.values(),
            *_producers.values(),
            *_marker_consumers.values(),
            *_idle_transactional.values(),
        ]
        _consumers.clear()
        _producers.clear()
        _marker_consumers.clear()
        _idle_transactional.clear()
    for client in clients:
        client.close()


atexit.register(close_cached_clients)


def _build(kind: Callable[[dict[str, Any]], _Client], config: dict[str, str]) -> _Client:
    try:
        return kind(config)
    except (KafkaException, ValueError, TypeError) as exc:
        # An unknown or mistyped kafka.* option (a Java-only setting, say) ends here.
        raise SparkKafkaError(f"librdkafka refused the kafka.* options: {exc}") from None


class KafkaMetadata:
    """The driver's view of topics and log bounds, through one lazily built AdminClient."""

    def __init__(self, client_config: ClientConfig) -> None:
        self._client_config = client_config
        self._admin: AdminClient | None = None

    def _client(self) -> AdminClient:
        if self._admin is None:
            config = {**_ADMIN_DEFAULTS, **dict(self._client_config)}
            self._admin = _build(AdminClient, config)
        return self._admin

    def partition_counts(self) -> dict[str, int]:
        """Every non-internal topic and its number of partitions."""
        try:
            metadata = self._client().list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise SparkKafkaError(f"metadata request failed: {exc}") from None
        return {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None and not name.startswith("__")
        }

    def _isolation_level(self) -> IsolationLevel:
        """The readers' isolation (librdkafka's default: read_committed), so that a
        planned range ends where a reader can get to: at the last stable offset, not
        inside a transaction still open."""
        level = dict(self._client_config).get(_ISOLATION_LEVEL, _READ_COMMITTED)
        if level == _READ_COMMITTED:
            return IsolationLevel.READ_COMMITTED
        return IsolationLevel.READ_UNCOMMITTED

    def log_offsets(
        self, partitions: Iterable[TopicPartitionId], which: int, *, gone_ok: bool = False
    ) -> OffsetMap:
        """Each partition's log start (``which=EARLIEST``) or end (``LATEST``) offset;
        with ``gone_ok``, partitions deleted since they were listed are left out."""
        spec = OffsetSpec.earliest() if which == EARLIEST else OffsetSpec.latest()  # type: ignore[no-untyped-call]
        return self._list_offsets(dict.fromkeys(partitions, spec), gone_ok=gone_ok)

    def offsets_for_times(self, timestamps_ms: Mapping[TopicPartitionId, int]) -> OffsetMap:
        """ListOffsets by timestamp: each partition's first offset whose record's timestamp
        is at or after the given time, or ``LATEST`` (-1) when no record is."""
        return self._list_offsets(
            {tp: OffsetSpec.for_timestamp(ts) for tp, ts in timestamps_ms.items()}
        )

    def _list_offsets(
        self, specs: Mapping[TopicPartitionId, OffsetSpec], *, gone_ok: bool = False
    ) -> OffsetMap:
        if not specs:
            return {}
        futures = self._client().list_offsets(
            {TopicPartition(t, p): spec for (t, p), spec in specs.items()},
            isolation_level=self._isolation_level(),
            request_timeout=METADATA_TIMEOUT_S,
        )
        offsets: OffsetMap = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if gone_ok and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise SparkKafkaError(
                    f"ListOffsets for {tp.topic}-{tp.partition} failed: {exc}"
                ) from None
        return sorted_offsets(offsets)

    def resolve(self, wanted: Mapping[TopicPartitionId, int]) -> OffsetMap:
        """``wanted`` with every ``EARLIEST``/``LATEST`` marker replaced by the log's offset."""
        resolved = {tp: o for tp, o in wanted.items() if o >= 0}
        for marker in {o for o in wanted.values() if o < 0}:
            resolved.update(
                self.log_offsets([tp for tp, o in wanted.items() if o == marker], marker)
            )
        return sorted_offsets(resolved)

    def close(self) -> None:
        """Drop the client (librdkafka closes it when the last reference goes)."""
        self._admin = None
