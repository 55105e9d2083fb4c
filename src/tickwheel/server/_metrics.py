"""Broker metrics under Kafka's names, exported in Prometheus's text format.

Kafka publishes these over JMX; the Prometheus JMX exporter turns
``kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=Fetch``
into names like the ones used here (``kafka_<domain>_<type>_<name>``, labels for the
rest):

- ``kafka_server_DelayedOperationPurgatory_PurgatorySize{delayedOperation}``: entries
  in the purgatory's watcher lists; ``..._NumDelayedOperations``: operations waiting
  in its timer; ``..._ExpiresPerSec_total``: operations completed by their timeout.
  Read from the purgatories when scraped.
- ``kafka_network_RequestMetrics_RequestsPerSec_total{request}`` and
  ``kafka_network_RequestMetrics_TotalTimeMs{request}`` (a histogram, in ms).
- Kafka's BrokerTopicMetrics rates, as ``kafka_server_BrokerTopicMetrics_<name>_total``:
  ``MessagesInPerSec`` (records appended for clients; an idempotent producer's retried
  duplicate adds none), ``BytesInPerSec`` (record bytes appended for clients),
  ``BytesOutPerSec`` (record
  bytes fetched by clients), ``ReplicationBytesOutPerSec`` (fetched by followers),
  ``TotalProduceRequestsPerSec`` and ``TotalFetchRequestsPerSec`` (one per partition
  of a request, as Kafka marks them). Each has one series without labels for all
  topics, and one per topic with a ``topic`` label (Kafka's
  ``...,name=BytesInPerSec,topic=orders``). A topic's series go when this broker no
  longer hosts a partition of it (deleted, or moved away), as Kafka removes a topic's
  MBeans then, so deleted topics do not grow the scrape; the all-topics series keeps
  counting what they took. The pruning happens when scraped (the partition list is
  read then), so a topic deleted and re-created between two scrapes keeps its count.
- ``kafka_log_LogManager_OfflineLogDirectoryCount``: log directories taken offline by
  an I/O error (read when scraped).
- The ReplicaManager's partition gauges, counted over this broker's partitions when
  scraped: ``kafka_server_ReplicaManager_PartitionCount``, ``..._LeaderCount``,
  ``..._UnderReplicatedPartitions`` (led here, ISR smaller than the replicas: the
  original ones while reassigned, as Kafka counts), ``..._ReassigningPartitions`` (led
  here, being reassigned),
  ``..._UnderMinIsrPartitionCount`` (led here, ISR smaller than min.insync.replicas),
  ``..._OfflineReplicaCount`` (in an offline log directory).
- The controller's: ``kafka_controller_KafkaController_ActiveControllerCount`` (1 on
  the controller; a broker alone is its own) and ``..._OfflinePartitionsCount``
  (reported by the controller only, as in Kafka: partitions without a leader or in an
  offline directory, counted over the partitions this broker hosts).
- The log cleaner's gauges (``kafka.log:type=LogCleaner`` and ``LogCleanerManager``,
  names with ``-`` turned into ``_`` as the JMX exporter does), as its last cleanings
  left them: ``kafka_log_LogCleanerManager_max_dirty_percent`` (the dirtiest
  compacted log's dirty ratio), ``kafka_log_LogCleaner_cleaner_recopy_percent`` (bytes
  written over bytes read by the last cleanings), ``..._max_clean_time_secs``,
  ``..._max_buffer_utilization_percent`` and
  ``kafka_log_LogCleanerManager_uncleanable_partitions_count``. Absent when
  ``log.cleaner.enable=false``.
- The network door's (``tickwheel.server.net``), read when scraped: per listener,
  Kafka's socket-server-metrics ``connection-count``, ``connection-creation-rate``
  (per second, over the last ``RATE_WINDOW_S`` seconds) and
  ``connection-creation-total``, as
  ``kafka_server_socket_server_metrics_connection_count{listener}`` and so on;
  ``tickwheel_connections_refused_total{listener,limit}``, connections closed or held
  back by a connection quota, by the limit's property name; and the request memory
  pool's ``kafka_network_SocketServer_MemoryPoolUsed`` and ``..._MemoryPoolAvailable``
  (-1 when ``queued.max.request.bytes`` is unbounded).
- Client quotas (``tickwheel.server.quotas``), read when scraped, per quota type as
  Kafka's ``kafka.server:type=Produce|Fetch|Request|ControllerMutation`` with ``user``
  and ``client_id`` labels (the tags a client's use is counted under): the measured
  rate (``kafka_server_Produce_byte_rate``, ``..._Fetch_byte_rate``,
  ``..._Request_request_time`` in percent, ``..._ControllerMutation_mutation_rate``)
  and ``..._throttle_time`` (average throttle time of the throttled requests, ms) and
  ``..._throttle_time_max``. Only clients that have a quota are measured.
- ``tickwheel_faults_applied_total{api,kind}``: requests a fault rule of the broker's
  ``FaultPlan`` (``tickwheel.faults``) hit, by Kafka's API name and the rule's kind.
- The replication throttles' measured rates (read when scraped), as Kafka's
  ``kafka.server:type=LeaderReplication|FollowerReplication,name=byte-rate``:
  ``kafka_server_LeaderReplication_byte_rate`` and ``..._FollowerReplication_byte_rate``,
  bytes per second of throttled partitions.
- ``process_*`` and ``python_info``: prometheus_client's process and platform
  collectors, in the broker's registry.

Each broker has its own ``CollectorRegistry``, so several brokers in one process
(tests) do not share counters.

``serve_metrics`` is a minimal HTTP/1.x server (one request per connection):
``GET /metrics`` answers the text, ``/healthz`` answers ``ok`` whenever the event
loop runs the handler (alive), ``/readyz`` answers ``ok`` once the broker's
``ready()`` says so (listener bound, logs loaded, registered with ZooKeeper in a
cluster) and 503 before; with the fault endpoint on (``_fault_endpoint``), ``/faults``
takes GET, POST and DELETE; any other path is 404, and anything that is not an HTTP
request line is 400. A port that cannot be bound raises ``MetricsPortError``, which
names ``tickwheel.metrics.port`` rather than the Kafka listener.

Concurrency: updated and scraped on the broker's event-loop thread; ``snapshot`` may
be called from any thread (it reads integers).
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tickwheel.log import CleanerMetrics
from tickwheel.purgatory import DelayedOperationPurgatory
from tickwheel.replica import Partition, ReplicationQuota
from tickwheel.server._fault_endpoint import FAULTS_PATH, FaultEndpoint
from tickwheel.server.net._memory_pool import UNBOUNDED, MemoryPool
from tickwheel.server.net._quotas import ConnectionQuotas
from tickwheel.server.quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
)

_MS_PER_S = 1000.0
# Request latency buckets in ms: long polls sit in the purgatory up to max_wait_ms.
_LATENCY_BUCKETS_MS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000)
_HEADER_END = b"\r\n\r\n"
_BARE_HEADER_END = b"\n\n"  # a client that ends lines with LF alone
_METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
_TEXT_CONTENT_TYPE = b"text/plain; charset=utf-8"
# A request head larger than this is refused (400) rather than buffered: scrapers and
# probes send a few hundred bytes.
_MAX_REQUEST_HEAD_BYTES = 8192
_HTTP_METHODS = frozenset({b"GET", b"HEAD"})
_METHOD_PREFIXES = tuple(method + b" " for method in _HTTP_METHODS)
# With the fault endpoint on, rules are added and removed too.
_FAULT_METHOD_PREFIXES = (*_METHOD_PREFIXES, b"POST ", b"DELETE ")
_JSON_CONTENT_TYPE = b"application/json"
# A fault rule is a few hundred bytes of JSON.
_MAX_BODY_BYTES = 65536
_REQUEST_LINE_PARTS = 3
_REASONS = {
    200: b"OK",
    201: b"Created",
    400: b"Bad Request",
    401: b"Unauthorized",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    503: b"Service Unavailable",
}
METRICS_PORT_PROPERTY = "tickwheel.metrics.port"

PurgatoryList = Callable[[], Sequence[DelayedOperationPurgatory[Any]]]
OfflineDirCount = Callable[[], int]
PartitionList = Callable[[], Iterable[Partition]]
ControllerActive = Callable[[], bool]
Ready = Callable[[], bool]
CleanerGauges = Callable[[], CleanerMetrics | None]


class MetricsPortError(OSError):
    """The metrics port (``tickwheel.metrics.port``) cannot be bound."""


@dataclass(frozen=True, slots=True)
class PurgatoryMetrics:
    """One purgatory's counters, under Kafka's metric names."""

    purgatory_size: int
    num_delayed_operations: int
    expirations: int


class _PurgatoryCollector(Collector):
    def __init__(self, purgatories: PurgatoryList) -> None:
        self._purgatories = purgatories

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_server_DelayedOperationPurgatory_"
        size = GaugeMetricFamily(
            prefix + "PurgatorySize", "Operations in watcher lists", labels=["delayedOperation"]
        )
        delayed = GaugeMetricFamily(
            prefix + "NumDelayedOperations",
            "Operations waiting in the timer",
            labels=["delayedOperation"],
        )
        expires = CounterMetricFamily(
            prefix + "ExpiresPerSec", "Operations expired", labels=["delayedOperation"]
        )
        for purgatory in self._purgatories():
            size.add_metric([purgatory.name], purgatory.watched)
            delayed.add_metric([purgatory.name], purgatory.num_delayed)
            expires.add_metric([purgatory.name], purgatory.expired)
        yield from (size, delayed, expires)


class _LogManagerCollector(Collector):
    def __init__(self, offline_dir_count: OfflineDirCount) -> None:
        self._offline_dir_count = offline_dir_count

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "kafka_log_LogManager_OfflineLogDirectoryCount",
            "Log directories offline after an I/O error",
            value=self._offline_dir_count(),
        )


class _CleanerCollector(Collector):
    def __init__(self, cleaner: CleanerGauges) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        metrics = self._cleaner()
        if metrics is None:
            return
        for name, help_text, value in (
            (
                "LogCleanerManager_max_dirty_percent",
                "Dirty ratio of the dirtiest compacted log, in percent",
                metrics.max_dirty_percent,
            ),
            (
                "LogCleaner_cleaner_recopy_percent",
                "Bytes written over bytes read by the last cleanings, in percent",
                metrics.cleaner_recopy_percent,
            ),
            (
                "LogCleaner_max_clean_time_secs",
                "Longest of the last cleanings, in seconds",
                metrics.max_clean_time_secs,
            ),
            (
                "LogCleaner_max_buffer_utilization_percent",
                "Fullest offset map of the last cleanings, in percent",
                metrics.max_buffer_utilization_percent,
            ),
            (
                "LogCleanerManager_uncleanable_partitions_count",
                "Partitions the cleaner gave up on after an error",
                metrics.uncleanable_partitions_count,
            ),
        ):
            yield GaugeMetricFamily("kafka_log_" + name, help_text, value=value)


_QUOTA_METRICS = (
    (PRODUCER_BYTE_RATE, "Produce", "byte_rate", "Bytes produced per second"),
    (CONSUMER_BYTE_RATE, "Fetch", "byte_rate", "Bytes fetched per second"),
    (REQUEST_PERCENTAGE, "Request", "request_time", "Request handler time, in percent"),
    (CONTROLLER_MUTATION_RATE, "ControllerMutation", "mutation_rate", "Partition mutations/s"),
)


class _ClientQuotaCollector(Collector):
    def __init__(self, client_quotas: Callable[[], ClientQuotas | None]) -> None:
        self._client_quotas = client_quotas

    def collect(self) -> Iterator[Metric]:
        client_quotas = self._client_quotas()
        if client_quotas is None:
            return
        managers = {manager.key: manager for manager in client_quotas.managers()}
        now_ms = client_quotas.clock.now_ms()
        labels = ["user", "client_id"]
        for key, group, rate_name, help_text in _QUOTA_METRICS:
            prefix = f"kafka_server_{group}_"
            rate = GaugeMetricFamily(prefix + rate_name, help_text, labels=labels)
            throttle = GaugeMetricFamily(
                prefix + "throttle_time", "Average throttle time (ms)", labels=labels
            )
            throttle_max = GaugeMetricFamily(
                prefix + "throttle_time_max", "Longest throttle time (ms)", labels=labels
            )
            for (user, client_id), use in sorted(managers[key].uses.items()):
                rate.add_metric([user, client_id], use.rate.rate_per_s(now_ms))
                throttle.add_metric([user, client_id], use.throttle_time_avg_ms(now_ms))
                throttle_max.add_metric([user, client_id], use.throttle_time_max_ms)
            yield from (rate, throttle, throttle_max)


class _FaultCollector(Collector):
    def __init__(self, faults_applied: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self._faults_applied = faults_applied

    def collect(self) -> Iterator[Metric]:
        applied = CounterMetricFamily(
            "tickwheel_faults_applied", "Requests a fault rule hit", labels=["api", "kind"]
        )
        for (api, kind), count in sorted(self._faults_applied().items()):
            applied.add_metric([api, kind], count)
        yield applied


ReplicationQuotas = Callable[[], tuple[ReplicationQuota | None, ReplicationQuota | None]]
"""The leader and follower replication quotas."""


def _no_replication() -> tuple[ReplicationQuota | None, ReplicationQuota | None]:
    return None, None


class _ReplicationCollector(Collector):
    def __init__(self, replication: ReplicationQuotas) -> None:
        self._replication = replication

    def collect(self) -> Iterator[Metric]:
        leader, follower = self._replication()
        for group, quota in (("LeaderReplication", leader), ("FollowerReplication", follower)):
            if quota is not None:
                yield GaugeMetricFamily(
                    f"kafka_server_{group}_byte_rate",
                    "Bytes per second of throttled replication",
                    value=quota.byte_rate(),
                )


class _NetworkCollector(Collector):
    def __init__(self, network: Callable[[], tuple[ConnectionQuotas, MemoryPool] | None]) -> None:
        self._network = network

    def collect(self) -> Iterator[Metric]:
        network = self._network()
        if network is None:
            return
        quotas, pool = network
        prefix = "kafka_server_socket_server_metrics_"
        count = GaugeMetricFamily(
            prefix + "connection_count", "Open connections", labels=["listener"]
        )
        rate = GaugeMetricFamily(
            prefix + "connection_creation_rate",
            "Connections created per second (recent)",
            labels=["listener"],
        )
        total = CounterMetricFamily(
            prefix + "connection_creation", "Connections created", labels=["listener"]
        )
        now_ms = quotas.now_ms()
        for name, quota in quotas.listeners.items():
            count.add_metric([name], quota.count)
            rate.add_metric([name], quota.creation.rate(now_ms))
            total.add_metric([name], quota.creation.total)
        refused = CounterMetricFamily(
            "tickwheel_connections_refused",
            "Connections closed or held back by a connection quota",
            labels=["listener", "limit"],
        )
        for (listener, limit), times in sorted(quotas.refused.items()):
            refused.add_metric([listener, limit], times)
        used = GaugeMetricFamily(
            "kafka_network_SocketServer_MemoryPoolUsed",
            "Request bytes held (queued.max.request.bytes)",
            value=pool.held_bytes,
        )
        capacity = pool.capacity_bytes
        available = GaugeMetricFamily(
            "kafka_network_SocketServer_MemoryPoolAvailable",
            "Request bytes the pool can still grant (-1: unbounded)",
            value=-1 if capacity == UNBOUNDED else max(0, capacity - pool.held_bytes),
        )
        yield from (count, rate, total, refused, used, available)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionCounts:
    """The partition gauges of one broker, as Kafka's ReplicaManager and controller
    report them."""

    partition_count: int = 0
    leader_count: int = 0
    under_replicated: int = 0
    under_min_isr: int = 0
    offline_replicas: int = 0
    offline_partitions: int = 0
    reassigning: int = 0

    @classmethod
    def of(cls, partitions: Iterable[Partition]) -> PartitionCounts:
        """Count ``partitions``; a partition with no leader or offline storage is
        offline (the controller's OfflinePartitionsCount)."""
        total = leaders = under_replicated = under_min_isr = offline_replicas = offline = 0
        reassigning = 0
        for partition in partitions:
            total += 1
            if partition.offline:
                offline_replicas += 1
            if partition.offline or partition.leader_id < 0:
                offline += 1
            if partition.is_leader and not partition.offline:
                leaders += 1
                in_sync = len(partition.isr)
                under_replicated += in_sync < partition.replication_factor
                under_min_isr += in_sync < partition.min_insync_replicas
                reassigning += partition.is_reassigning
        return cls(
            partition_count=total,
            leader_count=leaders,
            under_replicated=under_replicated,
            under_min_isr=under_min_isr,
            offline_replicas=offline_replicas,
            offline_partitions=offline,
            reassigning=reassigning,
        )


class _PartitionCollector(Collector):
    def __init__(self, partitions: PartitionList, controller_active: ControllerActive) -> None:
        self._partitions = partitions
        self._controller_active = controller_active

    def collect(self) -> Iterator[Metric]:
        counts = PartitionCounts.of(self._partitions())
        active = self._controller_active()
        replica = "kafka_server_ReplicaManager_"
        controller = "kafka_controller_KafkaController_"
        for name, documentation, value in (
            (replica + "PartitionCount", "Partitions on this broker", counts.partition_count),
            (replica + "LeaderCount", "Partitions this broker leads", counts.leader_count),
            (
                replica + "UnderReplicatedPartitions",
                "Led partitions whose ISR is smaller than their replicas (the original "
                "ones while reassigned)",
                counts.under_replicated,
            ),
            (
                replica + "UnderMinIsrPartitionCount",
                "Led partitions whose ISR is smaller than min.insync.replicas",
                counts.under_min_isr,
            ),
            (
                replica + "ReassigningPartitions",
                "Led partitions being reassigned",
                counts.reassigning,
            ),
            (
                replica + "OfflineReplicaCount",
                "Partitions in an offline log directory",
                counts.offline_replicas,
            ),
            (
                controller + "ActiveControllerCount",
                "1 on the active controller",
                int(active),
            ),
            (
                controller + "OfflinePartitionsCount",
                "Partitions without a leader (reported by the controller)",
                counts.offline_partitions if active else 0,
            ),
        ):
            yield GaugeMetricFamily(name, documentation, value=value)


MESSAGES_IN = "MessagesInPerSec"
BYTES_IN = "BytesInPerSec"
BYTES_OUT = "BytesOutPerSec"
REPLICATION_BYTES_OUT = "ReplicationBytesOutPerSec"
TOTAL_PRODUCE_REQUESTS = "TotalProduceRequestsPerSec"
TOTAL_FETCH_REQUESTS = "TotalFetchRequestsPerSec"
_TOPIC_RATES = {
    MESSAGES_IN: "Records appended for clients (retried duplicates not counted)",
    BYTES_IN: "Record bytes appended for clients",
    BYTES_OUT: "Record bytes fetched by clients",
    REPLICATION_BYTES_OUT: "Record bytes fetched by followers",
    TOTAL_PRODUCE_REQUESTS: "Partitions in produce requests",
    TOTAL_FETCH_REQUESTS: "Partitions in fetch requests",
}


class _BrokerTopicCollector(Collector):
    """Kafka's BrokerTopicMetrics rates: all topics, and per topic while hosted here."""

    _PREFIX = "kafka_server_BrokerTopicMetrics_"

    def __init__(self, partitions: PartitionList) -> None:
        self._partitions = partitions
        self._totals = dict.fromkeys(_TOPIC_RATES, 0)
        self._per_topic: dict[str, defaultdict[str, int]] = {
            rate: defaultdict(int) for rate in _TOPIC_RATES
        }

    def mark(self, rate: str, topic: str, amount: int = 1) -> None:
        """Add ``amount`` to ``rate`` for ``topic`` and for all topics."""
        self._totals[rate] += amount
        self._per_topic[rate][topic] += amount

    def _prune(self) -> None:
        hosted = {partition.topic_partition.topic for partition in self._partitions()}
        for counts in self._per_topic.values():
            for topic in [topic for topic in counts if topic not in hosted]:
                del counts[topic]

    def collect(self) -> Iterator[Metric]:
        self._prune()
        for rate, documentation in _TOPIC_RATES.items():
            family = CounterMetricFamily(self._PREFIX + rate, documentation, labels=["topic"])
            family.add_metric([], self._totals[rate])  # no labels: the all-topics series
            per_topic = self._per_topic[rate]
            for topic in sorted(per_topic):
                family.add_metric([topic], per_topic[topic])
            yield family


def _always() -> bool:
    return True


def _no_cleaner() -> CleanerMetrics | None:
    return None


def _no_partitions() -> Iterable[Partition]:
    return ()


class BrokerMetrics:
    """The broker's metrics in a registry of its own.

    ``partitions`` lists this broker's partitions and ``controller_active`` says
    whether it is the controller; both are read when scraped.
    """

    def __init__(
        self,
        purgatories: PurgatoryList,
        offline_dir_count: OfflineDirCount,
        *,
        partitions: PartitionList = _no_partitions,
        controller_active: ControllerActive = _always,
        cleaner: CleanerGauges = _no_cleaner,
        network: Callable[[], tuple[ConnectionQuotas, MemoryPool] | None] = lambda: None,
        client_quotas: Callable[[], ClientQuotas | None] = lambda: None,
        faults_applied: Callable[[], Mapping[tuple[str, str], int]] = dict,
        replication: ReplicationQuotas = _no_replication,
    ) -> None:
        self._purgatories = purgatories
        self._partitions = partitions
        self.registry = CollectorRegistry()
        self.registry.register(_PurgatoryCollector(purgatories))
        self.registry.register(_LogManagerCollector(offline_dir_count))
        self.registry.register(_PartitionCollector(partitions, controller_active))
        self._topic_rates = _BrokerTopicCollector(partitions)
        self.registry.register(self._topic_rates)
        self.registry.register(_CleanerCollector(cleaner))
        self.registry.register(_NetworkCollector(network))
        self.registry.register(_ClientQuotaCollector(client_quotas))
        self.registry.register(_FaultCollector(faults_applied))
        self.registry.register(_ReplicationCollector(replication))
        # The same collectors prometheus_client puts in its global registry; each
        # broker's registry gets its own instances (the process is shared, so
        # several brokers in one process report the same figures).
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._requests = Counter(
            "kafka_network_RequestMetrics_RequestsPerSec",
            "Requests handled",
            ["request"],
            registry=self.registry,
        )
        self._total_time = Histogram(
            "kafka_network_RequestMetrics_TotalTimeMs",
            "Request time from read to response, in ms",
            ["request"],
            buckets=_LATENCY_BUCKETS_MS,
            registry=self.registry,
        )
        self._per_request: dict[str, tuple[Any, Any]] = {}

    def record_request(self, request: str, elapsed_s: float) -> None:
        """Count one handled request of type ``request`` taking ``elapsed_s``."""
        children = self._per_request.get(request)
        if children is None:
            children = (self._requests.labels(request), self._total_time.labels(request))
            self._per_request[request] = children
        counter, histogram = children
        counter.inc()
        histogram.observe(elapsed_s * _MS_PER_S)

    def record_produce(self, topic: str, appended_bytes: int, appended_messages: int) -> None:
        """Count one partition of ``topic`` in a produce request, and the record bytes
        and records appended to it (0 when the append failed)."""
        self._topic_rates.mark(TOTAL_PRODUCE_REQUESTS, topic)
        if appended_bytes:
            self._topic_rates.mark(BYTES_IN, topic, appended_bytes)
        if appended_messages:
            self._topic_rates.mark(MESSAGES_IN, topic, appended_messages)

    def record_fetch(self, topic: str, size_bytes: int, *, from_follower: bool) -> None:
        """Count one partition of ``topic`` in a fetch request, and the record bytes
        sent for it (to a follower: replication bytes)."""
        self._topic_rates.mark(TOTAL_FETCH_REQUESTS, topic)
        if size_bytes:
            rate = REPLICATION_BYTES_OUT if from_follower else BYTES_OUT
            self._topic_rates.mark(rate, topic, size_bytes)

    def render(self) -> bytes:
        """All metrics in Prometheus's text exposition format."""
        return generate_latest(self.registry)

    def purgatory_snapshot(self) -> dict[str, PurgatoryMetrics]:
        """Each purgatory's counters, by purgatory name."""
        return {
            p.name: PurgatoryMetrics(p.watched, p.num_delayed, p.expired)
            for p in self._purgatories()
        }

    def partition_counts(self) -> PartitionCounts:
        """The partition gauges now."""
        return PartitionCounts.of(self._partitions())


def _response(status: int, body: bytes, content_type: bytes, *, head: bool) -> bytes:
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n" % (status, _REASONS[status], content_type, len(body))
    ) + (b"" if head else body)


def _could_start_request(received: bytes, prefixes: tuple[bytes, ...]) -> bool:
    """Whether ``received`` may still become an HTTP request line: garbage is refused
    from its first bytes, without waiting for a line end that may never come."""
    return any(method.startswith(received[: len(method)]) for method in prefixes)


def route(metrics: BrokerMetrics, ready: Ready, request_line: bytes) -> bytes:
    """The whole HTTP response to one request line (``GET /metrics HTTP/1.1``)."""
    parts = request_line.split(b" ")
    if (
        len(parts) != _REQUEST_LINE_PARTS
        or parts[0] not in _HTTP_METHODS
        or not parts[1].startswith(b"/")
        or not parts[2].startswith(b"HTTP/1.")
    ):
        return _response(400, b"bad request\n", _TEXT_CONTENT_TYPE, head=False)
    head = parts[0] == b"HEAD"
    path = parts[1].split(b"?", 1)[0]
    if path == b"/metrics":
        return _response(200, metrics.render(), _METRICS_CONTENT_TYPE, head=head)
    if path == b"/healthz":
        # Answering at all shows the event loop runs: this handler runs on it.
        return _response(200, b"ok\n", _TEXT_CONTENT_TYPE, head=head)
    if path == b"/readyz":
        if ready():
            return _response(200, b"ok\n", _TEXT_CONTENT_TYPE, head=head)
        return _response(503, b"not ready\n", _TEXT_CONTENT_TYPE, head=head)
    return _response(404, b"not found\n", _TEXT_CONTENT_TYPE, head=head)


async def _read_head(reader: asyncio.StreamReader, prefixes: tuple[bytes, ...]) -> bytes | None:
    """The whole request head (and whatever of the body came with it); None for garbage
    (anything that cannot start a request line of ``prefixes``, or a head too large)."""
    received = b""
    while _HEADER_END not in received and _BARE_HEADER_END not in received:
        if not _could_start_request(received, prefixes) or len(received) > _MAX_REQUEST_HEAD_BYTES:
            return None
        chunk = await reader.read(_MAX_REQUEST_HEAD_BYTES)
        if not chunk:
            break  # the peer finished sending: answer what it sent
        received += chunk
    return received if _could_start_request(received, prefixes) else None


async def _fault_answer(
    faults: FaultEndpoint, received: bytes, reader: asyncio.StreamReader, peer_host: str
) -> bytes:
    """The answer of the fault endpoint to the request whose head is ``received``."""
    head, _, body = received.replace(b"\r\n", b"\n").partition(b"\n\n")
    request_line, *header_lines = head.decode("latin-1").split("\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    length = headers.get("content-length", "0")
    if not length.isdigit() or int(length) > _MAX_BODY_BYTES:
        return _response(400, b"bad content-length\n", _TEXT_CONTENT_TYPE, head=False)
    if len(body) < int(length):
        body += await reader.readexactly(int(length) - len(body))
    answer = faults.answer(method, path.split("?", 1)[0], headers, body, peer_host)
    return _response(answer.status, answer.encoded(), _JSON_CONTENT_TYPE, head=False)


async def serve_metrics(
    metrics: BrokerMetrics,
    host: str,
    port: int,
    ready: Ready = _always,
    faults: FaultEndpoint | None = None,
) -> asyncio.Server:
    """An HTTP server for ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port``,
    and ``/faults`` when ``faults`` is given; ``MetricsPortError`` when that address
    cannot be bound."""
    prefixes = _METHOD_PREFIXES if faults is None else _FAULT_METHOD_PREFIXES

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            received = await _read_head(reader, prefixes)
            if received is None:
                writer.write(_response(400, b"bad request\n", _TEXT_CONTENT_TYPE, head=False))
            else:
                request_line = received.split(b"\n", 1)[0].rstrip(b"\r")
                target = request_line.split(b" ")[1:2]
                if faults is not None and target and target[0].startswith(FAULTS_PATH.encode()):
                    peer_host = str(writer.get_extra_info("peername")[0])
                    writer.write(await _fault_answer(faults, received, reader, peer_host))
                else:
                    writer.write(route(metrics, ready, request_line))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    try:
        return await asyncio.start_server(answer, host, port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise MetricsPortError(
            exc.errno, f"cannot serve metrics on {host}:{port} ({METRICS_PORT_PROPERTY}): {reason}"
        ) from exc
