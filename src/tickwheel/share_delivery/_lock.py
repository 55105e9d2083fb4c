"""``AcquisitionLock``: the timer task that bounds how long a member may hold records.

Kafka gives every batch of records a share consumer acquires one acquisition lock
(``record.lock.duration.ms``): a ``TimerTask`` on the timing wheel. An acknowledgement of
the batch's last still-acquired record cancels it; if it fires first, the records that
are still acquired become available again with their delivery count kept (or archived
at ``group.share.delivery.count.limit``), and waiting ShareFetches wake.

One lock covers a contiguous run of offsets and counts the records it still holds
(``outstanding``), so a batch of any size costs one ``SystemTimer.add`` and one
``cancel`` -- both O(1) on the hierarchical wheel -- however it is acknowledged: record
by record, in ranges, or all at once. Nearly every lock is cancelled without firing;
that add/cancel load is the one the wheel's constant-time insert and delete exist for
(a heap of deadlines pays O(log n) for each, and leaves cancelled entries behind).

The task holds its share-partition through ``on_expire``, a bound method; a record
points at its lock, so a record whose lock was replaced (a RENEW) is not touched by the
old lock's expiry.

Concurrency: created, cancelled and run on the broker's event loop (the share timer's
tasks run there through an ``InlineExecutor``).
"""

from __future__ import annotations

from collections.abc import Callable

from tickwheel.timer import TimerTask


class AcquisitionLock(TimerTask):
    """A timer task over the acquired offsets ``first_offset..last_offset`` of a member."""

    __slots__ = ("first_offset", "last_offset", "member_id", "on_expire", "outstanding")

    def __init__(
        self,
        delay_ms: int,
        first_offset: int,
        last_offset: int,
        member_id: str,
        on_expire: Callable[[AcquisitionLock], None],
    ) -> None:
        super().__init__(delay_ms)
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.member_id = member_id
        self.on_expire = on_expire
        # Records of the run still acquired under this lock.
        self.outstanding = last_offset - first_offset + 1

    def release_one(self) -> None:
        """One record left the lock (acknowledged, renewed, released); the last cancels it."""
        self.outstanding -= 1
        if self.outstanding == 0:
            self.cancel()

    def run(self) -> None:
        """The lock expired: give the still-acquired records back."""
        self.on_expire(self)

    def __repr__(self) -> str:
        return (
            f"<AcquisitionLock {self.first_offset}..{self.last_offset} "
            f"member={self.member_id} outstanding={self.outstanding}>"
        )
