"""``LogConfig``: the topic-level settings one partition log obeys, under Kafka's names.

Fields are Kafka's topic config names with dots turned into underscores and the same
defaults (``segment.bytes`` 1 GiB, ``segment.ms`` 7 days, ``max.message.bytes`` 1 MiB +
12, ``flush.messages``/``flush.ms`` never, ...). ``from_properties`` takes the dotted
names as strings, the way CreateTopics and AlterConfigs carry them. Kafka topic
settings the log has no use for (compaction, tiered storage, throttling, ...) are
accepted and ignored, so the broker can pass a topic's whole config; a name Kafka does
not know is an error.

Concurrency: a frozen value, shareable between threads.
"""

from __future__ import annotations

import dataclasses
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
# The smallest segment Kafka accepts (a v0 record's overhead); anything smaller could
# not hold a batch header.
_MIN_SEGMENT_BYTES: Final = 14
# One index entry is 8 bytes; Kafka requires room for at least one.
_MIN_SEGMENT_INDEX_BYTES: Final = 8
# Relative offsets and file positions are 32-bit in the index files.
_MAX_INT32: Final = 2**31 - 1

# Kafka topic configs the log accepts and ignores: compaction, tiered storage, quotas,
# compression re-encoding and timestamp bounds are not part of this log.
_IGNORED_TOPIC_CONFIGS: Final = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)


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

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> LogConfig:
        """Build a config from Kafka's dotted topic config names (``segment.bytes``, ...)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, int | str] = {}
        for name, raw in properties.items():
            field_name = name.replace(".", "_")
            if field_name in fields:
                values[field_name] = raw if fields[field_name].type == "str" else int(raw)
            elif name not in _IGNORED_TOPIC_CONFIGS:
                raise ValueError(f"unknown topic config {name!r}")
        return cls(**values)  # type: ignore[arg-type]
