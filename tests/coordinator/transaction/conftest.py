"""``txn``: a started ``TransactionService`` over a real ReplicaManager, on a manual clock.

The ReplicaManager hosts ``__transaction_state`` (one partition), ``__consumer_offsets``
(one) and topic ``t`` (two partitions) on the test's tmp dir; every timer (purgatories,
transaction timeouts, marker retries) runs on one ``ManualClock``. ``leaders`` decides
where markers go: a partition mapped to ``NO_LEADER`` waits (its markers retried every
``retry.backoff.ms``) until the test names a leader.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio
from kio.schema.errors import ErrorCode

from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    EndTxnResult,
    InitProducerIdResult,
    TransactionConfig,
    TransactionService,
    TransactionState,
    TxnTransitMetadata,
)
from tickwheel.coordinator.transaction._log import build_record_batch, encode_value
from tickwheel.log import AppendOrigin, LogConfig
from tickwheel.replica import ACKS_ALL, NO_LEADER, ReplicaManager, TopicPartition
from tickwheel.timer import LoopTimers, ManualClock

START_MS = 1_000_000
TIMEOUT_MS = 60_000
EXPIRATION_MS = 3_600_000
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
OFFSETS = TopicPartition("__consumer_offsets", 0)
STATE = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
FIRST_PRODUCER_ID = 1000


@dataclass
class Txn:
    """The service under test and its surroundings."""

    clock: ManualClock
    replica_manager: ReplicaManager
    service: TransactionService
    leaders: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def coordinator(self) -> Any:
        return self.service.coordinator

    async def init(
        self,
        txn_id: str = "tx",
        timeout_ms: int = TIMEOUT_MS,
        expected: tuple[int, int] | None = None,
    ) -> InitProducerIdResult:
        got: list[InitProducerIdResult] = []
        await self.coordinator.handle_init_producer_id(txn_id, timeout_ms, expected, got.append)
        (result,) = got
        return result

    def _one(self, start: Callable[[Callable[[ErrorCode], None]], None]) -> ErrorCode:
        got: list[ErrorCode] = []
        start(got.append)
        (error,) = got
        return error

    def add(self, pid: int, epoch: int, *tps: TopicPartition, txn_id: str = "tx") -> ErrorCode:
        return self._one(
            lambda cb: self.coordinator.add_partitions(txn_id, pid, epoch, set(tps or (T0,)), cb)
        )

    def end(self, pid: int, epoch: int, *, commit: bool = True, txn_id: str = "tx") -> ErrorCode:
        return self.end_v(pid, epoch, commit=commit, txn_id=txn_id).error

    def end_v(
        self,
        pid: int,
        epoch: int,
        *,
        commit: bool = True,
        txn_id: str = "tx",
        client_transaction_version: int = 0,
    ) -> EndTxnResult:
        """EndTxn as a client of ``client_transaction_version`` (2: EndTxn v5)."""
        got: list[EndTxnResult] = []
        self.coordinator.end_transaction(
            txn_id,
            pid,
            epoch,
            commit=commit,
            from_client=True,
            callback=got.append,
            client_transaction_version=client_transaction_version,
        )
        (result,) = got
        return result

    def add_v2(self, pid: int, epoch: int, *tps: TopicPartition, txn_id: str = "tx") -> ErrorCode:
        """The partitions added as a partition leader adds them for a Produce v12."""
        return self._one(
            lambda cb: self.coordinator.add_partitions(
                txn_id, pid, epoch, set(tps or (T0,)), cb, client_transaction_version=2
            )
        )

    def describe(self, txn_id: str = "tx") -> Any:
        return self.coordinator.describe(txn_id)

    def reload(self) -> None:
        """Resign and be elected again at the next leader epoch (reads the log back)."""
        self.service.on_resigned(0)
        self.replica_manager.bump_leader_epoch(STATE)
        self.service.on_elected(0)


def completed_commit(
    producer_id: int, producer_epoch: int, client_transaction_version: int = 0
) -> TxnTransitMetadata:
    """A finished transaction's state, to ``append_state``."""
    return TxnTransitMetadata(
        producer_id=producer_id,
        previous_producer_id=-1,
        next_producer_id=-1,
        producer_epoch=producer_epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=TIMEOUT_MS,
        txn_state=TransactionState.COMPLETE_COMMIT,
        topic_partitions=frozenset(),
        txn_start_timestamp=START_MS,
        txn_last_update_timestamp=START_MS,
        client_transaction_version=client_transaction_version,
    )


def append_state(txn: Txn, transit: TxnTransitMetadata) -> None:
    """Write ``transit`` as the id "tx"'s record to ``__transaction_state``, as a
    coordinator would (a state to load with ``reload``)."""
    results: list[Any] = []
    txn.replica_manager.append_records(
        1_000,
        ACKS_ALL,
        {STATE: build_record_batch("tx", encode_value(transit), START_MS)},
        results.append,
        internal_topics_allowed=True,
        origin=AppendOrigin.COORDINATOR,
    )
    assert results[0][STATE].error_code == ErrorCode.none


def make_config(**overrides: int) -> TransactionConfig:
    return TransactionConfig(
        transaction_state_log_num_partitions=1,
        transactional_id_expiration_ms=EXPIRATION_MS,
        **overrides,
    )


@pytest_asyncio.fixture
async def txn(tmp_path: Path) -> AsyncIterator[Txn]:
    clock = ManualClock(START_MS)
    timers = LoopTimers(clock)
    timers.start()
    replica_manager = ReplicaManager(0, [tmp_path], timers=timers, clock_ms=clock.now_ms)
    replica_manager.start()
    for tp in (STATE, OFFSETS, T0, T1):
        replica_manager.make_leader(tp, LogConfig())
    leaders = dict.fromkeys((OFFSETS, T0, T1), 0)
    ids = itertools.count(FIRST_PRODUCER_ID)

    async def allocate() -> int:
        return next(ids)

    service = TransactionService(
        make_config(),
        replica_manager,
        broker_id=0,
        timers=timers,
        clock_ms=clock.now_ms,
        allocate_producer_id=allocate,
        partition_exists=lambda topic, partition: topic == "t" and partition in (0, 1),
        offsets_partition=lambda _group: OFFSETS,
        advertised=lambda: CoordinatorNode(0, "127.0.0.1", 9092),
        leader_of=lambda tp: leaders.get(tp, NO_LEADER),
    )
    service.start()
    yield Txn(clock, replica_manager, service, leaders)
    await service.shutdown()
    replica_manager.shutdown()
    timers.stop()
