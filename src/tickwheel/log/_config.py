"""``LogConfig``: the topic-level settings one partition log obeys, under Kafka's names.

Fields are Kafka's topic config names with dots turned into underscores and the same
defaults (``segment.bytes`` 1 GiB, ``segment.ms`` 7 days, ``max.message.bytes`` 1 MiB +
12, ``flush.messages``/``flush.ms`` never, ...). ``from_properties`` takes the dotted
names as strings, the way CreateTopics and AlterConfigs carry them. Compaction's
settings (``cleanup.policy``, ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``delete.retention.ms``) are fields the cleaner
(``_cleaner``) and retention read. Kafka topic settings the log has no use for (tiered
storage, compression re-encoding, ...) are accepted and ignored, so the broker can pass
a topic's whole config; a name Kafka does not know is an error. The replication
throttles' replica lists (``leader/follower.replication.throttled.replicas``) are
checked here and parsed by ``throttled_replicas`` for the replication layer.

Concurrency: a frozen value, shareable between threads.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Final

# Kafka's Long.MAX_VALUE, its "never" for flush.messages and flush.ms.
NEVER: Final = 2**63 - 1
INFINITE_RETENTION: Final = -1
CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"

_DEFAULT_SEGMENT_BYTES: Final = 1024 * 1024 * 1024
_DEFAULT_SEGMENT_MS: Final = 7 * 24 * 60 * 60 * 1000
_DEFAULT_SEGMENT_INDEX_BYTES: Final = 10 * 1024 * 1024
# 1 MiB of records plus the 12-byte log overhead, Kafka's default.
_DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024 + 12
_DEFAULT_INDEX_INTERVAL_BYTES: Final = 4096
_DEFAULT_RETENTION_MS: Final = 7 * 24 * 60 * 60 * 1000
CLEANUP_DELETE: Final = "delete"
CLEANUP_COMPACT: Final = "compact"
_CLEANUP_POLICIES: Final = frozenset({CLEANUP_DELETE, CLEANUP_COMPACT})
_DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: Final = 0.5
_DEFAULT_DELETE_RETENTION_MS: Final = 24 * 60 * 60 * 1000
# The smallest segment Kafka accepts (a v0 record's overhead); anything smaller could
# not hold a batch header.
_MIN_SEGMENT_BYTES: Final = 14
# One index entry is 8 bytes; Kafka requires room for at least one.
_MIN_SEGMENT_INDEX_BYTES: Final = 8
# Relative offsets and file positions are 32-bit in the index files.
_MAX_INT32: Final = 2**31 - 1

# Kafka topic configs the log accepts and ignores: tiered storage, quotas, compression
# re-encoding and timestamp bounds are not part of this log.
_IGNORED_TOPIC_CONFIGS: Final = frozenset(
    {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "file.delete.delay.ms",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)


LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
_ALL_REPLICAS: Final = "*"
_REPLICA_PATTERN: Final = re.compile(r"([0-9]+):([0-9]+)")


def throttled_replicas(name: str, value: str) -> tuple[tuple[int, int], ...] | None:
    """The (partition, broker) pairs a ``*.replication.throttled.replicas`` topic config
    lists, or None for ``*`` (every replica); ValueError naming ``name`` if it is neither
    (Kafka's ``ThrottledReplicaListValidator``: empty entries are allowed)."""
    if value.strip() == _ALL_REPLICAS:
        return None
    pairs = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        match = _REPLICA_PATTERN.fullmatch(entry)
        if match is None:
            raise ValueError(
                f"{name} must be the literal '*' or a list of replicas in the following "
                f"format: [partitionId]:[brokerId],[partitionId]:[brokerId],..., got {value!r}"
            )
        pairs.append((int(match[1]), int(match[2])))
    return tuple(pairs)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Settings of one partition log; Kafka's topic config names and defaults."""

    segment_bytes: int = _DEFAULT_SEGMENT_BYTES
    segment_ms: int = _DEFAULT_SEGMENT_MS
    segment_index_bytes: int = _DEFAULT_SEGMENT_INDEX_BYTES
    max_message_bytes: int = _DEFAULT_MAX_MESSAGE_BYTES
    index_interval_bytes: int = _DEFAULT_INDEX_INTERVAL_BYTES
    retention_ms: int = _DEFAULT_RETENTION_MS
    retention_bytes: int = INFINITE_RETENTION
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    message_timestamp_type: str = CREATE_TIME
    min_insync_replicas: int = 1
    # "delete", "compact" or both, comma-separated, as Kafka writes them.
    cleanup_policy: str = CLEANUP_DELETE
    min_cleanable_dirty_ratio: float = _DEFAULT_MIN_CLEANABLE_DIRTY_RATIO
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = NEVER
    delete_retention_ms: int = _DEFAULT_DELETE_RETENTION_MS
    # Derived from cleanup.policy once (every append reads ``compacted``): whether the
    # cleaner compacts the log, and whether retention deletes its old segments.
    compacted: bool = dataclasses.field(init=False, compare=False)
    retention_deletes: bool = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not _MIN_SEGMENT_BYTES <= self.segment_bytes <= _MAX_INT32:
            raise ValueError(f"segment.bytes must be in [14, 2^31-1], got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be positive, got {self.segment_ms}")
        if self.segment_index_bytes < _MIN_SEGMENT_INDEX_BYTES:
            raise ValueError(f"segment.index.bytes must be >= 8, got {self.segment_index_bytes}")
        if self.max_message_bytes < 0:
            raise ValueError(f"max.message.bytes must be >= 0, got {self.max_message_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.retention_ms < INFINITE_RETENTION or self.retention_bytes < INFINITE_RETENTION:
            raise ValueError("retention.ms and retention.bytes must be >= -1")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise ValueError("flush.messages must be >= 1 and flush.ms >= 0")
        if self.message_timestamp_type not in {CREATE_TIME, LOG_APPEND_TIME}:
            raise ValueError(
                f"message.timestamp.type must be CreateTime or LogAppendTime, "
                f"got {self.message_timestamp_type!r}"
            )
        if self.min_insync_replicas < 1:
            raise ValueError(f"min.insync.replicas must be >= 1, got {self.min_insync_replicas}")
        self._check_compaction()

    def _check_compaction(self) -> None:
        policies = {policy.strip() for policy in self.cleanup_policy.split(",")}
        if not policies <= _CLEANUP_POLICIES:
            raise ValueError(
                f"cleanup.policy must be delete, compact or both, got {self.cleanup_policy!r}"
            )
        object.__setattr__(self, "compacted", CLEANUP_COMPACT in policies)
        object.__setattr__(self, "retention_deletes", CLEANUP_DELETE in policies)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )
        if self.min_compaction_lag_ms < 0 or self.delete_retention_ms < 0:
            raise ValueError("min.compaction.lag.ms and delete.retention.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError(
                f"max.compaction.lag.ms must be positive, got {self.max_compaction_lag_ms}"
            )
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError("min.compaction.lag.ms must not exceed max.compaction.lag.ms")

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> LogConfig:
        """Build a config from Kafka's dotted topic config names (``segment.bytes``, ...)."""
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        values: dict[str, int | float | str] = {}
        parsers = {"str": str, "float": float, "int": int}
        for name, raw in properties.items():
            field_name = name.replace(".", "_")
            if field_name in fields:
                values[field_name] = parsers[str(fields[field_name].type)](raw)
            elif name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
                throttled_replicas(name, raw)  # Used by replication, checked here.
            elif name not in _IGNORED_TOPIC_CONFIGS:
                raise ValueError(f"unknown topic config {name!r}")
        return cls(**values)  # type: ignore[arg-type]
