"""``tickwheel.log``: a partition's segmented, durable log of Kafka record batches.

The log stores record batches (format v2, ``tickwheel.record``) as opaque bytes: it
validates their headers and CRCs, assigns offsets by patching each batch's base offset
and leader epoch, and decodes records only where Kafka's log does (the cleaner, a
compacted topic's keys, ListOffsets by time). A leader's rules for producers' batches
are ``_validator``. Segments of ``segment.bytes`` carry sparse offset and time
indexes; reads hand out file slices for ``os.sendfile``; idempotent producers are
deduplicated; ``flush()`` and the recovery-point checkpoint follow Kafka's durability
model, and ``Log.open`` recovers a crashed directory to its longest valid prefix. A
leader epoch cache (``_leader_epoch``, Kafka's ``leader-epoch-checkpoint``) records
where each leader epoch starts and answers OffsetsForLeaderEpoch
(``Log.end_offset_for_epoch``). Transactions: markers (control batches of
``tickwheel.record``), open transactions and the last stable offset
(``_producer_state``), aborted-transaction indexes (``_txn_index``). ``LogCleaner``
(``_cleaner``) compacts logs with ``cleanup.policy=compact``, keeping the latest record
of each key. ``Log`` (``_log``) documents the directory layout and ``_recovery`` the
procedure.

The batch-format names exported here (``BatchHeader``, ``check_batch``, the attribute
masks, ``build_end_txn_marker`` and the rest) are ``tickwheel.record``'s, re-exported
for the log's users; ``LogError`` is the record format's ``RecordError``, so it covers
a corrupt or invalid batch too.

Depends on ``tickwheel.record``, the standard library, ``crc32c`` and ``cramjam``; no
network, no replication.

Concurrency: ``Log`` is thread-safe (one lock per log); values are immutable.
"""

from tickwheel.log._checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINTS,
    RECOVERY_POINT_CHECKPOINT,
    TEMP_SUFFIX,
    fsync_dir,
    fsync_file,
    read_checkpoint,
    write_atomically,
)
from tickwheel.log._clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    NO_BROKER_EPOCH,
    take_clean_shutdown,
    write_clean_shutdown,
)
from tickwheel.log._cleaner import CleanerConfig, CleanerMetrics, LogCleaner
from tickwheel.log._config import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    LogConfig,
    throttled_replicas,
)
from tickwheel.log._errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    LogError,
    LogStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
)
from tickwheel.log._leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry
from tickwheel.log._log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    LogAppendInfo,
    TimestampAndOffset,
    system_clock_ms,
)
from tickwheel.log._offset_checkpoints import OffsetCheckpoints
from tickwheel.log._offset_metadata import LogOffsetMetadata
from tickwheel.log._producer_state import (
    NO_VERIFICATION_GUARD,
    AppendOrigin,
    ProducerStateSummary,
    VerificationGuard,
)
from tickwheel.log._records import FetchDataInfo, FileRecordsSlice
from tickwheel.log._recovery import CLEANED_SUFFIX, SWAP_SUFFIX, UNFLUSHED_RECOVERED
from tickwheel.log._txn_index import AbortedTxn
from tickwheel.record import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    ControlType,
    EndTxnMarker,
    build_end_txn_marker,
    check_batch,
    parse_end_txn_marker,
    read_control_batch,
    read_varint,
    records_section,
    write_varint,
)

__all__ = [
    "CLEANED_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "CONTROL_FLAG_MASK",
    "EARLIEST_TIMESTAMP",
    "FOLLOWER_THROTTLED_REPLICAS",
    "HIGH_WATERMARK_CHECKPOINT",
    "LATEST_TIMESTAMP",
    "LEADER_THROTTLED_REPLICAS",
    "LOG_OVERHEAD",
    "LOG_START_OFFSET_CHECKPOINT",
    "MAX_TIMESTAMP",
    "NO_BROKER_EPOCH",
    "NO_VERIFICATION_GUARD",
    "OFFSET_CHECKPOINTS",
    "RECORD_BATCH_OVERHEAD",
    "RECOVERY_POINT_CHECKPOINT",
    "SWAP_SUFFIX",
    "TEMP_SUFFIX",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UNFLUSHED_RECOVERED",
    "AbortedTxn",
    "AppendOrigin",
    "BatchHeader",
    "CleanerConfig",
    "CleanerMetrics",
    "ControlType",
    "CorruptRecordError",
    "EndTxnMarker",
    "EpochEntry",
    "FetchDataInfo",
    "FileRecordsSlice",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTxnStateError",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogError",
    "LogOffsetMetadata",
    "LogStorageError",
    "OffsetCheckpoints",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerStateSummary",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RecordValidationError",
    "TimestampAndOffset",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
    "VerificationGuard",
    "build_end_txn_marker",
    "check_batch",
    "fsync_dir",
    "fsync_file",
    "parse_end_txn_marker",
    "read_checkpoint",
    "read_control_batch",
    "read_varint",
    "records_section",
    "system_clock_ms",
    "take_clean_shutdown",
    "throttled_replicas",
    "write_atomically",
    "write_clean_shutdown",
    "write_varint",
]
