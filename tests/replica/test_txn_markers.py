"""``ReplicaManager.append_txn_markers``: the markers' appends, their answer, and the
completion listener the group coordinator installs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.bench._batches import make_batch
from tickwheel.log import AppendOrigin, LogConfig
from tickwheel.replica import ReplicaManager, TopicPartition, TxnMarker

from .conftest import T0, T1

OFFSETS = TopicPartition("__consumer_offsets", 3)
TRANSACTIONAL = 0x10


def _txn_batch(producer_id: int) -> bytes:
    return make_batch(
        [b"v"], producer_id=producer_id, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL
    )


def _append(manager: ReplicaManager, tp: TopicPartition, data: bytes, origin: AppendOrigin) -> int:
    answers: list[int] = []
    manager.append_records(
        1000,
        -1,
        {tp: data},
        lambda results: answers.append(results[tp].error_code),
        internal_topics_allowed=True,
        origin=origin,
    )
    (error,) = answers
    return error


@pytest.mark.asyncio
async def test_markers_end_transactions_and_tell_the_listener(manager: ReplicaManager) -> None:
    manager.make_leader(OFFSETS, LogConfig(cleanup_policy="compact"))
    completed: list[tuple[int, Sequence[TopicPartition], bool]] = []
    manager.txn_completion_listener = lambda pid, tps, commit: completed.append(
        (pid, list(tps), commit)
    )
    assert _append(manager, T0, _txn_batch(5), AppendOrigin.CLIENT) == ErrorCode.none
    # A TxnOffsetCommit-like batch: sequence 0, twice, accepted for the coordinator.
    for _ in range(2):
        assert _append(manager, OFFSETS, _txn_batch(5), AppendOrigin.COORDINATOR) == 0
    log = manager.get_partition(T0)
    assert log is not None
    assert log.log.last_stable_offset == 0
    answers: list[dict[int, dict[TopicPartition, int]]] = []
    missing = TopicPartition("nope", 0)
    manager.append_txn_markers(
        [
            TxnMarker(5, 0, 0, True, (T0, OFFSETS, missing)),
            TxnMarker(6, 0, 0, False, (T1,)),
        ],
        1000,
        answers.append,
    )
    assert answers == [
        {
            5: {
                T0: ErrorCode.none,
                OFFSETS: ErrorCode.none,
                missing: ErrorCode.unknown_topic_or_partition,
            },
            6: {T1: ErrorCode.none},
        }
    ]
    # Every partition a marker landed on (the group coordinator picks its own).
    assert completed == [(5, [T0, OFFSETS], True), (6, [T1], False)]
    assert log.log.last_stable_offset == log.log.log_end_offset == 2
    producers = {p.producer_id: p for p in manager.active_producer_state(T0)[1]}
    assert producers[5].current_txn_start_offset == -1


@pytest.mark.asyncio
async def test_a_fenced_marker_fails_only_its_partition(manager: ReplicaManager) -> None:
    answers: list[dict[int, dict[TopicPartition, int]]] = []
    manager.append_txn_markers([TxnMarker(9, 0, 4, True, (T0,))], 1000, answers.append)
    manager.append_txn_markers([TxnMarker(9, 0, 3, True, (T0,))], 1000, answers.append)
    assert answers == [
        {9: {T0: ErrorCode.none}},
        {9: {T0: ErrorCode.transaction_coordinator_fenced}},
    ]
    manager.append_txn_markers([], 1000, answers.append)
    assert answers[-1] == {}
