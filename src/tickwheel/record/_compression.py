"""The codecs of a batch's records section, as Kafka writes them.

Compression (attributes bits 0-2) covers all records of a batch, never its header.
The codecs: gzip (a gzip stream), snappy (the xerial/snappy-java framing: an 8-byte
magic, version and compatible-version int32s, then int32-length-prefixed raw snappy
blocks; a payload without the magic is one raw snappy block, as librdkafka may write
it), lz4 (the LZ4 frame format) and zstd (a zstd frame). ``cramjam`` does the work.

Concurrency: pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import Final

import cramjam

from tickwheel.record._errors import CorruptRecordError

NO_COMPRESSION: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_VERSION: Final = 1
_XERIAL_COMPATIBLE_VERSION: Final = 1
# snappy-java's default block size.
_XERIAL_BLOCK_BYTES: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")


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
