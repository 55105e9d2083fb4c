"""The cleaner against a dictionary model, through appends, cleanings, crashes and restarts.

Each cleaning may be cut by a crash: it runs in a forked child whose ``os.replace`` and
``os.unlink`` (every rename and unlink a cleaning and its swap make) kill the process
with ``os._exit`` at the n-th call, as a SIGKILL would: no ``finally`` runs, the files
stay as they are. The parent then drops its log without closing it and opens the
directory again. Whatever happened, the log must hold exactly the model's latest value
per key; every record must keep the offset it was appended at; and below the cleaner
checkpoint each key appears at most once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.log import Log, LogConfig
from tickwheel.log._cleaner import clean

from .helpers import FakeClock, crash
from .test_cleaner import latest, read_all

CONFIG = LogConfig(
    cleanup_policy="compact",
    segment_bytes=600,
    min_cleanable_dirty_ratio=0.0,
    min_compaction_lag_ms=200,
    delete_retention_ms=500,
)
KEYS = [b"a", b"b", b"c", b"d", b"e"]
_CRASHED = 17
_FAILED = 18


def _clean_in_child(log: Log, now_ms: int, crash_after: int, map_keys: int) -> int:
    """Clean in a forked child killed at its ``crash_after``-th rename/unlink; its status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        calls = [crash_after]

        def dying(real):  # type: ignore[no-untyped-def]
            def call(*args, **kwargs):  # type: ignore[no-untyped-def]
                if calls[0] == 0:
                    os._exit(_CRASHED)
                calls[0] -= 1
                return real(*args, **kwargs)

            return call

        try:
            os.replace = dying(os.replace)
            os.unlink = dying(os.unlink)
            clean(log, now_ms, map_buffer_bytes=map_keys * 24, map_load_factor=1.0)
        except BaseException:
            os._exit(_FAILED)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class CleanerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.model: dict[bytes, bytes] = {}
        self.appended: dict[int, tuple[bytes, bytes | None]] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="cleaner-model-")) / "t-0"
        self.log = Log.open(self.dir, CONFIG, clock_ms=self.clock)

    @rule(
        records=st.lists(
            st.tuples(st.sampled_from(KEYS), st.none() | st.binary(min_size=1, max_size=30)),
            min_size=1,
            max_size=4,
        ),
        codec=st.sampled_from([0, 0, 1]),
    )
    def append(self, records: list[tuple[bytes, bytes | None]], codec: int) -> None:
        batch = make_keyed_batch(list(records), codec=codec, timestamp_ms=self.clock())
        info = self.log.append_as_leader(batch, 0)
        for i, (key, value) in enumerate(records):
            self.appended[info.first_offset + i] = (key, value)
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(delta_ms=st.integers(0, 1000))
    def advance(self, delta_ms: int) -> None:
        self.clock.advance(delta_ms)

    @rule(map_keys=st.sampled_from([2, 1000]))
    def clean(self, map_keys: int) -> None:
        clean(self.log, self.clock(), map_buffer_bytes=map_keys * 24, map_load_factor=1.0)

    @rule(crash_after=st.integers(0, 30), map_keys=st.sampled_from([2, 1000]))
    def clean_and_crash(self, crash_after: int, map_keys: int) -> None:
        status = _clean_in_child(self.log, self.clock(), crash_after, map_keys)
        assert status in {0, _CRASHED}
        self._reopen(crashed=True)

    @rule()
    def restart(self) -> None:
        self._reopen(crashed=False)

    def _reopen(self, *, crashed: bool) -> None:
        if crashed:
            crash(self.log)
        else:
            self.log.close()
        self.log = Log.open(self.dir, CONFIG, clock_ms=self.clock)
        # The checkpointed high watermark may lag; a leader raises it again.
        self.log.update_high_watermark(self.log.log_end_offset)

    @invariant()
    def log_matches_the_model(self) -> None:
        records = read_all(self.log)
        assert latest(records) == self.model
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets))
        for offset, key, value in records:
            assert self.appended[offset] == (key, value)
        cleaned_keys = [key for offset, key, _ in records if offset < self.log.cleaned_offset]
        assert len(cleaned_keys) == len(set(cleaned_keys))
        assert self.log.log_end_offset == len(self.appended)

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir.parent)


def test_cleaner_against_a_dictionary_model() -> None:
    run_state_machine_as_test(
        CleanerModel, settings=settings(max_examples=40, stateful_step_count=30, deadline=None)
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cleaner_against_a_dictionary_model_long_runs() -> None:
    # Longer runs, fewer of them: 300 of 60 steps took more than the suite's 300 s
    # timeout on a worker sharing 2 cores with three others.
    run_state_machine_as_test(
        CleanerModel, settings=settings(max_examples=120, stateful_step_count=60, deadline=None)
    )
