"""``tickwheel.record``: Kafka's v2 record-batch format, as bytes in and bytes out.

The ground floor of the storage stack. A batch is a 61-byte header and its records
(``_batch`` draws the layout, byte by byte, and tells what the CRC covers); the
records may be compressed (``_compression``) and are decoded and encoded by
``_codec``; a transaction marker is a control batch (``_control``). ``iter_batches``
is the one walk over the batches of a buffer, ``build_batch`` and ``encode_batch``
the one way to make a batch. The log (``tickwheel.log``), the coordinators, share
state and the produce handler all read and write batches through this package.

Depends on the standard library, ``crc32c`` and ``cramjam``; imports nothing else of
tickwheel. Errors: ``RecordError`` and its subclasses, each carrying Kafka's code.

Concurrency: pure functions over bytes and immutable values; thread-safe.
"""

from tickwheel.record._batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_FIELD,
    CRC_OFFSET,
    CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK,
    LEADER_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    PREFIX_BYTES,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    check_batch,
    log_append_time_header,
    parse_batches,
    parse_header,
)
from tickwheel.record._builder import SimpleRecord, build_batch, encode_batch
from tickwheel.record._codec import (
    NO_HEADERS,
    Record,
    RecordHeaders,
    decode_headers,
    decode_records,
    encode_headers,
    encode_record,
    encode_record_fields,
    null_key_indexes,
    read_varint,
    record_keys,
    record_prefixes,
    record_timestamps,
    records_section,
    write_varint,
)
from tickwheel.record._compression import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
)
from tickwheel.record._control import (
    ControlType,
    EndTxnMarker,
    build_end_txn_marker,
    parse_end_txn_marker,
    read_control_batch,
)
from tickwheel.record._errors import CorruptRecordError, InvalidRecordError, RecordError
from tickwheel.record._iterator import iter_batches, whole_batches_end

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BATCH_HEADER",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_FIELD",
    "CRC_OFFSET",
    "CURRENT_MAGIC",
    "DELETE_HORIZON_FLAG_MASK",
    "GZIP",
    "LEADER_PREFIX",
    "LOG_OVERHEAD",
    "LZ4",
    "MAGIC_OFFSET",
    "NO_COMPRESSION",
    "NO_HEADERS",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "PREFIX_BYTES",
    "RECORD_BATCH_OVERHEAD",
    "SNAPPY",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "ZSTD",
    "BatchHeader",
    "ControlType",
    "CorruptRecordError",
    "EndTxnMarker",
    "InvalidRecordError",
    "Record",
    "RecordError",
    "RecordHeaders",
    "SimpleRecord",
    "build_batch",
    "build_end_txn_marker",
    "check_batch",
    "compress",
    "decode_headers",
    "decode_records",
    "decompress",
    "encode_batch",
    "encode_headers",
    "encode_record",
    "encode_record_fields",
    "iter_batches",
    "log_append_time_header",
    "null_key_indexes",
    "parse_batches",
    "parse_end_txn_marker",
    "parse_header",
    "read_control_batch",
    "read_varint",
    "record_keys",
    "record_prefixes",
    "record_timestamps",
    "records_section",
    "whole_batches_end",
    "write_varint",
]
