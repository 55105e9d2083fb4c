"""The record batches the coordinators write to their internal topics.

``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` all hold
uncompressed v2 record batches of key/value records, built with base offset 0 (the log
assigns offsets by rewriting it); a transactional offset commit is the one batch that
carries a producer's id, epoch and sequence.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel import record
from tickwheel.record import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE


def build_batch(
    entries: Sequence[tuple[bytes, bytes | None]],
    timestamp_ms: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> bytes:
    """Build one uncompressed v2 record batch of ``(key, value)`` records (None: tombstone).

    A transactional batch carries its producer's id, epoch and ``base_sequence``.
    """
    return record.build_batch(
        [record.SimpleRecord(key, value, timestamp_ms) for key, value in entries],
        transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
