"""The one walk over the batches of a buffer: each whole batch's position and header.

A read of a log, a produce request's records and a state topic's chunk are all a run
of v2 batches, the last possibly cut short (a read stops at ``max_bytes`` wherever it
falls). ``iter_batches`` steps from batch to batch by the length field (the batch
takes ``batch_length + LOG_OVERHEAD`` bytes) and stops before the first batch that is
not whole, as Kafka's ``ByteBufferLogInputStream`` does; it stops as well at a length
below the header's size, which no batch can have. It checks neither magic nor CRC:
``check_batch`` does, for the callers that take bytes from outside (a produce, a
replica fetch); the others read what their own log validated.

Concurrency: a generator over a buffer the caller does not change while it runs;
thread-safe otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator

from tickwheel.record._batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    parse_header,
)


def iter_batches(
    data: bytes | bytearray | memoryview, position: int = 0
) -> Iterator[tuple[int, BatchHeader]]:
    """``(position, header)`` of each whole batch of ``data`` from ``position``, in order."""
    total = len(data)
    while position + RECORD_BATCH_OVERHEAD <= total:
        header = parse_header(data, position)
        size_bytes = header.batch_length + LOG_OVERHEAD
        if size_bytes < RECORD_BATCH_OVERHEAD or position + size_bytes > total:
            return
        yield position, header
        position += size_bytes


def whole_batches_end(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Where the whole batches of ``data`` end, and the offset after the last (-1: none)."""
    end = 0
    next_offset = -1
    for position, header in iter_batches(data):
        end = position + header.size_bytes
        next_offset = header.last_offset + 1
    return end, next_offset
