"""``DelayedShareFetch``: a ShareFetch waiting for records it can acquire, or ``max_wait_ms``.

Created when a ShareFetch acquired nothing from any of its share-partitions and may
wait; watched in the ``ShareFetch`` purgatory under every share-partition's key
(``SharePartitionKey``). The ``SharePartitionManager`` checks those keys when something
may have made records acquirable:

- an append that moved the high watermark of the topic partition (the
  ``ReplicaManager``'s high-watermark listener);
- a RELEASE, or a member leaving with records it held;
- an acquisition lock expiring.

``try_complete`` asks each share-partition whether an acquire could get a record now
and completes in these cases:

- Case A: some share-partition has an available in-flight record, or the high
  watermark is past its end offset and its in-flight window has room.
- Case B: the topic partition is no longer hosted or led here (the acquire answers
  its error).
- Case C: the member left the group (``abandon``): it is answered at once with nothing,
  so that its client, which waits for this answer before its final ShareAcknowledge,
  closes without sitting out the rest of ``max_wait_ms``.

Like ``DelayedFetch``, it keeps no data from the first attempt: ``on_complete``
acquires again and answers with what it got then -- possibly nothing when another
member was quicker, or when the wait timed out.

Concurrency: runs on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tickwheel.purgatory import DelayedOperation
from tickwheel.share_delivery._persister import SharePartitionKey

CanAcquire = Callable[[SharePartitionKey], bool]
"""Whether an acquire on the share-partition would get records or an error now."""


class DelayedShareFetch(DelayedOperation):
    """Completes when some share-partition has records to acquire, or at the timeout."""

    def __init__(
        self,
        max_wait_ms: int,
        keys: Sequence[SharePartitionKey],
        can_acquire: CanAcquire,
        acquire_and_answer: Callable[[bool], None],
    ) -> None:
        super().__init__(max_wait_ms)
        self.keys = tuple(keys)
        self._can_acquire = can_acquire
        self._acquire_and_answer = acquire_and_answer
        self._abandoned = False

    def abandon(self) -> None:
        """Case C: answer now with nothing acquired (the member left)."""
        self._abandoned = True
        self.force_complete()

    def try_complete(self) -> bool:
        """Complete in case A or B; see the module docstring."""
        if any(self._can_acquire(key) for key in self.keys):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Acquire now and answer with what was acquired (nothing once abandoned)."""
        self._acquire_and_answer(not self._abandoned)

    def on_expiration(self) -> None:
        """Nothing more: ``on_complete`` answered, the purgatory counted the expiration."""
