"""Record batch v2 headers: their layout, reading, validating and patching them.

A v2 batch (KIP-98, Kafka's ``DefaultRecordBatch``) is a 61-byte header followed by its
records (``_codec``), all big-endian:

=======  =====  ======================  ===============================================
offset   bytes  field                   notes
=======  =====  ======================  ===============================================
0        8      base offset             rewritten by the leader that appends the batch
8        4      batch length            bytes after this field: size = length + 12
                                        (``LOG_OVERHEAD``)
12       4      partition leader epoch  rewritten by the leader
16       1      magic                   2 (``CURRENT_MAGIC``)
17       4      CRC                     CRC-32C (Castagnoli) of bytes 21 to the end
21       2      attributes              codec (bits 0-2), LogAppendTime (3),
                                        transactional (4), control (5: a transaction
                                        marker, ``_control``), delete horizon (6)
23       4      last offset delta       last offset = base offset + delta
27       8      base timestamp          records store their timestamp as a delta
35       8      max timestamp           the batch's largest (or the LogAppendTime)
43       8      producer id             -1: none
51       2      producer epoch
53       4      base sequence           -1: none
57       4      record count            then the records, from byte 61
=======  =====  ======================  ===============================================

The CRC covers the batch from its attributes (byte 21) to its end, and so excludes the
three fields a leader changes: base offset, batch length and partition leader epoch.
That is why a leader assigns offsets without recomputing it: it writes a patched
16-byte prefix followed by the client's own bytes (``os.writev``), so the payload is
never copied and the producer's CRC stays valid end to end. Only
``message.timestamp.type=LogAppendTime`` changes covered bytes (attributes and max
timestamp); then the 61-byte header is patched and the CRC recomputed over it and the
untouched records (``log_append_time_header``).

``check_batch`` validates one batch's framing, magic and CRC; ``parse_batches`` every
batch of a payload that came from outside (a produce, a replica fetch).

Concurrency: pure functions over immutable or caller-owned buffers; thread-safe.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

import crc32c

from tickwheel.record._errors import CorruptRecordError, InvalidRecordError

LOG_OVERHEAD: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAX_TIMESTAMP_OFFSET: Final = 35
RECORD_BATCH_OVERHEAD: Final = 61
CURRENT_MAGIC: Final = 2
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
# KIP-534: the base timestamp is the batch's delete horizon (set by the log cleaner).
DELETE_HORIZON_FLAG_MASK: Final = 0x40

# The 61-byte header, field by field as ``BatchHeader`` names them.
BATCH_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
# Base offset, batch length, partition leader epoch: the 16 bytes a leader writes in
# place of a producer's batch prefix when it assigns the batch's offsets.
LEADER_PREFIX: Final = struct.Struct(">qii")
PREFIX_BYTES: Final = LEADER_PREFIX.size
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
CRC_FIELD: Final = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_bytes(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record."""
        return self.base_offset + self.last_offset_delta


def parse_header(buffer: bytes | bytearray | memoryview, position: int) -> BatchHeader:
    """Read the header at ``position``; the caller ensures 61 bytes are there."""
    # ``tuple.__new__`` builds the header straight from the unpacked tuple: half the
    # cost of ``BatchHeader._make``, a Python-level classmethod; every appended and
    # every scanned batch pays it.
    return tuple.__new__(BatchHeader, BATCH_HEADER.unpack_from(buffer, position))


def check_batch(buffer: memoryview, position: int, available_bytes: int) -> BatchHeader:
    """Validate the framing, magic and CRC of the batch at ``position``; return its header.

    ``available_bytes`` is how many bytes from ``position`` belong to the input.
    Raises ``CorruptRecordError`` or ``InvalidRecordError`` (an old magic).
    """
    if available_bytes <= MAGIC_OFFSET:
        raise CorruptRecordError(f"truncated batch: {available_bytes} bytes at {position}")
    magic = buffer[position + MAGIC_OFFSET]
    if magic != CURRENT_MAGIC:
        if magic < CURRENT_MAGIC:
            raise InvalidRecordError(f"record batch magic {magic}: only magic 2 is accepted")
        raise CorruptRecordError(f"unknown record batch magic {magic}")
    if available_bytes < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"truncated batch header: {available_bytes} bytes at {position}")
    header = tuple.__new__(BatchHeader, BATCH_HEADER.unpack_from(buffer, position))
    size_bytes = header.batch_length + LOG_OVERHEAD
    if size_bytes < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} is below the header size")
    if size_bytes > available_bytes:
        raise CorruptRecordError(
            f"truncated batch: length says {size_bytes} bytes, {available_bytes} present"
        )
    if crc32c.crc32c(buffer[position + ATTRIBUTES_OFFSET : position + size_bytes]) != header.crc:
        raise CorruptRecordError(f"CRC mismatch in the batch at offset {header.base_offset}")
    return header


def parse_batches(data: memoryview) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of a payload (framing, magic, CRC); return (position, header)s."""
    batches: list[tuple[int, BatchHeader]] = []
    position = 0
    total = len(data)
    while position < total:
        header = check_batch(data, position, total - position)
        batches.append((position, header))
        position += header.batch_length + LOG_OVERHEAD
    return batches


def log_append_time_header(
    data: memoryview, position: int, base_offset: int, leader_epoch: int, now_ms: int
) -> bytes:
    """The batch's header rewritten for LogAppendTime, with its CRC recomputed."""
    header = parse_header(data, position)
    size_bytes = header.batch_length + LOG_OVERHEAD
    patched = bytearray(data[position : position + RECORD_BATCH_OVERHEAD])
    LEADER_PREFIX.pack_into(patched, 0, base_offset, header.batch_length, leader_epoch)
    _ATTRIBUTES.pack_into(patched, ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(patched, MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c.crc32c(memoryview(patched)[ATTRIBUTES_OFFSET:])
    crc = crc32c.crc32c(data[position + RECORD_BATCH_OVERHEAD : position + size_bytes], crc)
    CRC_FIELD.pack_into(patched, CRC_OFFSET, crc)
    return bytes(patched)
