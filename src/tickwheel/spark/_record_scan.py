"""Where each record of a decompressed records section starts and ends: the source's one
loop over records.

A v2 record is a zig-zag varint length followed by that many bytes, so the start of a
record is known only once the one before it is read: finding the records of a batch is
a sequential walk, the one step of decoding that numpy cannot do as whole-array
operations (``_batch_decode`` decodes every field after it that way). This module is
that walk and nothing else -- each record's start, found from its length -- written for
mypyc: native ``int`` and ``bytes`` only, no numpy, no closures, no per-record object
but the position appended to a caller-owned list. The build compiles it with mypyc
into a twin (``_scan_build`` tells which of the two runs, and how it is chosen):
interpreted, the scan costs about 0.15 µs per record, compiled a few nanoseconds. Both
builds behave the same.

Concurrency: a pure function over immutable bytes and the caller's lists; thread-safe.
"""

from __future__ import annotations

from typing import Final

_CONTINUATION: Final = 0x80
_PAYLOAD_MASK: Final = 0x7F
_PAYLOAD_BITS: Final = 7
# A record length is a varint32: at most five bytes.
_MAX_LENGTH_SHIFT: Final = 28


class RecordScanError(ValueError):
    """A record length longer than a varint32 may be."""


def scan_records(data: bytes, position: int, count: int, starts: list[int]) -> int:
    """Walk ``count`` records from ``position`` in ``data``, appending where each starts
    (its length varint) to ``starts``; returns the position after the last one.

    Only the walk: a length that is not positive still moves the walk on by its
    magnitude, and the caller checks every length, and that the records end where
    their batch does, with whole-array operations afterwards. The walk never goes
    backwards, so it ends; reading past ``data`` raises ``IndexError``.
    """
    for _ in range(count):
        starts.append(position)
        byte = data[position]
        position += 1
        if byte < _CONTINUATION:
            position += byte >> 1
            continue
        raw = byte & _PAYLOAD_MASK
        shift = _PAYLOAD_BITS
        while True:
            byte = data[position]
            position += 1
            raw |= (byte & _PAYLOAD_MASK) << shift
            if byte < _CONTINUATION:
                break
            shift += _PAYLOAD_BITS
            if shift > _MAX_LENGTH_SHIFT:
                raise RecordScanError("a record length longer than five bytes")
        position += raw >> 1
    return position
