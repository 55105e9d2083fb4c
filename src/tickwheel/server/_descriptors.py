"""How many more file descriptors this process may open, for admission checks.

A partition's log keeps an open file (its active segment; measured: 500 new
partitions took 506 descriptors). Creating more partitions than the descriptors left
under ``RLIMIT_NOFILE`` would fail halfway and, worse, leave the listener unable to
accept connections. So CreateTopics and CreatePartitions ask this module first and
refuse a request that cannot fit, keeping ``RESERVED_DESCRIPTORS`` free for client
connections, checkpoints and the metadata file.

The count of open descriptors comes from ``/proc/self/fd`` (Linux) or ``/dev/fd``;
where neither exists, or the limit is unlimited, there is no budget to enforce.

At start the broker raises its soft limit to the hard limit (``raise_descriptor_limit``),
as servers do: the soft limit of a login shell (often 1,024) would cap a broker at a
thousand partitions although the system allows it many more. Both are logged.
What a partition needs: its log keeps every segment's ``.log`` file open, as Kafka's
does (one descriptor per segment: a new partition has one, a partition holding
``retention.bytes / segment.bytes`` segments has that many); indexes live in memory
and their files are opened only to be written. So plan on a descriptor per segment
of every partition, plus one per client connection and the ``RESERVED_DESCRIPTORS``.

Concurrency: stateless; callable from any thread (the answer is a snapshot).
"""

from __future__ import annotations

import logging
import os
import resource

_log = logging.getLogger(__name__)

DESCRIPTORS_PER_NEW_PARTITION = 1
"""Open files a newly created partition's log keeps (one active segment)."""
RESERVED_DESCRIPTORS = 64
"""Descriptors kept free for connections, checkpoints and metadata writes."""
_FD_DIRECTORIES = ("/proc/self/fd", "/dev/fd")


def _open_descriptors() -> int | None:
    for directory in _FD_DIRECTORIES:
        try:
            return len(os.listdir(directory))
        except OSError:
            continue
    return None


def partitions_that_fit() -> int | None:
    """How many new partitions fit in the descriptor budget; None if unbounded."""
    soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_limit == resource.RLIM_INFINITY:
        return None
    open_now = _open_descriptors()
    if open_now is None:
        return None
    spare = soft_limit - open_now - RESERVED_DESCRIPTORS
    return max(spare, 0) // DESCRIPTORS_PER_NEW_PARTITION


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; log and return (soft, hard)
    as they are afterwards. A limit that cannot be raised is logged and kept."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError) as error:
            _log.warning("cannot raise RLIMIT_NOFILE from %s to %s: %s", soft, hard, error)
    _log.info(
        "file descriptors: RLIMIT_NOFILE soft limit %s (was %s), hard limit %s; "
        "each partition keeps about %d open",
        _shown(soft),
        _shown(before),
        _shown(hard),
        DESCRIPTORS_PER_NEW_PARTITION,
    )
    return soft, hard


def _shown(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)
