"""Where the coordinator keeps ``__consumer_offsets``: the ``OffsetsLog`` interface.

The coordinator only appends record batches to a partition of the topic and reads a
partition back from its start when it becomes that partition's coordinator. The broker
implements ``OffsetsLog`` over its ReplicaManager, so that in a cluster an append is
answered only once the in-sync replicas have it (acks=all). ``LocalOffsetsLog`` is the
single-node implementation over ``tickwheel.log.Log`` objects.

Concurrency contract: ``append`` may be called from any thread but never while holding a
group lock (the coordinator defers it until the lock is released; see the package
docstring), and calls ``on_appended(error, base_offset)`` exactly once, on the thread that
completes the append (``base_offset``: where the batch landed, ``UNKNOWN_OFFSET`` on an
error; the coordinator orders commits by it). ``LocalOffsetsLog`` serialises appends
and reads of a partition with one lock per instance and calls ``on_appended`` before
``append`` returns, after releasing that lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel.log import Log, LogError
from tickwheel.record import whole_batches_end

OFFSETS_TOPIC = "__consumer_offsets"
UNKNOWN_OFFSET = -1
_LOAD_READ_BYTES = 1024 * 1024
# Appends to __consumer_offsets carry no leader epoch of their own on a single node.
_LOCAL_LEADER_EPOCH = 0


AppendCallback = Callable[[ErrorCode, int], None]
"""Told the append's error and the batch's base offset (``UNKNOWN_OFFSET`` on an error)."""


class OffsetsLog(Protocol):
    """The partitions of ``__consumer_offsets`` as the coordinator uses them."""

    def append(self, partition: int, records: bytes, on_appended: AppendCallback) -> None:
        """Append one v2 record batch; call ``on_appended(error, base_offset)`` once it is
        committed."""

    def read(self, partition: int) -> Iterator[bytes]:
        """Yield the partition's record batches from its start, each chunk whole batches."""


class LocalOffsetsLog:
    """``OffsetsLog`` over local ``tickwheel.log.Log`` objects, one per partition.

    ``log_for(partition)`` returns the partition's open Log; this single replica is the
    whole ISR, so an append moves the high watermark to the log end at once.
    """

    def __init__(self, log_for: Callable[[int], Log]) -> None:
        self._log_for = log_for
        self._lock = threading.Lock()

    def append(self, partition: int, records: bytes, on_appended: AppendCallback) -> None:
        """Append as leader and commit at once; report the Log's error code on failure."""
        error = ErrorCode.none
        base_offset = UNKNOWN_OFFSET
        with self._lock:
            try:
                log = self._log_for(partition)
                base_offset = log.append_as_leader(records, _LOCAL_LEADER_EPOCH).first_offset
                log.update_high_watermark(log.log_end_offset)
            except LogError as failure:
                error = ErrorCode(failure.error_code)
            except KeyError:
                error = ErrorCode.unknown_topic_or_partition
        on_appended(error, base_offset)

    def read(self, partition: int) -> Iterator[bytes]:
        """Yield whole batches from the log start to the high watermark."""
        with self._lock:
            log = self._log_for(partition)
        return read_log_batches(log, self._lock)


def read_log_batches(log: Log, lock: threading.Lock | None = None) -> Iterator[bytes]:
    """Yield ``log``'s whole batches from its start to its high watermark, in chunks.

    ``lock``, when given, is held around each read of the log.
    """
    guard = lock if lock is not None else threading.Lock()
    with guard:
        end_offset = log.high_watermark
        next_offset = log.log_start_offset
    while next_offset < end_offset:
        with guard:
            fetched = log.read(next_offset, _LOAD_READ_BYTES, max_offset=end_offset)
            data = bytes(fetched.records.read_bytes())
        whole_bytes, next_offset = whole_batches_end(data)
        if not whole_bytes:
            return
        yield data[:whole_bytes]
