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
- ``kafka_server_BrokerTopicMetrics_BytesInPerSec_total`` and ``..._BytesOutPerSec_total``:
  record bytes produced and fetched.
- ``kafka_log_LogManager_OfflineLogDirectoryCount``: log directories taken offline by
  an I/O error (read when scraped).

Each broker has its own ``CollectorRegistry``, so several brokers in one process
(tests) do not share counters. ``serve_metrics`` answers any HTTP GET with the text.

Concurrency: updated and scraped on the broker's event-loop thread; ``snapshot`` may
be called from any thread (it reads integers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tickwheel.purgatory import DelayedOperationPurgatory

_MS_PER_S = 1000.0
# Request latency buckets in ms: long polls sit in the purgatory up to max_wait_ms.
_LATENCY_BUCKETS_MS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000)
_HTTP_HEADER_END = b"\r\n\r\n"
_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

PurgatoryList = Callable[[], Sequence[DelayedOperationPurgatory[Any]]]
OfflineDirCount = Callable[[], int]


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


class BrokerMetrics:
    """The broker's metrics in a registry of its own."""

    def __init__(self, purgatories: PurgatoryList, offline_dir_count: OfflineDirCount) -> None:
        self._purgatories = purgatories
        self.registry = CollectorRegistry()
        self.registry.register(_PurgatoryCollector(purgatories))
        self.registry.register(_LogManagerCollector(offline_dir_count))
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
        self._bytes_in = Counter(
            "kafka_server_BrokerTopicMetrics_BytesInPerSec",
            "Record bytes appended",
            registry=self.registry,
        )
        self._bytes_out = Counter(
            "kafka_server_BrokerTopicMetrics_BytesOutPerSec",
            "Record bytes fetched",
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

    def record_bytes_in(self, size_bytes: int) -> None:
        """Count record bytes appended."""
        if size_bytes:
            self._bytes_in.inc(size_bytes)

    def record_bytes_out(self, size_bytes: int) -> None:
        """Count record bytes sent to fetchers."""
        if size_bytes:
            self._bytes_out.inc(size_bytes)

    def render(self) -> bytes:
        """All metrics in Prometheus's text exposition format."""
        return generate_latest(self.registry)

    def purgatory_snapshot(self) -> dict[str, PurgatoryMetrics]:
        """Each purgatory's counters, by purgatory name."""
        return {
            p.name: PurgatoryMetrics(p.watched, p.num_delayed, p.expired)
            for p in self._purgatories()
        }


async def serve_metrics(metrics: BrokerMetrics, host: str, port: int) -> asyncio.Server:
    """An HTTP server answering every request with the metrics text."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(_HTTP_HEADER_END)
            body = metrics.render()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: "
                + _CONTENT_TYPE
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port)
