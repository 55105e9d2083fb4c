"""``BucketQueue``: the heap of *buckets* that tells the timer when to move its clock.

Kafka keeps every non-empty bucket in a ``java.util.concurrent.DelayQueue`` ordered by
the bucket's expiration. This is the same idea with ``heapq``: the heap holds at most
one item per bucket (a bucket is offered only when its expiration changes, i.e. once per
rotation), so it holds a few hundred items for millions of tasks, and ``offer`` costs
O(log buckets) once per bucket rotation rather than once per task.

The queue also remembers whether an ``offer`` made the head earlier: that is the one
event on which a waiting driver (a reaper thread in ``advance_clock``, or the asyncio
driver's armed ``call_at``) must be woken or re-armed.

A queued bucket's expiration never changes while it is queued: a slot is reused for a
later span only after its bucket was polled and flushed. Items are therefore plain
``(expiration_ms, sequence, bucket)`` tuples compared in C; the sequence breaks ties
between buckets of different wheels that expire at the same instant.

Concurrency: not thread-safe; the owning timer calls it with its lock held.
"""

from __future__ import annotations

import heapq

from tickwheel.timer._task_list import TimerTaskList


class BucketQueue:
    """A min-heap of buckets keyed by their expiration."""

    __slots__ = ("_heap", "_sequence", "head_lowered")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._sequence = 0
        # Set by ``offer`` when the offered bucket became the earliest; cleared by the owner.
        self.head_lowered = False

    def offer(self, bucket: TimerTaskList) -> None:
        """Queue ``bucket`` at its current expiration."""
        heap = self._heap
        expiration_ms = bucket.expiration_ms
        if not heap or expiration_ms < heap[0][0]:
            self.head_lowered = True
        self._sequence += 1
        heapq.heappush(heap, (expiration_ms, self._sequence, bucket))

    def peek_expiration_ms(self) -> int | None:
        """Expiration of the earliest queued bucket, or None when empty."""
        heap = self._heap
        return heap[0][0] if heap else None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the earliest bucket if it expired by ``now_ms``, else None."""
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def __len__(self) -> int:
        return len(self._heap)

    def __repr__(self) -> str:
        return f"<BucketQueue buckets={len(self._heap)} head_ms={self.peek_expiration_ms()}>"
