"""Transactions in the log: producer rules by origin, the LSO, aborted transactions,
``.txnindex`` files, and reopening after a close or a crash."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tickwheel.log import (
    NO_VERIFICATION_GUARD,
    AppendOrigin,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    Log,
    LogConfig,
    TransactionCoordinatorFencedError,
    build_end_txn_marker,
)
from tickwheel.log._txn_index import parse_entries

from .batches import TRANSACTIONAL_FLAG, make_batch
from .helpers import START_MS, crash

Opener = Callable[..., Log]


class Producer:
    """A transactional producer's batches and markers, with its sequence."""

    def __init__(self, producer_id: int, epoch: int = 0) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = 0

    def batch(self, count: int = 1, *, transactional: bool = True) -> bytes:
        batch = make_batch(
            [b"v%d" % i for i in range(count)],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            attributes=TRANSACTIONAL_FLAG if transactional else 0,
        )
        self.sequence += count
        return batch

    def marker(self, commit: bool, coordinator_epoch: int = 0) -> bytes:
        return build_end_txn_marker(
            self.producer_id, self.epoch, coordinator_epoch, commit, START_MS
        )


def _append(log: Log, records: bytes) -> int:
    return log.append_as_leader(records, 0).first_offset


def _mark(log: Log, producer: Producer, commit: bool, coordinator_epoch: int = 0) -> int:
    return log.append_as_leader(
        producer.marker(commit, coordinator_epoch), 0, AppendOrigin.COORDINATOR
    ).first_offset


def _to_end(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def _aborted(log: Log, start: int = 0) -> list[tuple[int, int]] | None:
    return log.read(
        start, 1 << 20, max_offset=log.last_stable_offset, collect_aborted=True
    ).aborted_transactions


def test_a_client_may_not_write_a_marker(open_log: Opener) -> None:
    log = open_log()
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(Producer(1).marker(True), 0)


def test_lso_waits_for_the_marker_to_pass_the_high_watermark(open_log: Opener) -> None:
    log = open_log()
    producer = Producer(1)
    _append(log, make_batch([b"plain"]))
    first = _append(log, producer.batch(2))
    _to_end(log)
    assert log.last_stable_offset == first == 1
    marker = _mark(log, producer, commit=True)
    assert marker == 3
    # The HW is still below the marker: the transaction is not stable yet.
    assert log.last_stable_offset == first
    log.update_high_watermark(marker)
    assert log.last_stable_offset == first
    _to_end(log)
    assert log.last_stable_offset == log.log_end_offset == 4
    assert _aborted(log) == []


def test_read_committed_stops_at_the_lso_and_lists_aborted_txns(open_log: Opener) -> None:
    log = open_log()
    a, b = Producer(1), Producer(2)
    a_first = _append(log, a.batch())
    b_first = _append(log, b.batch())
    _append(log, a.batch())
    _mark(log, a, commit=False)
    _to_end(log)
    # b is still open: read_committed stops at its first offset, before a's marker,
    # and already lists a's aborted transaction, which began below it.
    assert log.last_stable_offset == b_first
    assert _aborted(log) == [(1, a_first)]
    info = log.read(0, 1 << 20, max_offset=log.last_stable_offset, collect_aborted=True)
    assert info.last_stable_offset == b_first
    assert (
        info.records.read_bytes() == log.read(0, 1 << 20, max_offset=b_first).records.read_bytes()
    )
    _mark(log, b, commit=True)
    _to_end(log)
    assert log.last_stable_offset == log.log_end_offset
    assert _aborted(log) == [(1, a_first)]
    # A read past the aborted transaction does not list it.
    assert _aborted(log, start=4) == []
    # read_uncommitted reads get no list at all.
    assert log.read(0, 1 << 20).aborted_transactions is None


def test_transaction_rules_by_origin(open_log: Opener) -> None:
    log = open_log()
    producer = Producer(1, epoch=3)
    _append(log, producer.batch())
    with pytest.raises(InvalidTxnStateError):
        _append(log, producer.batch(transactional=False))
    producer.sequence -= 1
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(
            build_end_txn_marker(1, 2, 0, True, START_MS), 0, AppendOrigin.COORDINATOR
        )
    _mark(log, producer, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        _mark(log, producer, commit=True, coordinator_epoch=4)
    # A resent marker completes nothing but is written.
    _mark(log, producer, commit=True, coordinator_epoch=5)
    # COORDINATOR data batches skip the sequence check (TxnOffsetCommit: always 0).
    coordinator_batch = make_batch(
        [b"offset"], producer_id=9, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL_FLAG
    )
    log.append_as_leader(coordinator_batch, 0, AppendOrigin.COORDINATOR)
    log.append_as_leader(coordinator_batch, 0, AppendOrigin.COORDINATOR)
    [summary] = [p for p in log.active_producers() if p.producer_id == 9]
    assert summary.current_txn_start_offset == 3


def test_a_follower_records_what_the_leader_wrote(open_log: Opener, tmp_path: Path) -> None:
    leader = open_log()
    producer = Producer(1)
    _append(leader, producer.batch())
    _mark(leader, producer, commit=False)
    data = leader.read(0, 1 << 20).records.read_bytes()
    follower = Log.open(tmp_path / "follower-0", LogConfig(), clock_ms=lambda: START_MS)
    try:
        follower.append_as_follower(data)
        _to_end(follower)
        assert follower.last_stable_offset == 2
        assert _aborted(follower) == [(1, 0)]
    finally:
        follower.close()


def _txn_files(log_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(log_dir.glob("*.txnindex"))}


def test_reopen_after_close_and_after_a_torn_tail(open_log: Opener, log_dir: Path) -> None:
    config = LogConfig(segment_bytes=300)
    log = open_log(config)
    a, b = Producer(1), Producer(2)
    for _ in range(3):
        _append(log, a.batch())
        _mark(log, a, commit=False)
    open_first = _append(log, b.batch())
    _to_end(log)
    aborted = _aborted(log)
    assert len(aborted or []) == 3
    files = _txn_files(log_dir)
    assert len(files) >= 2
    lso = log.last_stable_offset
    assert lso == open_first
    log.close()
    log = open_log(config)
    assert log.last_stable_offset == lso
    assert _aborted(log) == aborted
    assert _txn_files(log_dir) == files
    # The open transaction survives the reopen: b's marker still completes it.
    _mark(log, b, commit=True)
    _to_end(log)
    assert log.last_stable_offset == log.log_end_offset
    # A crash after an ABORT whose bytes are torn: the index entry goes with them.
    _append(log, a.batch())
    _mark(log, a, commit=False)
    crash(log)
    active = max(log_dir.glob("*.log"))
    with open(active, "r+b") as file:
        file.truncate(active.stat().st_size - 5)
    log = open_log(config)
    _to_end(log)
    assert _aborted(log) == aborted
    assert _txn_files(log_dir) == files
    for name, data in _txn_files(log_dir).items():
        assert len(data) % 34 == 0, name
        assert parse_entries(data)


def test_truncation_across_a_marker_reopens_the_transaction(open_log: Opener) -> None:
    log = open_log()
    producer = Producer(1)
    first = _append(log, producer.batch())
    marker = _mark(log, producer, commit=False)
    _to_end(log)
    assert _aborted(log) == [(1, first)]
    log.truncate_to(marker)
    assert _aborted(log) == []
    assert log.last_stable_offset == first
    assert [p.current_txn_start_offset for p in log.active_producers()] == [first]


def test_delete_records_past_an_open_transaction_clamps_the_lso(open_log: Opener) -> None:
    log = open_log()
    producer = Producer(1)
    _append(log, producer.batch())
    _append(log, make_batch([b"x"]))
    _to_end(log)
    assert log.last_stable_offset == 0
    log.delete_records_before(1)
    assert log.last_stable_offset == 1


def test_expired_producers_are_forgotten_unless_in_a_transaction(open_log: Opener) -> None:
    log = open_log()
    idle, busy = Producer(1), Producer(2)
    log.append_as_leader(idle.batch(transactional=False), 0)
    _append(log, busy.batch())
    assert log.remove_expired_producers(START_MS + 10, 10) == 1
    assert [p.producer_id for p in log.active_producers()] == [2]


# -- a model of the LSO and the aborted transactions ----------------------------------


@dataclass(frozen=True)
class _Event:
    """One appended batch: transactional data, plain data, or a marker."""

    base_offset: int
    producer_id: int
    kind: str
    commit: bool = False
    last_sequence: int = -1


@dataclass
class _Model:
    events: list[_Event] = field(default_factory=list)

    def transactions(self) -> tuple[dict[int, int], list[tuple[int, int, int, bool]]]:
        """Open transactions (pid -> first offset) and completed ones (pid, first,
        marker, aborted), replaying the events."""
        open_txns: dict[int, int] = {}
        done: list[tuple[int, int, int, bool]] = []
        for event in self.events:
            if event.kind == "txn":
                open_txns.setdefault(event.producer_id, event.base_offset)
            elif event.kind == "marker" and event.producer_id in open_txns:
                first = open_txns.pop(event.producer_id)
                done.append((event.producer_id, first, event.base_offset, not event.commit))
        return open_txns, done

    def lso(self, high_watermark: int) -> int:
        open_txns, done = self.transactions()
        firsts = list(open_txns.values())
        firsts += [first for _, first, marker, _ in done if marker >= high_watermark]
        return min([*firsts, high_watermark])

    def aborted(self, upper: int) -> list[tuple[int, int]]:
        _, done = self.transactions()
        return [(pid, first) for pid, first, _, aborted in done if aborted and first < upper]

    def truncate(self, log_end: int) -> None:
        self.events = [event for event in self.events if event.base_offset < log_end]

    def next_sequence(self, producer_id: int) -> int:
        sequences = [e.last_sequence for e in self.events if e.producer_id == producer_id]
        return max(sequences, default=-1) + 1


_PRODUCERS = 3


class TransactionModel(RuleBasedStateMachine):
    """Random appends, markers, HW moves, truncations, closes and crashes against a
    replay of what was appended: the LSO and the aborted list must agree throughout
    (so snapshots, ``.txnindex`` files and truncation keep the state right)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.config = LogConfig(segment_bytes=400)
        self.log = self._open()
        self.producers = [Producer(i + 100) for i in range(_PRODUCERS)]
        self.model = _Model()

    def _open(self) -> Log:
        return Log.open(Path(self.dir.name) / "t-0", self.config, clock_ms=lambda: START_MS)

    @rule(p=st.integers(0, _PRODUCERS - 1), count=st.integers(1, 3))
    def append_in_txn(self, p: int, count: int) -> None:
        producer = self.producers[p]
        offset = _append(self.log, producer.batch(count))
        self.model.events.append(
            _Event(offset, producer.producer_id, "txn", last_sequence=producer.sequence - 1)
        )

    @rule(p=st.integers(0, _PRODUCERS - 1))
    def append_plain(self, p: int) -> None:
        producer = self.producers[p]
        if producer.producer_id in self.model.transactions()[0]:
            with pytest.raises(InvalidTxnStateError):
                self.log.append_as_leader(producer.batch(transactional=False), 0)
            producer.sequence -= 1
        else:
            offset = _append(self.log, producer.batch(transactional=False))
            self.model.events.append(
                _Event(offset, producer.producer_id, "plain", last_sequence=producer.sequence - 1)
            )

    @rule(p=st.integers(0, _PRODUCERS - 1), commit=st.booleans())
    def end(self, p: int, commit: bool) -> None:
        producer = self.producers[p]
        offset = _mark(self.log, producer, commit)
        self.model.events.append(_Event(offset, producer.producer_id, "marker", commit))

    @rule(data=st.data())
    def move_high_watermark(self, data: st.DataObject) -> None:
        hw = self.log.high_watermark
        self.log.update_high_watermark(data.draw(st.integers(hw, self.log.log_end_offset)))

    @precondition(lambda self: self.log.log_end_offset > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        self.log.truncate_to(data.draw(st.integers(0, self.log.log_end_offset)))
        self.model.truncate(self.log.log_end_offset)
        for producer in self.producers:
            producer.sequence = self.model.next_sequence(producer.producer_id)

    @precondition(lambda self: self.log.log_end_offset > 0)
    @rule(crashed=st.booleans())
    def reopen(self, crashed: bool) -> None:
        if crashed:
            crash(self.log)
        else:
            self.log.close()
        self.log = self._open()

    @invariant()
    def lso_and_aborted_agree(self) -> None:
        lso = self.model.lso(self.log.high_watermark)
        assert self.log.last_stable_offset == lso
        assert _aborted(self.log) == self.model.aborted(lso)

    def teardown(self) -> None:
        self.log.close()
        self.dir.cleanup()


TestTransactionModel = TransactionModel.TestCase
TestTransactionModel.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)


def test_a_verified_append_needs_the_guard_the_next_marker_drops(open_log: Opener) -> None:
    """KIP-890 part 1: a produce verified, then overtaken by its transaction's abort,
    cannot open a transaction; a new verification can."""
    log = open_log()
    producer = Producer(1)
    guard = log.start_transaction_verification(1, 0)
    assert guard is not NO_VERIFICATION_GUARD
    assert log.start_transaction_verification(1, 0) is guard  # one per producer
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(producer.batch(), 0, verification_guard=NO_VERIFICATION_GUARD)
    producer.sequence = 0
    _mark(log, producer, commit=False)  # the abort, before the verified produce lands
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(producer.batch(), 0, verification_guard=guard)
    producer.sequence = 0
    fresh = log.start_transaction_verification(1, 0)
    assert fresh is not guard
    assert log.append_as_leader(producer.batch(), 0, verification_guard=fresh).first_offset == 1
    # The transaction is open: no verification, and the next appends need no guard.
    assert log.start_transaction_verification(1, 0) is NO_VERIFICATION_GUARD
    log.append_as_leader(producer.batch(), 0, verification_guard=NO_VERIFICATION_GUARD)
    # A producer at a newer epoch (transactions v2) is verified again; an older epoch
    # is not worth asking about: the append refuses it.
    assert log.start_transaction_verification(1, 1) is not NO_VERIFICATION_GUARD
    _mark(log, Producer(1, epoch=2), commit=True)
    assert log.start_transaction_verification(1, 1) is NO_VERIFICATION_GUARD
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(
            Producer(1, epoch=1).batch(), 0, verification_guard=NO_VERIFICATION_GUARD
        )


def test_a_marker_at_a_bumped_epoch_moves_the_producer_to_it(open_log: Opener) -> None:
    """Transactions v2: EndTxn bumps the epoch and the marker carries it; the producer's
    next transaction starts at sequence 0 of that epoch, the old epoch is fenced."""
    log = open_log()
    producer = Producer(1, epoch=4)
    _append(log, producer.batch(2))
    producer.epoch = 5
    _mark(log, producer, commit=True)
    _to_end(log)
    assert log.last_stable_offset == log.log_end_offset
    old = Producer(1, epoch=4)
    old.sequence = 2
    with pytest.raises(InvalidProducerEpochError):
        _append(log, old.batch())
    producer.sequence = 0
    assert _append(log, producer.batch()) == 3


def test_an_unused_verification_guard_expires_with_idle_producers(open_log: Opener) -> None:
    log = open_log()
    guard = log.start_transaction_verification(1, 0)
    log.remove_expired_producers(START_MS + 9, 10)
    assert log.start_transaction_verification(1, 0) is guard
    log.remove_expired_producers(START_MS + 10, 10)
    assert log.start_transaction_verification(1, 0) is not guard
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(Producer(1).batch(), 0, verification_guard=guard)
