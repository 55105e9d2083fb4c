"""Records inside a v2 batch: decoding and encoding them.

The log stores batches as opaque bytes (``_batch``). The parts that need the records
inside: the log cleaner, which keeps each key's latest record (``record_keys``,
``decode_records``, ``encode_record``); a leader append to a compacted topic, which
refuses records without a key (``null_key_indexes``; INVALID_RECORD, as Kafka does);
the produce handler's schema validation, which names the records whose key or value
starts wrong (``record_prefixes``); ListOffsets by time (``record_timestamps``);
transaction markers (``_control``); and the coordinators, which read their state topics
back record by record.

A record (KIP-98) is a zig-zag varint length, then:

=======================  ===========================================================
attributes               int8, unused (0)
timestamp delta          varlong, from the batch's base timestamp
offset delta             varint, from the batch's base offset
key length, key          varint (-1: null), bytes
value length, value      varint (-1: null, a tombstone), bytes
header count, headers    varint; each: key length and UTF-8 key, value length
                         (-1: null) and value
=======================  ===========================================================

Decoded records keep their headers as raw bytes (the cleaner never looks inside them;
``decode_headers`` takes them apart for a reader that does).

Compression (attributes bits 0-2) covers all records of a batch (``_compression``).

Concurrency: pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from tickwheel.record._batch import (
    COMPRESSION_CODEC_MASK,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
)
from tickwheel.record._compression import decompress
from tickwheel.record._errors import CorruptRecordError

_NULL_LENGTH: Final = -1
_VARINT_CONTINUATION: Final = 0x80
_VARINT_PAYLOAD_MASK: Final = 0x7F
_VARINT_PAYLOAD_BITS: Final = 7
_SIGN_SHIFT: Final = 63
NO_HEADERS: Final = b"\x00"
"""A header count of zero: the headers of a record that has none."""

RecordHeaders = tuple[tuple[str, bytes | None], ...]
"""A record's headers in order: (key, value or None)."""


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


def null_key_indexes(batch: bytes | memoryview, header: BatchHeader) -> list[int]:
    """The positions in ``batch`` (0 for its first record) of the records with a null key.

    Reads only each record's length and the varints before its key: a leader runs it
    on every batch produced to a compacted topic.
    """
    data = records_section(batch, header)
    position = 0
    found: list[int] = []
    try:
        for index in range(header.records_count):
            length, position = _varint_at(data, position)
            end = position + length
            # Attributes, then the timestamp and offset deltas.
            _, at = _varint_at(data, position + 1)
            _, at = _varint_at(data, at)
            key_length, _ = _varint_at(data, at)
            if key_length == _NULL_LENGTH:
                found.append(index)
            position = end
    except IndexError as error:
        raise CorruptRecordError("a record runs past the end of its batch") from error
    if position != len(data):
        raise CorruptRecordError("the records do not fill their batch")
    return found


def record_prefixes(
    batch: bytes | memoryview, header: BatchHeader, size_bytes: int
) -> list[tuple[bytes | None, bytes | None]]:
    """The first ``size_bytes`` bytes (fewer if shorter) of the key and of the value of
    every record of a whole ``batch``, None for a null one.

    Copies only those bytes, and skips the timestamp and offset deltas without decoding
    them. Schema validation runs it on a batch it refuses, to name the refused records.
    """
    data = records_section(batch, header)
    found: list[tuple[bytes | None, bytes | None]] = []
    append = found.append
    position = 0
    try:
        for _ in range(header.records_count):
            length, at = _varint_at(data, position)
            position = at + length
            at += 1  # The attributes.
            while data[at] >= _VARINT_CONTINUATION:  # The timestamp delta.
                at += 1
            at += 1
            while data[at] >= _VARINT_CONTINUATION:  # The offset delta.
                at += 1
            key_length, at = _varint_at(data, at + 1)
            key = None
            if key_length >= 0:
                key = data[at : at + min(key_length, size_bytes)]
                at += key_length
            value_length, at = _varint_at(data, at)
            append(
                (key, None if value_length < 0 else data[at : at + min(value_length, size_bytes)])
            )
    except IndexError as error:
        raise CorruptRecordError("a record runs past the end of its batch") from error
    return found


def encode_record_fields(
    attributes: int,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: bytes = NO_HEADERS,
) -> bytes:
    """One record, length-prefixed; ``headers`` is the encoded header count and headers."""
    body = bytearray(bytes((attributes,)))
    body += write_varint(timestamp_delta)
    body += write_varint(offset_delta)
    for field in (key, value):
        body += write_varint(_NULL_LENGTH) if field is None else write_varint(len(field)) + field
    body += headers
    return write_varint(len(body)) + bytes(body)


def encode_record(record: Record, timestamp_delta: int) -> bytes:
    """One record, length-prefixed, with ``timestamp_delta`` in place of its own."""
    return encode_record_fields(
        record.attributes,
        timestamp_delta,
        record.offset_delta,
        record.key,
        record.value,
        record.headers,
    )


def encode_headers(headers: RecordHeaders) -> bytes:
    """``headers`` as a record stores them: a count, then each key and value."""
    out = bytearray(write_varint(len(headers)))
    for key, value in headers:
        encoded_key = key.encode()
        out += write_varint(len(encoded_key)) + encoded_key
        out += write_varint(_NULL_LENGTH) if value is None else write_varint(len(value)) + value
    return bytes(out)


def decode_headers(raw: bytes) -> RecordHeaders:
    """The headers of a decoded record (``Record.headers``)."""
    count, position = read_varint(raw, 0)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        key_length, position = read_varint(raw, position)
        if key_length < 0:
            raise CorruptRecordError(f"a record header key of length {key_length}")
        key = raw[position : position + key_length]
        position += key_length
        value_length, position = read_varint(raw, position)
        value = None
        if value_length >= 0:
            value = raw[position : position + value_length]
            position += value_length
        if position > len(raw):
            raise CorruptRecordError("a record header runs past the end of its record")
        try:
            headers.append((key.decode(), value))
        except UnicodeDecodeError as error:
            raise CorruptRecordError("a record header key is not UTF-8") from error
    return tuple(headers)
