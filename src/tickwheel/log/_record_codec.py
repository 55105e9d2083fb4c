"""Records inside a v2 batch: decompressing, decoding, encoding and recompressing them.

The log stores batches as opaque bytes (``_batch``). Three parts need the records inside:
the cleaner (``_cleaner``), which keeps each key's latest record; a leader append to a
compacted topic, which refuses records without a key (INVALID_RECORD, as Kafka does);
and ListOffsets by time (``record_timestamps``), which answers the first record at or
after a time and the record holding the largest timestamp, not their batches.

A record (KIP-98) is a zig-zag varint length, then: attributes (int8), timestamp delta
(varlong), offset delta (varint), key length and key (-1: null), value length and
value (-1: null, a tombstone), header count and headers. Headers are kept as their raw
bytes: the cleaner never looks inside them.

Compression (attributes bits 0-2) covers all records of a batch. The codecs, as Kafka
writes them: gzip (a gzip stream), snappy (the xerial/snappy-java framing: an 8-byte
magic, version and compatible-version int32s, then int32-length-prefixed raw snappy
blocks; a payload without the magic is one raw snappy block, as librdkafka may write
it), lz4 (the LZ4 frame format) and zstd (a zstd frame). ``cramjam`` does the work.

Concurrency: pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

import cramjam

from tickwheel.log._batch import (
    COMPRESSION_CODEC_MASK,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
)
from tickwheel.log._errors import CorruptRecordError

NO_COMPRESSION: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
_NULL_LENGTH: Final = -1
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_VERSION: Final = 1
_XERIAL_COMPATIBLE_VERSION: Final = 1
# snappy-java's default block size.
_XERIAL_BLOCK_BYTES: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")
_VARINT_CONTINUATION: Final = 0x80
_VARINT_PAYLOAD_MASK: Final = 0x7F
_VARINT_PAYLOAD_BITS: Final = 7
_SIGN_SHIFT: Final = 63


# A NamedTuple rather than a frozen dataclass: the cleaner decodes every record of the
# log, and a tuple is built several times faster.
class Record(NamedTuple):
    """One decoded record; ``headers`` is the raw header count and headers."""

    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value: bytes | None
    headers: bytes
    # The whole record as stored, length prefix included: copied as is when its
    # batch's base timestamp (which its timestamp delta counts from) stays.
    raw: bytes


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records section of a batch compressed with ``codec``."""
    try:
        if codec == NO_COMPRESSION:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except cramjam.DecompressionError as error:
        raise CorruptRecordError(
            f"records do not decompress with codec {codec}: {error}"
        ) from error
    raise CorruptRecordError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with ``codec`` the way Kafka writes it."""
    if codec == NO_COMPRESSION:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        blocks = [
            bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_BYTES]))
            for start in range(0, len(data), _XERIAL_BLOCK_BYTES)
        ]
        header = _XERIAL_HEADER.pack(_XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPATIBLE_VERSION)
        return header + b"".join(_INT32.pack(len(block)) + block for block in blocks)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    position = _XERIAL_HEADER.size
    parts: list[bytes] = []
    while position < len(data):
        (length,) = _INT32.unpack_from(data, position)
        position += _INT32.size
        parts.append(bytes(cramjam.snappy.decompress_raw(data[position : position + length])))
        position += length
    return b"".join(parts)


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """The zig-zag varint at ``position`` and the position after it."""
    shift = 0
    raw = 0
    while True:
        if position >= len(data):
            raise CorruptRecordError("a record varint runs past the end of its batch")
        byte = data[position]
        position += 1
        raw |= (byte & _VARINT_PAYLOAD_MASK) << shift
        if not byte & _VARINT_CONTINUATION:
            return (raw >> 1) ^ -(raw & 1), position
        shift += _VARINT_PAYLOAD_BITS


def write_varint(value: int) -> bytes:
    """``value`` as a zig-zag varint."""
    zigzag = (value << 1) ^ (value >> _SIGN_SHIFT)
    out = bytearray()
    while zigzag >= _VARINT_CONTINUATION:
        out.append((zigzag & _VARINT_PAYLOAD_MASK) | _VARINT_CONTINUATION)
        zigzag >>= _VARINT_PAYLOAD_BITS
    out.append(zigzag)
    return bytes(out)


def records_section(batch: bytes | memoryview, header: BatchHeader) -> bytes:
    """The decompressed records of a whole ``batch`` (header included) as bytes."""
    codec = header.attributes & COMPRESSION_CODEC_MASK
    return decompress(codec, memoryview(batch)[RECORD_BATCH_OVERHEAD : header.size_bytes])


def _varint_at(data: bytes, position: int) -> tuple[int, int]:
    """``read_varint`` with the one- and two-byte cases inline: deltas and lengths below
    8 KiB, nearly every varint of a record."""
    byte = data[position]
    if byte < _VARINT_CONTINUATION:
        return (byte >> 1) ^ -(byte & 1), position + 1
    second = data[position + 1]
    if second < _VARINT_CONTINUATION:
        raw = (byte & _VARINT_PAYLOAD_MASK) | (second << _VARINT_PAYLOAD_BITS)
        return (raw >> 1) ^ -(raw & 1), position + 2
    return read_varint(data, position)


def decode_records(batch: bytes | memoryview, header: BatchHeader) -> list[Record]:
    """Every record of a whole ``batch``; raises ``CorruptRecordError`` if they do not parse."""
    data = records_section(batch, header)
    records: list[Record] = []
    position = 0
    size = len(data)
    try:
        for _ in range(header.records_count):
            start = position
            length, position = _varint_at(data, position)
            end = position + length
            if length < 1 or end > size:
                raise CorruptRecordError(f"a record of {length} bytes does not fit its batch")
            attributes = data[position]
            timestamp_delta, position = _varint_at(data, position + 1)
            offset_delta, position = _varint_at(data, position)
            key_length, position = _varint_at(data, position)
            key = None
            if key_length >= 0:
                key = data[position : position + key_length]
                position += key_length
            value_length, position = _varint_at(data, position)
            value = None
            if value_length >= 0:
                value = data[position : position + value_length]
                position += value_length
            if position > end:
                raise CorruptRecordError("a record's fields run past its length")
            # tuple.__new__ skips the NamedTuple's generated (Python-level) __new__.
            records.append(
                tuple.__new__(
                    Record,
                    (
                        attributes,
                        timestamp_delta,
                        offset_delta,
                        key,
                        value,
                        data[position:end],
                        data[start:end],
                    ),
                )
            )
            position = end
    except IndexError as error:
        raise CorruptRecordError("a record runs past the end of its batch") from error
    return records


def record_timestamps(batch: bytes | memoryview, header: BatchHeader) -> list[tuple[int, int]]:
    """(timestamp, offset) of every record of a whole ``batch``: the base timestamp plus
    its delta, or the batch's max timestamp for every record of a LogAppendTime batch,
    as Kafka's records report them."""
    records = decode_records(batch, header)
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return [(header.max_timestamp, header.base_offset + r.offset_delta) for r in records]
    base = header.base_timestamp
    return [(base + r.timestamp_delta, header.base_offset + r.offset_delta) for r in records]


def record_keys(batch: bytes | memoryview, header: BatchHeader) -> list[tuple[int, bytes | None]]:
    """(offset delta, key) of every record of ``batch``: the cleaner's map pass, which
    needs no values (so none is copied)."""
    data = records_section(batch, header)
    keys: list[tuple[int, bytes | None]] = []
    position = 0
    try:
        for _ in range(header.records_count):
            length, position = _varint_at(data, position)
            end = position + length
            _, at = _varint_at(data, position + 1)
            offset_delta, at = _varint_at(data, at)
            key_length, at = _varint_at(data, at)
            keys.append((offset_delta, data[at : at + key_length] if key_length >= 0 else None))
            position = end
    except IndexError as error:
        raise CorruptRecordError("a record runs past the end of its batch") from error
    return keys


def has_null_key(batch: bytes | memoryview, header: BatchHeader) -> bool:
    """Whether any record of ``batch`` has a null key.

    Reads only each record's length and the varints before its key: a leader runs it
    on every batch produced to a compacted topic.
    """
    data = records_section(batch, header)
    position = 0
    try:
        for _ in range(header.records_count):
            length, position = _varint_at(data, position)
            end = position + length
            # Attributes, then the timestamp and offset deltas.
            _, at = _varint_at(data, position + 1)
            _, at = _varint_at(data, at)
            key_length, _ = _varint_at(data, at)
            if key_length == _NULL_LENGTH:
                return True
            position = end
    except IndexError as error:
        raise CorruptRecordError("a record runs past the end of its batch") from error
    if position != len(data):
        raise CorruptRecordError("the records do not fill their batch")
    return False


def encode_record(record: Record, timestamp_delta: int) -> bytes:
    """One record, length-prefixed, with ``timestamp_delta`` in place of its own."""
    body = bytearray(bytes((record.attributes,)))
    body += write_varint(timestamp_delta)
    body += write_varint(record.offset_delta)
    for field in (record.key, record.value):
        body += write_varint(_NULL_LENGTH) if field is None else write_varint(len(field)) + field
    body += record.headers
    return write_varint(len(body)) + bytes(body)
