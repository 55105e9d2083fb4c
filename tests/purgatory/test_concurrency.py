"""Many threads adding, signalling, checking and completing at random (bounded stress).

Keys are signalled once each, in order, so a signal is never repeated and cannot heal
a wake-up lost earlier. A signal marks its key and then checks it; every operation
waits for a signal on any of its keys, and is watched under keys at the signalling
frontier, so its watching races with their signals. Once every thread is done, an
operation with a signalled key that is not completed is a lost wake-up; each
``on_complete`` is counted, so a double completion shows too. A clock thread moves a
manual clock and runs the reaper's step (expiring and purging) meanwhile.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

THREADS = 6
ACTIONS_PER_THREAD = 2000
KEY_COUNT = THREADS * ACTIONS_PER_THREAD
FRONTIER_WIDTH = 4
SWITCH_INTERVAL_S = 1e-5


class Signals:
    """Keys signalled once each, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.frontier = 0
        self.signalled: set[int] = set()

    def next_key(self) -> int:
        with self.lock:
            key = self.frontier
            self.frontier += 1
            self.signalled.add(key)
            return key


class WaitForSignal(DelayedOperation):
    def __init__(self, delay_ms: int, signals: Signals, keys: list[int]) -> None:
        super().__init__(delay_ms)
        self.signals = signals
        self.keys = keys
        self.completions = 0
        self.completions_lock = threading.Lock()

    def signalled(self) -> bool:
        return any(key in self.signals.signalled for key in self.keys)

    def try_complete(self) -> bool:
        signalled = self.signalled()
        # Give other threads the GIL between the read and the decision: the window in
        # which a signal makes this read stale (seed 002's table).
        time.sleep(0)
        return signalled and self.force_complete()

    def on_complete(self) -> None:
        with self.completions_lock:
            self.completions += 1

    def on_expiration(self) -> None:
        pass


@pytest.fixture
def fine_grained_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    yield
    sys.setswitchinterval(previous)


class Stress:
    """The shared state of one run, and what its threads do."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        timer = SystemTimer("stress", clock=self.clock, executor=InlineExecutor())
        self.purgatory: DelayedOperationPurgatory[WaitForSignal] = DelayedOperationPurgatory(
            "stress", timer, purge_interval=20, reaper_enabled=False
        )
        self.signals = Signals()
        self.created: list[WaitForSignal] = []
        self.created_lock = threading.Lock()
        self.workers_done = threading.Event()
        self.barrier = threading.Barrier(THREADS + 1)
        self.failures: list[BaseException] = []

    def worker(self, seed: int) -> None:
        rng = random.Random(seed)
        self.barrier.wait()
        try:
            for _ in range(ACTIONS_PER_THREAD):
                action = rng.random()
                if action < 0.5:
                    self.add(rng, timing_out=action < 0.05)
                elif action < 0.95:
                    self.purgatory.check_and_complete(self.signals.next_key())
                else:
                    with self.created_lock:
                        victim = rng.choice(self.created) if self.created else None
                    if victim is not None:
                        victim.force_complete()
        except BaseException as exc:  # surfaced by the main thread
            self.failures.append(exc)

    def add(self, rng: random.Random, *, timing_out: bool) -> None:
        frontier = self.signals.frontier
        keys = rng.sample(range(frontier, frontier + FRONTIER_WIDTH), rng.randint(1, 3))
        # Most wait for a signal; a few time out first (the clock thread moves time by
        # about a millisecond per step).
        op = WaitForSignal(rng.randint(1, 50) if timing_out else 10**9, self.signals, keys)
        with self.created_lock:
            self.created.append(op)
        self.purgatory.try_complete_else_watch(op, keys)

    def ticker(self) -> None:
        self.barrier.wait()
        while not self.workers_done.is_set():
            self.clock.advance(1)
            self.purgatory.advance_clock(0)

    def run(self) -> None:
        threads = [threading.Thread(target=self.worker, args=(seed,)) for seed in range(THREADS)]
        clock_thread = threading.Thread(target=self.ticker)
        for thread in [*threads, clock_thread]:
            thread.start()
        for thread in threads:
            thread.join()
        self.workers_done.set()
        clock_thread.join()


@pytest.mark.usefixtures("fine_grained_switching")
def test_no_lost_wakeup_and_no_double_completion() -> None:
    stress = Stress()
    stress.run()
    purgatory, created = stress.purgatory, stress.created

    assert stress.failures == []
    assert len(created) > KEY_COUNT // 3
    lost = [op for op in created if op.signalled() and not op.is_completed]
    assert lost == []
    assert all(op.completions == (1 if op.is_completed else 0) for op in created)
    assert purgatory.expired > 0
    # A force_complete racing with the timer's linking of the entry cannot leave it in
    # the timer: the wheel re-checks the binding after linking. So the timer holds
    # exactly the pending operations.
    pending = [op for op in created if not op.is_completed]
    assert purgatory.num_delayed == len(pending)
    # Everything left expires exactly once; the lists then empty on their next check.
    stress.clock.advance(10**9)
    purgatory.advance_clock(0)
    assert all(op.is_completed and op.completions == 1 for op in created)
    assert purgatory.num_delayed == 0
    for key in range(stress.signals.frontier + FRONTIER_WIDTH):
        purgatory.check_and_complete(key)
    assert purgatory.watched == 0
    purgatory.shutdown()
