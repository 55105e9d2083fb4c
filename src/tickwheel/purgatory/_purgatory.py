"""``DelayedOperationPurgatory``: where delayed operations wait for an event or a timeout.

An operation enters with ``try_complete_else_watch(op, keys)`` and leaves in one of
three ways: an event on one of its keys completes it (``check_and_complete(key)``), its
timer task expires it, or its owner cancels the key (``cancel_for_key``). Two
structures hold it meanwhile:

- **Watchers by key**, in ``SHARD_COUNT`` (512) shards, each with its own lock and a
  dict key -> ``Watchers`` (see ``_watchers``): sharding keeps threads that touch
  different keys off each other's lock, as in Kafka.
- **The timer**, a ``SystemTimer`` holding each operation as a ``TimerTask`` until its
  ``delay_ms`` passes.

``try_complete_else_watch`` follows Kafka's ``safeTryCompleteOrElse``: holding the
operation's lock, try once (no other thread can see the operation yet); watch it under
each key, stopping early if it got completed meanwhile; try once more -- an event that
fired while we were watching is seen now, and every later event finds the operation on
its key's list; then add it to the timer, still under the lock. A check that found the
operation watched while we held the lock sets its pending flag (see ``_operation``), and
we try once more after unlocking. If a direct ``force_complete`` slipped in before the
timer bound the operation, its ``cancel()`` found nothing, so we take it off the timer.

**Purge.** Completing an operation removes it from the list of the key whose check
completed it, and from the timer, but not from its other keys' lists. Millions of
operations that complete before their timeout would pile up there -- the bug that made
Kafka replace its first purgatory. So the purgatory keeps ``estimated_total`` (one per
watched operation) and, once ``estimated_total - num_delayed > purge_interval`` (more
than ``purge_interval`` operations are completed but may still be listed), resets the
estimate to ``num_delayed`` and filters completed operations out of every list, dropping
keys left empty. Memory thus stays bounded by the live operations plus about
``purge_interval`` completed ones per key they were watched under.

Who purges depends on the mode:

- *Threaded* (``reaper_enabled=True``, Kafka's way): the ``ExpirationReaper-<broker_id>-
  <name>`` thread loops on ``advance_clock(REAPER_POLL_MS)``, which advances the timer
  and then purges all shards at once if due (on a timer whose clock cannot wait, it
  rests between steps instead of spinning; see ``_reaper``). Requests never pay for a
  purge.
- *Event loop* (``reaper_enabled=False``; the timer is driven by the timer layer's
  ``AsyncioTimerDriver`` with an ``InlineExecutor``, so expirations and completions run
  on the loop thread and no thread exists at all): there is no reaper, so the purge
  rides on the calls the purgatory gets anyway -- every ``try_complete_else_watch`` and
  ``check_and_complete`` does one *purge step*. A step starts a pass when one is due
  and purges the next ``PURGE_SHARDS_PER_STEP`` shards of the pass in progress, so a
  pass is spread over ``SHARD_COUNT / PURGE_SHARDS_PER_STEP`` (32) calls and never
  stalls the loop for a whole sweep; its cost is the reaper's, paid in slices. Only
  calls add operations, so stale entries cannot grow between calls: an idle purgatory
  keeps those of the operations completed or expired since its last calls until the
  next ones. (Expiries do not step: the timer takes a whole batch of due operations out
  of its buckets before running the first, so a pass started inside the batch would
  reset the estimate while the rest of it is neither timed nor completed. A periodic
  timer task would also do, but it would wake an idle loop every 200 ms and count in
  ``num_delayed``, which is the timer's size.) ``advance_clock`` stays available to
  callers that drive the timer themselves; it finishes a pass in progress at once.

Metrics, as Kafka's gauges: ``watched`` (PurgatorySize: list entries, an operation once
per key, stale ones included), ``num_delayed`` (NumDelayedOperations: the timer's size)
and ``expired`` (a running count of expirations, behind Kafka's ExpiresPerSec).

The purgatory owns its timer, whether made here or given: ``shutdown`` stops the reaper
and closes the timer.

Concurrency: every public method may be called from any thread, concurrently (in event
loop mode they are all called on the loop thread, and the locks are never contended).
Each shard's lock guards its dict and its lists; ``_stats_lock`` guards ``_expired``;
``_purge_lock`` lets one thread purge at a time (the reaper blocks on it, a purge step
skips when it is taken) and guards ``_purge_cursor`` and ``_estimate_base``; the count
of watched operations takes no lock (see ``__init__``). Lock order: ``_purge_lock``
before a shard's lock or ``_stats_lock``; those two are never held while taking another
lock, and none of the three is held while calling operation code or adding to or
advancing the timer (reading its ``size`` takes no lock). An operation's own lock is
held around ``try_complete``, and by ``try_complete_else_watch`` around its watch and
its timer ``add`` too (so that a check cannot complete it while the timer links its
entry); the shards' and the timer's locks nest inside it. Operation code
(``try_complete``, ``on_complete``, ``on_expiration``) runs on the calling thread, the
timer's executor, or the loop thread, and may call back into the purgatory.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Hashable
from types import TracebackType
from typing import Final, Generic, TypeVar

from tickwheel.purgatory._operation import DelayedOperation
from tickwheel.purgatory._reaper import ExpirationReaper
from tickwheel.purgatory._watchers import Watchers, WatcherShard
from tickwheel.timer._locks import lock_acquire, lock_release
from tickwheel.timer._system_timer import SystemTimer

T = TypeVar("T", bound=DelayedOperation)

SHARD_COUNT: Final = 512
"""Watcher shards, each with its own lock (Kafka's ``Shards``)."""

DEFAULT_PURGE_INTERVAL: Final = 1000
"""Completed-but-listed operations tolerated before a purge (Kafka's default, and
``{producer,fetch}.purgatory.purge.interval.requests``)."""

PURGE_SHARDS_PER_STEP: Final = 16
"""Shards one piggy-backed purge step sweeps in event-loop mode (a pass is 32 steps)."""

_NO_PASS: Final = SHARD_COUNT
"""``_purge_cursor`` when no piggy-backed purge pass is in progress."""


class DelayedOperationPurgatory(Generic[T]):
    """Watches delayed operations by key and expires them through a timer."""

    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        *,
        broker_id: int = 0,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper_enabled: bool = True,
        timer_enabled: bool = True,
    ) -> None:
        if purge_interval < 0:
            raise ValueError(f"purge_interval must be >= 0, got {purge_interval}")
        self.name = name
        self.broker_id = broker_id
        self.purge_interval = purge_interval
        self._timer = SystemTimer(name) if timer is None else timer
        self._timer_enabled = timer_enabled
        self._reaper_enabled = reaper_enabled
        self._shards: tuple[WatcherShard[T], ...] = tuple(
            WatcherShard() for _ in range(SHARD_COUNT)
        )
        # The estimate is _watched_total - _estimate_base: _watched_total counts the
        # watched operations through an itertools.count (one call into C, atomic under
        # the GIL, so no lock on the hot path; a thread that stores its number after a
        # later one leaves the total a little low until the next watch), and a purge
        # moves the base rather than resetting a shared counter.
        self._count_watched: Callable[[], int] = itertools.count(1).__next__
        self._watched_total = 0
        self._estimate_base = 0
        self._stats_lock = threading.Lock()
        self._expired = 0
        self._purge_lock = threading.Lock()
        self._purge_cursor = _NO_PASS
        self._closed = False
        # Bound once, so that timing an operation does not allocate a bound method.
        self._expiration_hook = self._record_expiration
        self._reaper: ExpirationReaper | None = None
        if reaper_enabled:
            # Started here, as in Kafka: the API has no start(), and a purgatory is
            # usable as soon as it exists.
            self._reaper = ExpirationReaper(
                f"ExpirationReaper-{broker_id}-{name}",
                self.advance_clock,
                now_ms=self._timer.clock.now_ms,
                wake=self._timer.wakeup,
            )
            self._reaper.start()

    # -- operations -------------------------------------------------------------------

    def try_complete_else_watch(self, operation: T, keys: Collection[Hashable]) -> bool:
        """Complete ``operation`` now if it can be, else watch it under ``keys`` and time it.

        Returns True only if this call completed it. ``keys`` must not be empty; a
        purgatory that was shut down takes nothing (RuntimeError). Waits for the
        operation's lock, so call it holding no lock that ``try_complete`` may need --
        except that lock itself, which re-enters (Kafka gives the same advice).
        """
        if not keys:
            raise ValueError(f"{self.name}: an operation needs at least one watch key")
        if self._closed:
            raise RuntimeError(f"purgatory {self.name!r} is shut down")
        # Every call takes a purge step in event-loop mode, whichever way it ends: an
        # operation completed while being watched leaves stale entries like any other,
        # and the steps must keep pace with them.
        try:
            completed = False
            timed = False
            # The operation's lock is held throughout (Kafka's safeTryCompleteOrElse), one
            # acquire for the whole call: a check that finds the operation watched meanwhile
            # cannot try it, and leaves the pending flag for us instead.
            lock = operation._lock
            lock.acquire()
            try:
                # First try: no other thread can see the operation yet, so a completable
                # one is neither watched nor timed.
                if operation.try_complete():
                    completed = True
                elif self._watch(operation, keys):
                    # Watched under every key now: a later event will find it, and this
                    # try sees any event that fired while we were watching.
                    operation._try_complete_pending = False
                    if operation.try_complete():
                        completed = True
                    elif self._timer_enabled and not operation._completed:
                        # Timed under the lock: a check cannot complete it while the timer
                        # links its entry, so the cancel() of that completion always finds
                        # the entry in its bucket.
                        operation._expiration_hook = self._expiration_hook
                        self._timer.add(operation)
                        timed = True
            finally:
                lock.release()
            # A check that missed the lock while we held it relies on us to try again.
            if operation._try_complete_pending and not operation._completed:
                completed = operation.maybe_try_complete()
            if timed and operation._completed:
                # Completed by a direct force_complete (which ignores the lock) before
                # add() bound the entry: its cancel() found nothing, so un-time it here.
                # (The timer's wheel also re-checks the binding after linking, so the
                # entry never stays counted; Kafka's timer leaves it until it falls due.)
                operation.cancel()
            return completed
        finally:
            if not self._reaper_enabled:
                self._purge_step()

    def _watch(self, operation: T, keys: Collection[Hashable]) -> bool:
        # Append the operation to the list of each key; False if it got completed first
        # (by an event on a key it is already watched under: the lists it sits in are
        # cleaned by their next check or the purge). One call per request: appended
        # here rather than in a WatcherShard method, as a call per key costs ~3% of it.
        shards = self._shards
        watched = False
        # Over a tuple (tuple() of a tuple is the tuple itself): the compiled build walks it
        # by index, where an iterator object per request would feed the cyclic GC.
        for key in tuple(keys):
            if operation._completed:
                break
            shard = shards[hash(key) % SHARD_COUNT]
            lock_acquire(shard.lock)
            try:
                watchers = shard.watchers_by_key.get(key)
                if watchers is None:
                    watchers = shard.watchers_by_key[key] = Watchers(key)
                watchers.operations.append(operation)
            finally:
                lock_release(shard.lock)
            watched = True
        if watched:
            self._watched_total = self._count_watched()
        return not operation._completed

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watched under ``key``; returns how many it did."""
        shard = self._shards[hash(key) % SHARD_COUNT]
        snapshot = shard.snapshot(key)
        completed = 0
        if snapshot is not None:
            watchers, operations = snapshot
            found_completed = False
            for operation in operations:
                if not operation._completed and operation.maybe_try_complete():
                    completed += 1
                if operation._completed:
                    found_completed = True
            if found_completed:
                shard.remove_completed(watchers)
        if not self._reaper_enabled:
            self._purge_step()
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key`` and un-time its operations; returns those not completed.

        The operations are not completed, and stay watched under their other keys: the
        caller owns them now (to answer them, or to drop them).
        """
        pending: list[T] = []
        for operation in self._shards[hash(key) % SHARD_COUNT].take_all(key):
            operation.cancel()
            if not operation._completed:
                pending.append(operation)
        return pending

    # -- metrics ----------------------------------------------------------------------

    @property
    def watched(self) -> int:
        """Entries in all watcher lists (Kafka's PurgatorySize); stale ones included."""
        return sum(shard.count_watched() for shard in self._shards)

    @property
    def num_delayed(self) -> int:
        """Operations pending in the timer (Kafka's NumDelayedOperations)."""
        return self._timer.size

    @property
    def expired(self) -> int:
        """How many operations have expired since the purgatory was created."""
        return self._expired

    @property
    def timer(self) -> SystemTimer:
        """The timer expiring this purgatory's operations."""
        return self._timer

    # -- clock and purge --------------------------------------------------------------

    def advance_clock(self, timeout_ms: int) -> bool:
        """Advance the timer (waiting up to ``timeout_ms``), then purge if due.

        One step of the reaper; callers that drive the timer themselves (tests with a
        manual clock) call it directly. Returns whether anything expired.
        """
        expired = self._timer.advance_clock(timeout_ms)
        if self._purge_cursor != _NO_PASS or self._purge_due():
            with self._purge_lock:
                # Finish a pass the purge steps left half done, then sweep all shards
                # if a purge is (still) due.
                self._sweep(SHARD_COUNT)
                self._sweep(SHARD_COUNT)
        return expired

    def _purge_due(self) -> bool:
        estimated_total = self._watched_total - self._estimate_base
        return estimated_total - self._timer.size > self.purge_interval

    def _purge_step(self) -> None:
        if self._purge_cursor == _NO_PASS and not self._purge_due():
            return
        if lock_acquire(self._purge_lock, False):  # else another thread is purging
            try:
                self._sweep(PURGE_SHARDS_PER_STEP)
            finally:
                lock_release(self._purge_lock)

    def _sweep(self, max_shards: int) -> None:
        # Purge up to max_shards shards of the pass in progress, first starting a pass
        # if one is due. Called with _purge_lock held.
        start = self._purge_cursor
        if start == _NO_PASS:
            if not self._purge_due():
                return
            # Every completed operation is about to leave the lists, so the estimate
            # restarts from the live ones. Operations completed during the pass may be
            # missed and stay counted: a slight overestimate, never a leak.
            self._estimate_base = self._watched_total - self._timer.size
            start = 0
        end = min(start + max_shards, SHARD_COUNT)
        for shard in self._shards[start:end]:
            shard.purge_completed()
        self._purge_cursor = end if end < SHARD_COUNT else _NO_PASS

    def _record_expiration(self) -> None:
        # No purge step here: the timer takes a whole batch of due operations out of
        # its buckets before running the first, so a pass started now would reset the
        # estimate while the rest of the batch is neither timed nor completed yet.
        lock_acquire(self._stats_lock)
        try:
            self._expired += 1
        finally:
            lock_release(self._stats_lock)

    # -- lifecycle --------------------------------------------------------------------

    @property
    def reaper_name(self) -> str | None:
        """The reaper thread's name, ``ExpirationReaper-<broker_id>-<name>``; None without."""
        return None if self._reaper is None else self._reaper.name

    def shutdown(self) -> None:
        """Stop the reaper (waiting for it) and close the timer; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._reaper is not None:
            self._reaper.stop()
        self._timer.close()

    def __enter__(self) -> DelayedOperationPurgatory[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"<DelayedOperationPurgatory {self.name!r} num_delayed={self.num_delayed}"
            f" expired={self._expired}>"
        )
