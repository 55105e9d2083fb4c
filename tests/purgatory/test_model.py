"""The purgatory against a reference model, over random interleavings (hypothesis).

The model is what the purgatory means, written naively: per key a list of operations
in watch order (completed ones included until that key's next check), per operation a
deadline and whether it is done, timed, or cancelled. Purging is off here (a huge
``purge_interval``), so ``watched`` must match the model exactly; the purge has its own
tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tickwheel.purgatory import DelayedOperationPurgatory
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

from .helpers import FlagOperation

KEYS = ["a", "b", "c", "d"]
NO_PURGE = 10**9


@dataclass
class ModelOp:
    op: FlagOperation
    deadline_ms: int
    timed: bool = False
    done: bool = False
    expired: bool = False


@dataclass
class Model:
    now_ms: int = 0
    ops: list[ModelOp] = field(default_factory=list)
    watch: dict[str, list[ModelOp]] = field(default_factory=dict)


class PurgatoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        timer = SystemTimer("model", clock=self.clock, executor=InlineExecutor())
        self.purgatory: DelayedOperationPurgatory[FlagOperation] = DelayedOperationPurgatory(
            "model", timer, purge_interval=NO_PURGE, reaper_enabled=False
        )
        self.model = Model()

    def teardown(self) -> None:
        self.purgatory.shutdown()

    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
        delay_ms=st.integers(min_value=1, max_value=40),
        ready=st.booleans(),
    )
    def add(self, keys: list[str], delay_ms: int, ready: bool) -> None:
        op = FlagOperation(delay_ms, ready=ready)
        entry = ModelOp(op, self.model.now_ms + delay_ms)
        self.model.ops.append(entry)
        completed = self.purgatory.try_complete_else_watch(op, keys)
        assert completed is ready
        if ready:
            entry.done = True
        else:
            entry.timed = True
            for key in keys:
                self.model.watch.setdefault(key, []).append(entry)

    @precondition(lambda self: self.model.ops)
    @rule(data=st.data())
    def make_ready(self, data: st.DataObject) -> None:
        entry = data.draw(st.sampled_from(self.model.ops))
        entry.op.ready = True

    @precondition(lambda self: self.model.ops)
    @rule(data=st.data())
    def force_complete(self, data: st.DataObject) -> None:
        entry = data.draw(st.sampled_from(self.model.ops))
        assert entry.op.force_complete() is (not entry.done)
        entry.done = True
        entry.timed = False

    @rule(key=st.sampled_from(KEYS))
    def check(self, key: str) -> None:
        expected = 0
        for entry in self.model.watch.get(key, []):
            if not entry.done and entry.op.ready:
                entry.done = True
                entry.timed = False
                expected += 1
        remaining = [e for e in self.model.watch.get(key, []) if not e.done]
        if remaining:
            self.model.watch[key] = remaining
        else:
            self.model.watch.pop(key, None)
        assert self.purgatory.check_and_complete(key) == expected

    @rule(key=st.sampled_from(KEYS))
    def cancel(self, key: str) -> None:
        entries = self.model.watch.pop(key, [])
        expected = [e.op for e in entries if not e.done]
        for entry in entries:
            entry.timed = False
        assert self.purgatory.cancel_for_key(key) == expected

    @rule(ms=st.integers(min_value=0, max_value=30))
    def advance(self, ms: int) -> None:
        self.model.now_ms += ms
        for entry in self.model.ops:
            if entry.timed and not entry.done and entry.deadline_ms <= self.model.now_ms:
                entry.done = entry.expired = True
                entry.timed = False
        self.clock.advance(ms)
        self.purgatory.advance_clock(0)

    @invariant()
    def agrees_with_the_model(self) -> None:
        p = self.purgatory
        model = self.model
        assert p.watched == sum(len(entries) for entries in model.watch.values())
        assert p.num_delayed == sum(1 for e in model.ops if e.timed)
        assert p.expired == sum(1 for e in model.ops if e.expired)
        for entry in model.ops:
            assert entry.op.completions == (1 if entry.done else 0)
            assert entry.op.expirations == (1 if entry.expired else 0)
            assert entry.op.is_completed is entry.done


def test_purgatory_against_model() -> None:
    # The fast tier's smoke run; the long runs below are the thorough search.
    run_state_machine_as_test(
        PurgatoryMachine,
        settings=settings(max_examples=10, stateful_step_count=25, deadline=None),
    )


@pytest.mark.slow
def test_purgatory_against_model_long_runs() -> None:
    run_state_machine_as_test(
        PurgatoryMachine,
        settings=settings(max_examples=150, stateful_step_count=60, deadline=None),
    )
