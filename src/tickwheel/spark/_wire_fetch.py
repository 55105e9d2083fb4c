"""Fetch requests over the Kafka protocol: the raw record bytes of one partition.

librdkafka hands out one ``Message`` object per record, which is what made the source
slow; the executors therefore fetch record batches themselves, as bytes, and decode
them into columns (``_batch_decode``). ``WireFetcher`` makes just the requests that
takes, over ``tickwheel.protocol``'s ``BlockingClient`` (framing, correlation and
kio's schemas are the protocol layer's): ApiVersions v0 on each new connection
(every broker answers it), Metadata (v1-12) to find a
partition's leader, and Fetch (v4-12: sessionless, ``replica_id`` -1, the isolation
level of ``kafka.isolation.level``, read_committed by default as librdkafka's) to that
leader. Versions are the highest both sides speak; Fetch stops at 12, the last version
that names topics rather than topic ids.

Leaders move: a partition error that says so (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH, REPLICA_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR), a lost connection or a garbled
answer makes the fetcher forget the leader, look it up again from the bootstrap
servers after ``retry.backoff.ms`` and retry, until the caller's deadline (the
source's ``kafkaConsumer.pollTimeoutMs``). Other partition errors,
OFFSET_OUT_OF_RANGE among them, are returned for the caller to judge.

The ``kafka.*`` settings it honours: ``bootstrap.servers``, ``client.id``,
``isolation.level``, ``max.partition.fetch.bytes`` (default 8 MiB, as the librdkafka
reader sets it), ``fetch.max.bytes``, ``fetch.wait.max.ms`` (default 10 ms),
``socket.timeout.ms``, ``retry.backoff.ms``. It speaks PLAINTEXT only: ``supports``
says whether a configuration can use it (others go through librdkafka, see ``_fetch``).

Concurrency: a ``WireFetcher`` and its connections belong to one thread at a time; the
per-process cache (``wire_fetcher``) is guarded by a lock, and a Spark Python worker
runs one task at a time.
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, BlockingClient, ProtocolError, VersionRange
from tickwheel.spark._errors import SparkKafkaError

ClientConfig = tuple[tuple[str, str], ...]

_METADATA_VERSIONS: Final = (1, 12)
_FETCH_VERSIONS: Final = (4, 12)
_PLAINTEXT: Final = "plaintext"
_READ_COMMITTED: Final = "read_committed"
_CONSUMER_REPLICA_ID: Final = -1
_NO_SESSION: Final = 0
_FINAL_EPOCH: Final = -1
_NO_EPOCH: Final = -1
_DEFAULTS: Final = {
    "client.id": "tickwheel-spark-reader",
    "max.partition.fetch.bytes": str(8 << 20),
    "fetch.max.bytes": str(50 << 20),
    "fetch.wait.max.ms": "10",
    "socket.timeout.ms": "60000",
    "retry.backoff.ms": "100",
}
_MS_PER_S: Final = 1000
RETRIABLE_ERRORS: Final = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.replica_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.kafka_storage_error,
        ErrorCode.not_coordinator,
        ErrorCode.request_timed_out,
    }
)


def supports(client_config: ClientConfig) -> bool:
    """Whether the wire fetcher can serve ``client_config`` (PLAINTEXT only)."""
    protocol = dict(client_config).get("security.protocol", _PLAINTEXT)
    return protocol.lower() == _PLAINTEXT


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a Fetch response."""

    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]
    records: bytes


def _connect(host: str, port: int, client_id: str, timeout_s: float) -> BlockingClient:
    """A connection to ``host:port`` that has asked the broker's API versions."""
    client = BlockingClient(host, port, client_id=client_id, timeout_s=timeout_s, no_delay=True)
    client.ask_versions()
    return client


def _version(client: BlockingClient, api_key: ApiKey, wanted: tuple[int, int]) -> int:
    """The highest version of ``api_key`` both sides speak."""
    version = client.protocol.version(api_key, VersionRange(*wanted))
    if version is None:
        served = client.protocol.served(api_key) or VersionRange(0, -1)
        raise SparkKafkaError(
            f"the broker at {client.address} serves API {int(api_key)}"
            f" v{served.min_version}-{served.max_version};"
            f" the source speaks v{wanted[0]}-{wanted[1]}"
        )
    return version


class WireFetcher:
    """Fetches partitions' records from their leaders; see the module doc."""

    def __init__(self, client_config: ClientConfig) -> None:
        settings = {**_DEFAULTS, **dict(client_config)}
        servers = settings.get("bootstrap.servers") or settings.get("metadata.broker.list")
        if not servers:
            raise SparkKafkaError("kafka.bootstrap.servers is not set")
        self._bootstrap = [_split_address(a.strip()) for a in servers.split(",") if a.strip()]
        self._client_id = settings["client.id"]
        self._read_committed = settings.get("isolation.level", _READ_COMMITTED) == _READ_COMMITTED
        self._partition_max_bytes = int(settings["max.partition.fetch.bytes"])
        self._max_bytes = int(settings["fetch.max.bytes"])
        self._max_wait_ms = int(settings["fetch.wait.max.ms"])
        self._timeout_s = int(settings["socket.timeout.ms"]) / _MS_PER_S
        self._backoff_s = int(settings["retry.backoff.ms"]) / _MS_PER_S
        self._connections: dict[tuple[str, int], BlockingClient] = {}
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}

    @property
    def read_committed(self) -> bool:
        """Whether fetches are read_committed (else read_uncommitted)."""
        return self._read_committed

    def fetch(self, topic: str, partition: int, offset: int, deadline: float) -> PartitionFetch:
        """The records of ``topic``-``partition`` from ``offset``, from its leader,
        retrying leader moves and lost connections until ``deadline`` (monotonic)."""
        while True:
            try:
                answer = self._fetch_once(topic, partition, offset)
            except (OSError, ProtocolError) as exc:
                self._forget(topic, partition, drop_connection=True)
                failure = f"connection lost ({exc})"
            else:
                if answer.error_code not in RETRIABLE_ERRORS:
                    return answer
                self._forget(topic, partition, drop_connection=False)
                failure = answer.error_code.name
            if time.monotonic() + self._backoff_s > deadline:
                raise SparkKafkaError(
                    f"fetching {topic}-{partition} at offset {offset}: {failure}, until"
                    " kafkaConsumer.pollTimeoutMs ran out"
                )
            time.sleep(self._backoff_s)

    def _fetch_once(self, topic: str, partition: int, offset: int) -> PartitionFetch:
        connection = self._connection(self._leader(topic, partition))
        body = connection.call(
            ApiKey.FETCH,
            _version(connection, ApiKey.FETCH, _FETCH_VERSIONS),
            {
                "replica_id": _CONSUMER_REPLICA_ID,
                "max_wait": self._max_wait_ms,
                "min_bytes": 1,
                "max_bytes": self._max_bytes,
                "isolation_level": 1 if self._read_committed else 0,
                "session_id": _NO_SESSION,
                "session_epoch": _FINAL_EPOCH,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": _NO_EPOCH,
                                "fetch_offset": offset,
                                "last_fetched_epoch": _NO_EPOCH,
                                "log_start_offset": -1,
                                "partition_max_bytes": self._partition_max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        # Fetch has a top-level error code from v7 on.
        error_code = getattr(body, "error_code", ErrorCode.none)
        if error_code != ErrorCode.none:
            return PartitionFetch(error_code, -1, -1, -1, [], b"")
        for topic_data in body.responses:
            for data in topic_data.partitions:
                if topic_data.topic == topic and data.partition_index == partition:
                    return PartitionFetch(
                        data.error_code,
                        int(data.high_watermark),
                        int(data.last_stable_offset),
                        int(getattr(data, "log_start_offset", -1)),
                        [
                            (int(a.producer_id), int(a.first_offset))
                            for a in data.aborted_transactions or ()
                        ],
                        bytes(data.records or b""),
                    )
        raise ConnectionError(f"the Fetch response left {topic}-{partition} out")

    def _leader(self, topic: str, partition: int) -> tuple[str, int]:
        leader = self._leaders.get((topic, partition))
        if leader is not None:
            return leader
        failure = "no bootstrap server answered"
        for address in self._bootstrap:
            try:
                connection = self._connection(address)
                body = connection.call(
                    ApiKey.METADATA,
                    _version(connection, ApiKey.METADATA, _METADATA_VERSIONS),
                    {
                        "topics": [{"name": topic, "topic_id": None}],
                        "allow_auto_topic_creation": False,
                        "include_cluster_authorized_operations": False,
                        "include_topic_authorized_operations": False,
                    },
                )
            except (OSError, ProtocolError) as exc:
                self._drop(address)
                failure = f"{address[0]}:{address[1]}: {exc}"
                continue
            brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}
            for topic_data in body.topics:
                for data in topic_data.partitions:
                    if topic_data.name == topic and int(data.partition_index) == partition:
                        found = brokers.get(int(data.leader_id))
                        if found is not None:
                            self._leaders[(topic, partition)] = found
                            return found
            raise ConnectionError(f"no leader known for {topic}-{partition}")
        raise ConnectionError(failure)

    def _connection(self, address: tuple[str, int]) -> BlockingClient:
        connection = self._connections.get(address)
        if connection is None:
            connection = _connect(*address, self._client_id, self._timeout_s)
            self._connections[address] = connection
        return connection

    def _drop(self, address: tuple[str, int]) -> None:
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

    def _forget(self, topic: str, partition: int, *, drop_connection: bool) -> None:
        leader = self._leaders.pop((topic, partition), None)
        if drop_connection and leader is not None:
            self._drop(leader)

    def close(self) -> None:
        """Close every connection."""
        for address in list(self._connections):
            self._drop(address)


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SparkKafkaError(f"kafka.bootstrap.servers: expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


_cache_lock = threading.Lock()
_fetchers: dict[ClientConfig, WireFetcher] = {}


def wire_fetcher(client_config: ClientConfig) -> WireFetcher:
    """This worker process's fetcher for ``client_config``, kept for the worker's life."""
    with _cache_lock:
        fetcher = _fetchers.get(client_config)
        if fetcher is None:
            fetcher = WireFetcher(client_config)
            _fetchers[client_config] = fetcher
        return fetcher


def close_wire_fetchers() -> None:
    """Close and forget every fetcher this process keeps (a worker about to end, or a
    process whose brokers are about to go); the next read opens new connections."""
    with _cache_lock:
        fetchers = list(_fetchers.values())
        _fetchers.clear()
    for fetcher in fetchers:
        fetcher.close()


atexit.register(close_wire_fetchers)
