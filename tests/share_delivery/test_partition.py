"""SharePartition against a reference model: acquire, acknowledge, release and expire.

The model keeps one (state, delivery count, holder, lock) per offset in a plain dict and
follows the rules of KIP-932 directly; the share-partition keeps a window and one
timer task per acquired run. Hypothesis drives both with the same operations on a
manual clock and compares every in-flight record, the start offset and the answers.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kio.schema.errors import ErrorCode

from tickwheel.share_delivery import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    ShareAcknowledgeError,
    ShareGroupState,
    SharePartition,
    SharePartitionKey,
)
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

KEY = SharePartitionKey("group", uuid.UUID(int=1), 0)
LIMIT = 3
MAX_IN_FLIGHT = 12
LOCK_MS = 100
MEMBERS = ("a", "b")


def new_partition(
    start_offset: int = 0, *, max_in_flight: int = MAX_IN_FLIGHT
) -> tuple[SharePartition, ManualClock, SystemTimer, list[bool]]:
    clock = ManualClock()
    timer = SystemTimer("locks", clock=clock, executor=InlineExecutor())
    changes: list[bool] = []
    partition = SharePartition(
        KEY,
        start_offset,
        timer=timer,
        delivery_count_limit=LIMIT,
        max_in_flight_records=max_in_flight,
        on_change=lambda p, available: changes.append(available),
    )
    return partition, clock, timer, changes


def advance(clock: ManualClock, timer: SystemTimer, ms: int) -> None:
    clock.advance(ms)
    timer.advance_clock(0)


@dataclass
class ModelRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    holder: str | None = None
    deadline_ms: int = 0


@dataclass
class Model:
    """Per-offset truth: what KIP-932 says each record's state is."""

    start_offset: int = 0
    records: dict[int, ModelRecord] = field(default_factory=dict)
    now_ms: int = 0

    def record(self, offset: int) -> ModelRecord:
        return self.records.setdefault(offset, ModelRecord())

    def in_flight(self) -> int:
        return max(self.records, default=self.start_offset - 1) + 1 - self.start_offset

    def acquire(
        self, member: str, batches: list[tuple[int, int]], max_records: int
    ) -> list[tuple[int, int]]:
        taken: list[int] = []
        end = max(self.records, default=self.start_offset - 1) + 1
        for first, last in batches:
            if len(taken) >= max_records:
                break
            for offset in range(max(first, self.start_offset), last + 1):
                if offset >= end:
                    if end - self.start_offset >= MAX_IN_FLIGHT:
                        break
                    end = offset + 1
                record = self.record(offset)
                if record.state is RecordState.AVAILABLE:
                    record.state = RecordState.ACQUIRED
                    record.delivery_count += 1
                    record.holder = member
                    record.deadline_ms = self.now_ms + LOCK_MS
                    taken.append(offset)
        self.advance_start()
        return [(o, self.records[o].delivery_count) for o in taken]

    def give_back(self, record: ModelRecord) -> None:
        record.holder = None
        record.state = (
            RecordState.ARCHIVED if record.delivery_count >= LIMIT else RecordState.AVAILABLE
        )

    def expire(self, now_ms: int) -> None:
        self.now_ms = now_ms
        for offset in range(self.start_offset, self.start_offset + self.in_flight()):
            record = self.records[offset]
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self.give_back(record)
        self.advance_start()

    def advance_start(self) -> None:
        while self.start_offset in self.records and self.records[self.start_offset].state in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        ):
            del self.records[self.start_offset]
            self.start_offset += 1


def ranges(acquired: list[AcquiredRecords]) -> list[tuple[int, int]]:
    return [
        (offset, a.delivery_count)
        for a in acquired
        for offset in range(a.first_offset, a.last_offset + 1)
    ]


class SharePartitionMachine(RuleBasedStateMachine):
    """Random acquire/acknowledge/release/expire sequences, compared with the model."""

    def __init__(self) -> None:
        super().__init__()
        self.partition, self.clock, self.timer, _ = new_partition()
        self.model = Model()
        self.log: list[tuple[int, int]] = []  # batches (first, last) below the HW
        self.log_end = 0

    @rule(size=st.integers(1, 4))
    def produce(self, size: int) -> None:
        self.log.append((self.log_end, self.log_end + size - 1))
        self.log_end += size

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 8))
    def acquire(self, member: str, max_records: int) -> None:
        fetch_offset = self.partition.next_fetch_offset()
        batches = [] if fetch_offset is None else [b for b in self.log if b[1] >= fetch_offset]
        got = self.partition.acquire(
            member, batches, max_records=max_records, lock_duration_ms=LOCK_MS
        )
        assert ranges(got) == self.model.acquire(member, batches, max_records)

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(
            [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
        ),
        data=st.data(),
    )
    def acknowledge(self, member: str, kind: AcknowledgeType, data: st.DataObject) -> None:
        first = data.draw(st.integers(self.model.start_offset, self.log_end + 1))
        last = data.draw(st.integers(first, first + 3))
        batch = AcknowledgementBatch(first, last, (int(kind),))
        offsets = range(first, last + 1)
        valid = all(
            o in self.model.records
            and self.model.records[o].state is RecordState.ACQUIRED
            and self.model.records[o].holder == member
            for o in offsets
        )
        if not valid:
            with pytest.raises(ShareAcknowledgeError) as caught:
                self.partition.acknowledge(member, [batch], lock_duration_ms=LOCK_MS)
            assert caught.value.error_code == ErrorCode.invalid_record_state
            return
        released = self.partition.acknowledge(member, [batch], lock_duration_ms=LOCK_MS)
        model_released = False
        for offset in offsets:
            record = self.model.records[offset]
            if kind is AcknowledgeType.ACCEPT:
                record.state, record.holder = RecordState.ACKNOWLEDGED, None
            elif kind is AcknowledgeType.REJECT:
                record.state, record.holder = RecordState.ARCHIVED, None
            else:
                self.model.give_back(record)
                model_released |= record.state is RecordState.AVAILABLE
        self.model.advance_start()
        assert released == model_released

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member: str) -> None:
        self.partition.release_member(member)
        for record in self.model.records.values():
            if record.state is RecordState.ACQUIRED and record.holder == member:
                self.model.give_back(record)
        self.model.advance_start()

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        """The log's start moves (retention): what lies below is archived."""
        offset = data.draw(st.integers(self.model.start_offset, self.log_end + 2))
        self.partition.skip_to(offset)
        for missing in range(self.model.start_offset, offset):
            record = self.model.record(missing)
            record.state, record.holder = RecordState.ARCHIVED, None
        self.model.advance_start()
        self.log = [(max(first, offset), last) for first, last in self.log if last >= offset]
        self.log_end = max(self.log_end, offset)

    @rule(ms=st.integers(1, 120))
    def tick(self, ms: int) -> None:
        advance(self.clock, self.timer, ms)
        self.model.expire(self.clock.now_ms())

    @precondition(lambda self: self.partition.in_flight > 0)
    @rule()
    def restart(self) -> None:
        """A reload from the persisted state: acquired records come back available."""
        state = self.partition.state()
        self.partition.release_all()
        self.partition = SharePartition.from_state(
            KEY,
            state,
            timer=self.timer,
            delivery_count_limit=LIMIT,
            max_in_flight_records=MAX_IN_FLIGHT,
        )
        for record in self.model.records.values():
            if record.state is RecordState.ACQUIRED:
                record.state, record.holder = RecordState.AVAILABLE, None

    @invariant()
    def matches_model(self) -> None:
        assert self.partition.start_offset == self.model.start_offset
        for offset in range(self.partition.start_offset, self.partition.end_offset):
            record = self.model.record(offset)
            assert self.partition.record_state(offset) == (record.state, record.delivery_count)
        assert self.partition.in_flight <= MAX_IN_FLIGHT
        available = any(
            self.model.record(o).state is RecordState.AVAILABLE
            for o in range(self.partition.start_offset, self.partition.end_offset)
        )
        assert self.partition.can_acquire(self.partition.end_offset) == available
        assert self.timer.size <= self.partition.in_flight


SharePartitionMachine.TestCase.settings = settings(max_examples=150, deadline=None)
TestSharePartitionModel = SharePartitionMachine.TestCase


def test_expiry_keeps_delivery_count_and_reports_available() -> None:
    partition, clock, timer, changes = new_partition()
    got = partition.acquire("a", [(0, 4)], max_records=10, lock_duration_ms=LOCK_MS)
    assert got == [AcquiredRecords(0, 4, 1)]
    assert timer.size == 1  # one lock for the whole batch
    advance(clock, timer, LOCK_MS)
    assert changes == [True]
    assert partition.record_state(2) == (RecordState.AVAILABLE, 1)
    again = partition.acquire("b", [(0, 4)], max_records=10, lock_duration_ms=LOCK_MS)
    assert again == [AcquiredRecords(0, 4, 2)]


def test_acknowledging_every_record_cancels_the_lock() -> None:
    partition, clock, timer, changes = new_partition()
    partition.acquire("a", [(0, 2), (3, 5)], max_records=10, lock_duration_ms=LOCK_MS)
    assert timer.size == 1
    partition.acknowledge("a", [AcknowledgementBatch(0, 4, (1,))], lock_duration_ms=LOCK_MS)
    assert timer.size == 1  # offset 5 still holds it
    partition.acknowledge("a", [AcknowledgementBatch(5, 5, (3,))], lock_duration_ms=LOCK_MS)
    assert timer.size == 0
    assert partition.start_offset == 6
    advance(clock, timer, LOCK_MS * 2)
    assert changes == []


def test_delivery_count_limit_archives_the_record() -> None:
    partition, clock, timer, _ = new_partition()
    for delivery in range(1, LIMIT + 1):
        got = partition.acquire("a", [(0, 0)], max_records=1, lock_duration_ms=LOCK_MS)
        assert got == [AcquiredRecords(0, 0, delivery)]
        advance(clock, timer, LOCK_MS)
    assert partition.start_offset == 1
    assert partition.acquire("a", [(0, 0)], max_records=1, lock_duration_ms=LOCK_MS) == []


def test_renew_replaces_the_lock() -> None:
    partition, clock, timer, _ = new_partition()
    partition.acquire("a", [(0, 1)], max_records=10, lock_duration_ms=LOCK_MS)
    advance(clock, timer, LOCK_MS - 10)
    partition.acknowledge(
        "a", [AcknowledgementBatch(0, 0, (int(AcknowledgeType.RENEW),))], lock_duration_ms=LOCK_MS
    )
    advance(clock, timer, 10)
    assert partition.record_state(0) == (RecordState.ACQUIRED, 1)
    assert partition.record_state(1) == (RecordState.AVAILABLE, 1)
    advance(clock, timer, LOCK_MS)
    assert partition.record_state(0) == (RecordState.AVAILABLE, 1)


def test_malformed_acknowledgements_are_invalid_requests() -> None:
    partition, _, _, _ = new_partition()
    partition.acquire("a", [(0, 3)], max_records=10, lock_duration_ms=LOCK_MS)
    for batch in (
        AcknowledgementBatch(2, 1, (1,)),
        AcknowledgementBatch(0, 3, (1, 1)),
        AcknowledgementBatch(0, 0, (9,)),
        AcknowledgementBatch(-5, 0, (1,)),
    ):
        with pytest.raises(ShareAcknowledgeError) as caught:
            partition.acknowledge("a", [batch], lock_duration_ms=LOCK_MS)
        assert caught.value.error_code == ErrorCode.invalid_request
    for batches in (
        [AcknowledgementBatch(0, 1, (2,)), AcknowledgementBatch(1, 2, (2,))],
        [AcknowledgementBatch(2, 2, (1,)), AcknowledgementBatch(0, 0, (1,))],
    ):
        with pytest.raises(ShareAcknowledgeError) as caught:
            partition.acknowledge("a", batches, lock_duration_ms=LOCK_MS)
        assert caught.value.error_code == ErrorCode.invalid_request
    assert partition.record_state(1) == (RecordState.ACQUIRED, 1)  # all or nothing
    for batch in (AcknowledgementBatch(4, 6, (1,)), AcknowledgementBatch(0, 10**15, (1,))):
        with pytest.raises(ShareAcknowledgeError) as caught:
            partition.acknowledge("a", [batch], lock_duration_ms=LOCK_MS)
        assert caught.value.error_code == ErrorCode.invalid_record_state
    with pytest.raises(ShareAcknowledgeError) as caught:
        partition.acknowledge("b", [AcknowledgementBatch(0, 0, (1,))], lock_duration_ms=LOCK_MS)
    assert caught.value.error_code == ErrorCode.invalid_record_state


def test_in_flight_limit_and_gaps() -> None:
    partition, _, _, _ = new_partition(10, max_in_flight=100)
    # The log skipped 13..14 (compacted): they are archived, never delivered.
    got = partition.acquire("a", [(8, 12), (15, 16)], max_records=100, lock_duration_ms=LOCK_MS)
    assert got == [AcquiredRecords(10, 12, 1), AcquiredRecords(15, 16, 1)]
    assert partition.record_state(13) == (RecordState.ARCHIVED, 0)
    full, _, _, _ = new_partition(max_in_flight=3)
    assert full.acquire("a", [(0, 9)], max_records=100, lock_duration_ms=LOCK_MS) == [
        AcquiredRecords(0, 2, 1)
    ]
    assert full.next_fetch_offset() is None
    assert not full.can_acquire(high_watermark=10)


def test_state_round_trip() -> None:
    partition, _, _, _ = new_partition(5)
    partition.acquire("a", [(5, 9)], max_records=100, lock_duration_ms=LOCK_MS)
    partition.acknowledge("a", [AcknowledgementBatch(6, 8, (1, 3, 2))], lock_duration_ms=LOCK_MS)
    state = partition.state()
    assert state.start_offset == 5
    restored = SharePartition.from_state(
        KEY,
        state,
        timer=SystemTimer("t", clock=ManualClock(), executor=InlineExecutor()),
        delivery_count_limit=LIMIT,
        max_in_flight_records=MAX_IN_FLIGHT,
    )
    assert [restored.record_state(o) for o in range(5, 10)] == [
        (RecordState.AVAILABLE, 1),
        (RecordState.ACKNOWLEDGED, 1),
        (RecordState.ARCHIVED, 1),
        (RecordState.AVAILABLE, 1),
        (RecordState.AVAILABLE, 1),
    ]
    empty = SharePartition.from_state(
        KEY,
        ShareGroupState(0, 0, 7, ()),
        timer=SystemTimer("t", clock=ManualClock(), executor=InlineExecutor()),
        delivery_count_limit=LIMIT,
        max_in_flight_records=MAX_IN_FLIGHT,
    )
    assert (empty.start_offset, empty.end_offset) == (7, 7)


def test_skipping_deleted_records_archives_them_and_moves_the_start() -> None:
    partition, _, timer, _ = new_partition()
    partition.acquire("a", [(0, 3)], max_records=10, lock_duration_ms=LOCK_MS)
    partition.acknowledge("a", [AcknowledgementBatch(1, 1, (2,))], lock_duration_ms=LOCK_MS)
    partition.skip_to(2)
    assert (partition.start_offset, partition.end_offset) == (2, 4)
    assert partition.next_fetch_offset() == 4
    partition.skip_to(10)
    assert (partition.start_offset, partition.end_offset) == (10, 10)
    assert timer.size == 0
