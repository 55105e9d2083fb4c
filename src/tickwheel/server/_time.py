"""``BrokerTime``: the broker's one clock, and everything of the broker that waits on it.

Every wait of a broker is a task on a timing wheel: the purgatories' DelayedProduce,
DelayedFetch, DelayedDeleteRecords and DelayedShareFetch, the group coordinator's
heartbeats (session timeouts), joins (rebalance timeouts, the initial rebalance delay),
share-group members' sessions, share records' acquisition locks, and the periodic
maintenance on the ``Scheduler`` (retention and flushing, checkpoints, the offsets
retention check, the idle-connection check). All those timers come from one
``LoopTimers`` on one clock, so the clock decides every timeout:

- ``SystemClock`` (the default): each timer arms one ``loop.call_at``, and every
  timeout follows real time.
- ``ManualClock`` (tests, like Kafka's ``MockTime``): time moves only when the test
  calls ``clock.advance(ms)``, which runs every due task of every timer before it
  returns. Epoch time follows the same clock (Kafka's ``MockTime`` moves both too):
  ``wall_clock_ms`` is the real epoch time when the broker was built, plus the time the
  clock advanced since. The logs read it (``retention.ms`` against record timestamps,
  ``segment.ms``, ``flush.ms``, LogAppendTime), and so does the group coordinator
  (commit times, offsets retention).

Two waits stay on real time: a client's own timeouts, and, in a cluster, ZooKeeper's
session and the replica fetchers (a cluster is not run on a manual clock).

Concurrency: built anywhere; ``start`` on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from tickwheel.log import system_clock_ms
from tickwheel.timer import Clock, LoopTimers, ManualClock, Scheduler, SystemClock


class BrokerTime:
    """The broker's clock, its epoch-time view, its timers and its scheduler."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock: Clock = SystemClock() if clock is None else clock
        self.timers = LoopTimers(self.clock)
        self.scheduler = Scheduler(self.timers)
        self.wall_clock_ms: Callable[[], int] = (
            system_clock_ms if clock is None else _epoch_view(clock)
        )

    def start(self) -> None:
        """Start driving the timers (on the broker's loop); the broker's ``stop`` ends the
        scheduler's tasks first, then stops the timers once nothing waits on them."""
        self.timers.start()


def _epoch_view(clock: ManualClock) -> Callable[[], int]:
    epoch_at_start_ms = system_clock_ms()
    clock_at_start_ms = clock.now_ms()

    def wall_clock_ms() -> int:
        return epoch_at_start_ms + clock.now_ms() - clock_at_start_ms

    return wall_clock_ms
