"""The transaction coordinator against a real ReplicaManager, on a manual clock."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator._errors import coordinator_append_error
from tickwheel.coordinator.transaction import TransactionState

from .conftest import (
    EXPIRATION_MS,
    FIRST_PRODUCER_ID,
    NO_LEADER,
    OFFSETS,
    START_MS,
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


async def begin(txn: Txn) -> tuple[int, int]:
    init = await txn.init()
    assert init.error == E.none
    assert txn.add(init.producer_id, init.producer_epoch, T0) == E.none
    return init.producer_id, init.producer_epoch


async def test_a_new_id_gets_epoch_0_then_each_init_bumps_it(txn: Txn) -> None:
    first = await txn.init()
    assert (first.error, first.producer_id, first.producer_epoch) == (E.none, FIRST_PRODUCER_ID, 0)
    again = await txn.init()
    assert (again.producer_id, again.producer_epoch) == (FIRST_PRODUCER_ID, 1)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("Empty", 1)


async def test_init_validation(txn: Txn) -> None:
    assert (await txn.init("")).error == E.invalid_request
    assert (await txn.init(timeout_ms=0)).error == E.invalid_transaction_timeout
    assert (await txn.init(timeout_ms=900_001)).error == E.invalid_transaction_timeout
    assert (await txn.init(timeout_ms=900_000)).error == E.none


async def test_kip_360_resume_and_fencing_by_expected_epoch(txn: Txn) -> None:
    first = await txn.init()
    pid = first.producer_id
    resumed = await txn.init(expected=(pid, 0))
    assert (resumed.error, resumed.producer_epoch) == (E.none, 1)
    # The same request again (its answer lost): the same epoch, no second bump.
    retried = await txn.init(expected=(pid, 0))
    assert (retried.error, retried.producer_epoch) == (E.none, 1)
    assert (await txn.init(expected=(pid + 5, 0))).error == E.producer_fenced
    assert (await txn.init(expected=(pid, 7))).error == E.producer_fenced


async def test_commit(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    assert txn.add(pid, epoch, T1) == E.none
    described = txn.describe()
    assert (described.state, described.partitions, described.start_timestamp) == (
        "Ongoing",
        frozenset({T0, T1}),
        START_MS,
    )
    assert txn.end(pid, epoch) == E.none
    # One node: the markers and CompleteCommit were written before EndTxn returned.
    described = txn.describe()
    assert (described.state, described.partitions, described.producer_epoch) == (
        "CompleteCommit",
        frozenset(),
        epoch,
    )
    assert txn.end(pid, epoch) == E.none  # a retried commit
    assert txn.end(pid, epoch, commit=False) == E.invalid_txn_state


async def test_add_offsets_partition_starts_a_transaction(txn: Txn) -> None:
    init = await txn.init()
    assert txn.add(init.producer_id, init.producer_epoch, OFFSETS) == E.none
    assert txn.describe().partitions == frozenset({OFFSETS})


async def test_request_errors(txn: Txn) -> None:
    assert txn.add(1, 0, txn_id="unknown") == E.invalid_producer_id_mapping
    assert txn.end(1, 0, txn_id="unknown") == E.invalid_producer_id_mapping
    assert txn.add(1, 0, txn_id="") == E.invalid_request
    assert txn.end(1, 0, txn_id="") == E.invalid_request
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.end(pid, epoch) == E.invalid_txn_state  # nothing to end (T13)
    assert txn.add(pid + 1, epoch) == E.invalid_producer_id_mapping
    assert txn.add(pid, epoch + 1) == E.producer_fenced
    assert txn.end(pid + 1, epoch) == E.invalid_producer_id_mapping
    assert txn.end(pid, epoch - 1) == E.producer_fenced
    assert txn.add(pid, epoch) == E.none
    assert txn.add(pid, epoch) == E.none  # all already in: no append


async def test_a_transaction_times_out_at_start_plus_timeout_and_is_fenced(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    txn.clock.advance(TIMEOUT_MS - 1)
    assert txn.describe().state == "Ongoing"
    txn.clock.advance(1)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteAbort", epoch + 1)
    assert txn.coordinator.timed_out_aborts == 1
    # TV1: the slow producer is fenced (T3).
    assert txn.add(pid, epoch) == E.producer_fenced
    assert txn.end(pid, epoch) == E.producer_fenced


async def test_adding_partitions_does_not_move_the_deadline(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    txn.clock.advance(TIMEOUT_MS // 2)
    assert txn.add(pid, epoch, T1) == E.none
    txn.clock.advance(TIMEOUT_MS // 2)
    assert txn.describe().state == "CompleteAbort"


async def test_end_txn_cancels_the_timeout(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    assert txn.service.timeouts.timeout_task("tx") is not None
    assert txn.end(pid, epoch) == E.none
    assert txn.service.timeouts.timeout_task("tx") is None
    txn.clock.advance(2 * TIMEOUT_MS)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteCommit", epoch)
    assert txn.coordinator.timed_out_aborts == 0


async def test_a_new_instance_fences_an_open_transaction(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    fencing = await txn.init()
    # The abort is under way; the new instance must retry (T2).
    assert fencing.error == E.concurrent_transactions
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteAbort", epoch + 1)
    retried = await txn.init()
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.none, pid, epoch + 2)
    assert txn.end(pid, epoch) == E.producer_fenced
    assert txn.service.timeouts.timeout_task("tx") is None


async def test_markers_wait_for_an_unknown_leader_and_block_the_next_transaction(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    txn.leaders[T0] = NO_LEADER
    assert txn.end(pid, epoch) == E.none  # answered before the markers (T4)
    assert txn.describe().state == "PrepareCommit"
    assert txn.add(pid, epoch) == E.concurrent_transactions
    assert txn.end(pid, epoch) == E.concurrent_transactions
    # CompleteCommit is pending: everything waits, whatever it asks (Kafka's order).
    assert txn.end(pid, epoch, commit=False) == E.concurrent_transactions
    assert (await txn.init()).error == E.concurrent_transactions
    txn.clock.advance(100)
    assert txn.describe().state == "PrepareCommit"  # still no leader (T17)
    txn.leaders[T0] = 0
    txn.clock.advance(100)
    assert txn.describe().state == "CompleteCommit"
    assert txn.add(pid, epoch) == E.none


async def test_markers_to_a_deleted_topic_are_skipped(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    del txn.leaders[T0]
    txn.leaders.pop(T0, None)
    txn.service.markers._leader_of = lambda tp: None
    assert txn.end(pid, epoch) == E.none
    assert txn.describe().state == "CompleteCommit"


async def test_state_is_reloaded_from_the_log_and_the_timeout_rearmed(txn: Txn) -> None:
    pid, _epoch = await begin(txn)
    txn.clock.advance(1_000)
    txn.reload()
    described = txn.describe()
    assert (described.state, described.producer_id, described.partitions) == (
        "Ongoing",
        pid,
        frozenset({T0}),
    )
    txn.clock.advance(TIMEOUT_MS - 1_001)
    assert txn.describe().state == "Ongoing"
    txn.clock.advance(1)
    assert txn.describe().state == "CompleteAbort"


async def test_a_prepared_commit_is_completed_after_a_reload(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    txn.leaders[T0] = NO_LEADER
    assert txn.end(pid, epoch) == E.none
    txn.service.on_resigned(0)
    assert txn.describe().error == E.not_coordinator
    assert txn.service.markers.pending == {}
    txn.leaders[T0] = 0
    txn.replica_manager.bump_leader_epoch(STATE)
    txn.service.on_elected(0)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteCommit", epoch)


async def test_requests_after_resignation_get_not_coordinator(txn: Txn) -> None:
    pid, epoch = await begin(txn)
    txn.service.on_resigned(0)
    assert (await txn.init()).error == E.not_coordinator
    assert txn.add(pid, epoch) == E.not_coordinator
    assert txn.end(pid, epoch) == E.not_coordinator
    txn.clock.advance(TIMEOUT_MS - 1)  # the timeout went with the partition...
    txn.service.on_elected(0)
    assert txn.describe().state == "Ongoing"
    txn.clock.advance(1)  # ...and came back with its deadline
    assert txn.describe().state == "CompleteAbort"


async def test_an_idle_id_expires_with_a_tombstone(txn: Txn) -> None:
    await txn.init()
    txn.clock.advance(EXPIRATION_MS - 1)
    assert txn.describe().error == E.none
    txn.clock.advance(1)
    assert txn.describe().error == E.transactional_id_not_found
    txn.reload()
    assert txn.describe().error == E.transactional_id_not_found
    fresh = await txn.init()
    assert (fresh.producer_id, fresh.producer_epoch) == (FIRST_PRODUCER_ID + 1, 0)


async def test_an_ongoing_transaction_does_not_expire(txn: Txn) -> None:
    _pid, _epoch = await begin(txn)
    txn.service.timeouts.cancel_timeout("tx")
    txn.clock.advance(EXPIRATION_MS)
    assert txn.describe().state == "Ongoing"


async def test_an_exhausted_epoch_rotates_the_producer_id(txn: Txn) -> None:
    append_state(txn, completed_commit(55, 32766))
    txn.reload()
    assert txn.describe().producer_epoch == 32766
    rotated = await txn.init()
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (
        E.none,
        FIRST_PRODUCER_ID,
        0,
    )
    assert txn.coordinator.state.get_transaction_state("tx")[1].previous_producer_id == 55


async def test_list_transactions_filters(txn: Txn) -> None:
    await begin(txn)
    other = await txn.init("other")
    listed = txn.coordinator.list_transactions((), (), -1)
    assert {(t.transactional_id, t.state) for t in listed.transactions} == {
        ("tx", TransactionState.ONGOING),
        ("other", TransactionState.EMPTY),
    }
    by_state = txn.coordinator.list_transactions(("Ongoing", "Bogus"), (), -1)
    assert [t.transactional_id for t in by_state.transactions] == ["tx"]
    assert by_state.unknown_state_filters == ("Bogus",)
    by_pid = txn.coordinator.list_transactions((), (other.producer_id,), -1)
    assert [t.transactional_id for t in by_pid.transactions] == ["other"]
    # Running for longer than 10 s: none yet (Empty has no start, so it always matches).
    long_running = txn.coordinator.list_transactions(("Ongoing",), (), 10_000)
    assert long_running.transactions == ()
    txn.clock.advance(10_001)
    long_running = txn.coordinator.list_transactions(("Ongoing",), (), 10_000)
    assert [t.transactional_id for t in long_running.transactions] == ["tx"]


async def test_a_failed_append_leaves_the_state_as_it_was(txn: Txn) -> None:
    init = await txn.init()
    txn.replica_manager.mark_offline(STATE)  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
    assert txn.add(init.producer_id, init.producer_epoch) == E.not_coordinator
    metadata = txn.coordinator.state.get_transaction_state("tx")[1]
    assert (metadata.state, metadata.pending_state) == (TransactionState.EMPTY, None)


async def test_a_fence_whose_abort_cannot_be_written_is_not_bumped_again(txn: Txn) -> None:
    _pid, epoch = await begin(txn)
    txn.replica_manager.mark_offline(STATE)
    assert (await txn.init()).error == E.not_coordinator
    metadata = txn.coordinator.state.get_transaction_state("tx")[1]
    assert metadata.has_failed_epoch_fence
    assert (metadata.state, metadata.producer_epoch) == (TransactionState.ONGOING, epoch + 1)
    assert metadata.prepare_fence_producer_epoch(START_MS).producer_epoch == epoch + 1


async def test_describe_and_list_need_a_running_coordinator(txn: Txn) -> None:
    await txn.init()
    txn.coordinator.shutdown()
    assert txn.describe().error == E.coordinator_not_available
    assert txn.coordinator.list_transactions((), (), -1).error == E.coordinator_not_available


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (E.unknown_topic_or_partition, E.coordinator_not_available),
        (E.not_enough_replicas, E.coordinator_not_available),
        (E.not_enough_replicas_after_append, E.coordinator_not_available),
        (E.request_timed_out, E.coordinator_not_available),
        (E.not_leader_or_follower, E.not_coordinator),
        (E.kafka_storage_error, E.not_coordinator),
        (E.message_too_large, E.unknown_server_error),
        (E.record_list_too_large, E.unknown_server_error),
        (E.none, E.none),
    ],
)
async def test_append_errors_map_as_in_kafka(append_error: ErrorCode, answer: ErrorCode) -> None:
    assert coordinator_append_error(append_error) == answer


async def test_a_timed_out_abort_that_cannot_be_written_is_tried_again(txn: Txn) -> None:
    """Kafka's scan finds such a transaction again at its next run; the wheel re-arms it
    ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` later, so the
    transaction's partitions do not keep their last stable offset for good."""
    _pid, epoch = await begin(txn)
    state = txn.replica_manager.get_partition(STATE)
    assert state is not None
    state.min_insync_replicas = 2  # the abort's append: NOT_ENOUGH_REPLICAS
    txn.clock.advance(TIMEOUT_MS)
    assert txn.describe().state == "Ongoing"
    state.min_insync_replicas = 1
    retry_ms = txn.service.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
    txn.clock.advance(retry_ms - 1)
    assert txn.describe().state == "Ongoing"
    txn.clock.advance(1)
    described = txn.describe()
    assert (described.state, described.producer_epoch) == ("CompleteAbort", epoch + 1)
