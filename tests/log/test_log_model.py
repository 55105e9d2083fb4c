"""Property test: random appends, reads, rolls, truncations and restarts against a model.

The model is a list of the batches the log should hold, as stored (offsets and epoch
patched in). A read must return exactly the model's batches from the one holding the
fetch offset, whole, within ``max_bytes`` (at least one with ``min_one_message``), below
``max_offset``, and never past the end of a segment. A follower log, with its own
segment size, replicates the leader the way a replica fetcher does (truncating with
the leader, restarting at the leader's log start) and must always hold a prefix of
the leader's batches.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass

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

from tickwheel.log import Log, LogConfig, UnexpectedAppendOffsetError

from .batches import make_batch, with_offsets
from .helpers import FakeClock, crash

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=120, segment_index_bytes=40)
FOLLOWER_CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=0)


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    data: bytes


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="log-model-")
        self.clock = FakeClock()
        self.log = Log.open(f"{self.dir}/t-0", CONFIG, clock_ms=self.clock)
        self.batches: list[StoredBatch] = []
        self.log_start = 0
        self.log_end = 0
        self.high_watermark = 0
        self.epoch = 0
        self.follower = Log.open(f"{self.dir}/f-0", FOLLOWER_CONFIG, clock_ms=self.clock)
        # Every batch the leader holds or held below its log start, by base offset.
        self.history: dict[int, bytes] = {}

    def teardown(self) -> None:
        self.log.close()
        self.follower.close()
        shutil.rmtree(self.dir)

    @rule(
        payload=st.lists(
            st.lists(st.integers(0, 60), min_size=1, max_size=4), min_size=1, max_size=3
        ),
        epoch_bump=st.booleans(),
    )
    def append(self, payload: list[list[int]], epoch_bump: bool) -> None:
        self.epoch += epoch_bump
        raw = [
            make_batch([bytes([len(self.batches) % 251]) * size for size in sizes], timestamp_ms=i)
            for i, sizes in enumerate(payload)
        ]
        info = self.log.append_as_leader(b"".join(raw), self.epoch)
        assert info.first_offset == self.log_end
        for batch, sizes in zip(raw, payload, strict=True):
            base = self.log_end
            stored = with_offsets(batch, base, self.epoch)
            self.batches.append(StoredBatch(base, base + len(sizes) - 1, stored))
            self.history[base] = stored
            self.log_end = base + len(sizes)
        assert info.last_offset == self.log_end - 1

    @rule(
        data=st.data(),
        max_bytes=st.integers(0, 1200),
        min_one=st.booleans(),
        below_hw=st.booleans(),
    )
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool, below_hw: bool) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end))
        max_offset = self.high_watermark if below_hw else None
        info = self.log.read(offset, max_bytes, max_offset=max_offset, min_one_message=min_one)
        assert info.fetch_offset_metadata.message_offset == offset
        assert info.records.read_bytes() == self._expected_read(
            offset, max_bytes, min_one, max_offset
        )
        assert (info.log_start_offset, info.log_end_offset) == (self.log_start, self.log_end)

    def _expected_read(
        self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None
    ) -> bytes:
        limit = self.log_end if max_offset is None else max_offset
        candidates = [b for b in self.batches if b.last_offset >= offset and b.last_offset < limit]
        if not candidates:
            return b""
        bases = self.log.segment_base_offsets
        segment = max(base for base in bases if base <= candidates[0].base_offset)
        next_segment = min((base for base in bases if base > segment), default=None)
        out = b""
        for batch in candidates:
            if next_segment is not None and batch.base_offset >= next_segment:
                break
            if len(out) + len(batch.data) > max_bytes and (out or not min_one):
                break
            out += batch.data
        return out

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end + 2))
        fully = offset < self.log_start or offset <= self.log.segment_base_offsets[0]
        removed = self.log.truncate_to(offset)
        assert removed == (offset < self.log_end)
        if not removed:
            return
        if fully:
            self.batches = []
            self.log_start = self.log_end = offset
            self.follower.truncate_fully_and_start_at(offset)
        else:
            cut = [b for b in self.batches if b.last_offset >= offset]
            self.batches = [b for b in self.batches if b.last_offset < offset]
            self.log_end = cut[0].base_offset
            if self.log_end < self.log_start:
                self.batches = []
                self.log_end = self.log_start
            # The follower learns the leader's new end (from OffsetsForLeaderEpoch, in
            # Kafka) and cuts its own log there.
            self.follower.truncate_to(self.log_end)
        self.history = {base: data for base, data in self.history.items() if base < self.log_end}
        self.high_watermark = max(min(self.high_watermark, self.log_end), self.log_start)

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end))
        assert self.log.update_high_watermark(offset) == offset
        self.high_watermark = offset

    @precondition(lambda self: self.high_watermark > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.high_watermark))
        assert self.log.delete_records_before(offset) == offset
        self.log_start = offset
        self.batches = [b for b in self.batches if b.last_offset >= offset]

    @rule()
    def flush(self) -> None:
        self.log.flush()

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            crash(self.log)
            # Without a flush the high watermark and log start may go back to their
            # last checkpoints; the data (all in the page cache) must all be there.
            self.high_watermark = self.log_start
        self.log = Log.open(f"{self.dir}/t-0", CONFIG, clock_ms=self.clock)
        if not clean:
            self.log_start = self.log.log_start_offset
            self.batches = [b for b in self.batches if b.last_offset >= self.log_start]
            self.high_watermark = self.log.high_watermark

    @rule(max_bytes=st.integers(1, 1500))
    def replicate(self, max_bytes: int) -> None:
        follower = self.follower
        if follower.log_end_offset < self.log_start:
            follower.truncate_fully_and_start_at(self.log_start)
        if follower.log_end_offset == self.log_end:
            return
        fetched = self.log.read(follower.log_end_offset, max_bytes).records.read_bytes()
        try:
            follower.append_as_follower(fetched)
        except UnexpectedAppendOffsetError as error:
            # The leader's log start lies inside this batch: restart at its base.
            follower.truncate_fully_and_start_at(error.first_offset)
            follower.append_as_follower(fetched)

    @invariant()
    def follower_holds_a_prefix_of_the_leader(self) -> None:
        follower = self.follower
        start, end = follower.log_start_offset, follower.log_end_offset
        assert end <= self.log_end
        held = b"".join(
            follower.read(base, 1_000_000).records.read_bytes()
            for base in follower.segment_base_offsets
        )
        expected = b"".join(
            data for base, data in sorted(self.history.items()) if start <= base < end
        )
        assert held == expected

    @invariant()
    def bounds_agree(self) -> None:
        assert self.log.log_start_offset == self.log_start
        assert self.log.log_end_offset == self.log_end
        assert self.log.high_watermark == self.high_watermark
        end = self.log.log_end_offset_metadata
        assert end.segment_base_offset == self.log.segment_base_offsets[-1]


def test_log_against_model() -> None:
    # The fast tier's smoke run; the long runs below are the thorough search.
    run_state_machine_as_test(
        LogModel, settings=settings(max_examples=8, stateful_step_count=25, deadline=None)
    )


@pytest.mark.slow
def test_log_against_model_long_runs() -> None:
    run_state_machine_as_test(
        LogModel, settings=settings(max_examples=150, stateful_step_count=80, deadline=None)
    )
