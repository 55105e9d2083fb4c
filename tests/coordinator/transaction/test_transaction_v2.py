"""Transaction version 2 (KIP-890 part 2) and partition verification (part 1) in the
coordinator, against a real ReplicaManager on a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator.transaction import (
    EndTxnResult,
    PartitionVerifier,
    TxnPartitions,
)
from tickwheel.replica import TopicPartition

from .conftest import (
    FIRST_PRODUCER_ID,
    NO_LEADER,
    STATE,
    T0,
    T1,
    TIMEOUT_MS,
    Txn,
    append_state,
    completed_commit,
)

pytestmark = pytest.mark.asyncio
E = ErrorCode


async def test_each_end_txn_v5_bumps_the_epoch_and_answers_it(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add_v2(pid, epoch, T0, T1) == E.none
    committed = txn.end_v(pid, epoch, client_transaction_version=2)
    assert (committed.error, committed.producer_id, committed.producer_epoch) == (
        E.none,
        pid,
        epoch + 1,
    )
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteCommit", epoch + 1)
    # The markers carry the bumped epoch: the producer's state on T0 moved to it.
    _, (producer,) = txn.replica_manager.active_producer_state(T0)
    assert producer.producer_epoch == epoch + 1
    # The next transaction runs at the new epoch; the old one is fenced.
    assert txn.add_v2(pid, epoch, T0) == E.producer_fenced
    assert txn.add_v2(pid, epoch + 1, T0) == E.none
    aborted = txn.end_v(pid, epoch + 1, commit=False, client_transaction_version=2)
    assert (aborted.error, aborted.producer_epoch) == (E.none, epoch + 2)


async def test_a_retried_end_txn_v5_gets_the_bumped_epoch_again(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add_v2(pid, epoch, T0) == E.none
    assert txn.end_v(pid, epoch, client_transaction_version=2).error == E.none
    retried = txn.end_v(pid, epoch, client_transaction_version=2)
    assert (retried.error, retried.producer_epoch) == (E.none, epoch + 1)
    # A retry of the other outcome, or a commit at the new epoch with nothing open.
    wrong = txn.end_v(pid, epoch, commit=False, client_transaction_version=2)
    assert wrong.error == E.invalid_txn_state
    assert txn.end_v(pid, epoch + 1, client_transaction_version=2).error == E.invalid_txn_state
    assert txn.end_v(pid, epoch - 1, client_transaction_version=2).error == E.producer_fenced


async def test_a_retry_while_the_markers_are_pending_is_told_to_retry(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add_v2(pid, epoch, T0) == E.none
    txn.leaders[T0] = NO_LEADER
    assert txn.end_v(pid, epoch, client_transaction_version=2).error == E.none
    assert txn.describe().state == "PrepareCommit"
    retried = txn.end_v(pid, epoch, client_transaction_version=2)
    assert retried.error == E.concurrent_transactions
    # The prepared epoch itself is no client's yet.
    ahead = txn.end_v(pid, epoch + 1, client_transaction_version=2)
    assert ahead.error == E.producer_fenced
    # The leader adding a partition for the next transaction waits too.
    assert txn.add_v2(pid, epoch + 1, T1) == E.concurrent_transactions


async def test_version_2_aborts_a_transaction_without_partitions(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    aborted = txn.end_v(pid, epoch, commit=False, client_transaction_version=2)
    assert (aborted.error, aborted.producer_epoch) == (E.none, epoch + 1)
    assert txn.describe().state == "CompleteAbort"
    # Version 1 refuses the same.
    assert txn.end(pid, epoch + 1, commit=False) == E.none  # a retry of the finished abort
    assert txn.end(pid, epoch + 1) == E.invalid_txn_state


async def test_version_1_clients_keep_their_epoch(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add(pid, epoch, T0) == E.none
    ended = txn.end_v(pid, epoch)
    assert (ended.error, ended.producer_epoch) == (E.none, epoch)
    assert txn.describe().producer_epoch == epoch


async def test_the_client_version_is_kept_in_the_log_and_reloaded(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add_v2(pid, epoch, T0) == E.none
    txn.reload()
    found = txn.coordinator.state.get_transaction_state("tx")
    assert not isinstance(found, ErrorCode)
    assert found[1] is not None
    assert found[1].client_transaction_version == 2
    committed = txn.end_v(pid, epoch, client_transaction_version=2)
    assert (committed.error, committed.producer_epoch) == (E.none, epoch + 1)


async def test_verification_answers_each_partition(txn: Txn) -> None:
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    verify = txn.coordinator.verify_partitions
    assert verify("tx", pid, epoch, {T0}) == {T0: E.transaction_abortable}
    assert txn.add(pid, epoch, T0) == E.none
    assert verify("tx", pid, epoch, {T0, T1}) == {T0: E.none, T1: E.transaction_abortable}
    assert verify("tx", pid, epoch + 1, {T0}) == {T0: E.producer_fenced}
    assert verify("tx", pid + 1, epoch, {T0}) == {T0: E.invalid_producer_id_mapping}
    assert verify("other", pid, epoch, {T0}) == {T0: E.invalid_producer_id_mapping}
    assert verify("", pid, epoch, {T0}) == {T0: E.invalid_request}
    assert txn.end(pid, epoch) == E.none
    assert verify("tx", pid, epoch, {T0}) == {T0: E.transaction_abortable}


class RecordingTransport:
    """AddPartitionsToTxn v5 to broker 1, answered by this test: records each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, list[TxnPartitions]]] = []

    async def add_partitions_to_txn(
        self, broker_id: int, transactions: Sequence[TxnPartitions]
    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        self.requests.append((broker_id, list(transactions)))
        return {t.transactional_id: dict.fromkeys(t.partitions, E.none) for t in transactions}

    async def close(self) -> None:
        return None


async def test_questions_to_a_remote_coordinator_share_one_request_per_turn(txn: Txn) -> None:
    transport = RecordingTransport()
    txn.leaders[STATE] = 1  # another broker coordinates every id
    verifier = PartitionVerifier(
        txn.coordinator,
        broker_id=0,
        leader_of=lambda tp: txn.leaders.get(tp, NO_LEADER),
        transport=transport,
    )
    first = verifier.verify("a", 1, 0, [T0], add=False)
    second = verifier.verify("b", 2, 0, [T1], add=True)
    retried = verifier.verify("a", 1, 0, [T0, T1], add=False)
    fenced = verifier.verify("a", 1, -1, [T0], add=False)
    answers = await asyncio.gather(first, second, retried, fenced)
    assert answers == [
        {T0: E.network_exception},  # replaced by the client's retry in the same turn
        {T1: E.none},
        {T0: E.none, T1: E.none},
        {T0: E.invalid_producer_epoch},  # older than the question queued
    ]
    ((broker, questions),) = transport.requests
    assert broker == 1
    assert [(q.transactional_id, q.partitions, q.verify_only) for q in questions] == [
        ("a", (T0, T1), True),
        ("b", (T1,), False),
    ]
    # No coordinator known: nothing is sent.
    txn.leaders[STATE] = NO_LEADER
    unknown = await verifier.verify("a", 1, 0, [T0], add=False)
    assert unknown == {T0: E.coordinator_not_available}
    assert len(transport.requests) == 1


async def _end_v2(txn: Txn, pid: int, epoch: int) -> EndTxnResult:
    """EndTxn v5 (commit), awaited: an exhausted epoch first allocates a producer id."""
    answer: asyncio.Future[EndTxnResult] = asyncio.get_running_loop().create_future()
    txn.coordinator.end_transaction(
        "tx",
        pid,
        epoch,
        commit=True,
        from_client=True,
        callback=answer.set_result,
        client_transaction_version=2,
    )
    return await answer


async def test_an_exhausted_epoch_completes_at_a_new_producer_id(txn: Txn) -> None:
    append_state(txn, completed_commit(55, 32765, client_transaction_version=2))
    txn.reload()
    assert txn.add_v2(55, 32765, T0) == E.none
    bumped = await _end_v2(txn, 55, 32765)
    assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (E.none, 55, 32766)
    # 32766 is exhausted: the prepare bumps to 32767, the markers carry it, and the
    # transaction completes at a new producer id.
    assert txn.add_v2(55, 32766, T0) == E.none
    rotated = await _end_v2(txn, 55, 32766)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (
        E.none,
        FIRST_PRODUCER_ID,
        0,
    )
    _, (producer,) = txn.replica_manager.active_producer_state(T0)
    assert (producer.producer_id, producer.producer_epoch) == (55, 32767)
    # The old id's retry is recognised; the state survives a reload.
    retried = await _end_v2(txn, 55, 32766)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (
        E.none,
        FIRST_PRODUCER_ID,
        0,
    )
    txn.reload()
    described = txn.describe()
    assert (described.state, described.producer_id, described.producer_epoch) == (
        "CompleteCommit",
        FIRST_PRODUCER_ID,
        0,
    )
    assert txn.add_v2(FIRST_PRODUCER_ID, 0, T1) == E.none


async def test_a_timed_out_version_2_transaction_cannot_be_committed(txn: Txn) -> None:
    """The timeout's abort bumps the epoch once (a fence, no second bump): the producer's
    commit at the epoch before is refused, its abort taken as a retry of the abort, as
    Kafka answers them, and its batches are fenced."""
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add_v2(pid, epoch, T0) == E.none
    txn.clock.advance(TIMEOUT_MS)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteAbort", epoch + 1)
    committed = txn.end_v(pid, epoch, client_transaction_version=2)
    assert committed.error == E.invalid_txn_state
    aborted = txn.end_v(pid, epoch, commit=False, client_transaction_version=2)
    assert (aborted.error, aborted.producer_epoch) == (E.none, epoch + 1)
    assert txn.add_v2(pid, epoch, T0) == E.producer_fenced
