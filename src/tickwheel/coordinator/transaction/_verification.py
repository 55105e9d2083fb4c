"""``PartitionVerifier``: a partition leader asks the transaction coordinator about a
transactional produce (Kafka's ``AddPartitionsToTxnManager``).

Before a transactional batch that would open a transaction on a partition is appended,
its leader asks the coordinator of the batch's transactional id, in one of two ways:

- **verify** (KIP-890 part 1, for Produce v3-11 and TxnOffsetCommit v0-4): is the
  partition in the id's ongoing transaction? The coordinator answers per partition,
  TRANSACTION_ABORTABLE for one that is not (the client never added it, or its
  transaction has ended), and the leader refuses the append. That closes the hanging
  transaction an unadded (or late) produce used to open.
- **add** (KIP-890 part 2, for Produce v12 and TxnOffsetCommit v5): add the partition
  to the transaction, starting one if needed, at transaction version 2: the client
  never sends AddPartitionsToTxn.

When this broker leads the id's ``__transaction_state`` partition the call is local.
Otherwise the question travels as AddPartitionsToTxn v5 (broker to broker: a batch of
transactions, each ``verify_only`` or not) through the injected
``VerificationTransport``: the questions of one event-loop turn to one coordinator go
in one request, one entry per transactional id, as Kafka's sender thread batches
them. A second question for an id already queued replaces the first, which is answered
NETWORK_EXCEPTION (same epoch: a retry of the client) or INVALID_PRODUCER_EPOCH (a
lower epoch); a question at a lower epoch than the queued one is answered
INVALID_PRODUCER_EPOCH at once. A request that fails (a timeout, a connection refused or
closed) answers each of its partitions NETWORK_EXCEPTION; a coordinator not known,
COORDINATOR_NOT_AVAILABLE.

The answers are the coordinator's own codes; the Produce and TxnOffsetCommit handlers
map them to what their version's clients know (``client_answer``, as Kafka's
``ReplicaManager`` and ``AddPartitionsToTxnManager`` do).

Concurrency: event-loop thread only. The loop's ``call_soon`` flushes a turn's queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.transaction._coordinator import PartitionErrors, TransactionCoordinator
from tickwheel.coordinator.transaction._log import TRANSACTION_STATE_TOPIC
from tickwheel.coordinator.transaction._markers import LeaderLookup
from tickwheel.coordinator.transaction._metadata import TV_2
from tickwheel.replica import NO_LEADER, TopicPartition

_log = logging.getLogger(__name__)


_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def client_answer(error: ErrorCode, *, abortable_known: bool, retriable: ErrorCode) -> ErrorCode:
    """The coordinator's refusal of a partition as a client is answered: PRODUCER_FENCED
    as INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE as INVALID_TXN_STATE unless the
    request's version knows it, and the coordinator's retriable answers as
    ``retriable`` (one that every client of the API retries)."""
    if error == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error == ErrorCode.transaction_abortable and not abortable_known:
        return ErrorCode.invalid_txn_state
    if error in _RETRIABLE:
        return retriable
    return error


@dataclass(frozen=True, slots=True)
class TxnPartitions:
    """One transactional id's question: its producer and the partitions asked about."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool


class VerificationTransport(Protocol):
    """AddPartitionsToTxn v5 to another broker."""

    async def add_partitions_to_txn(
        self, broker_id: int, transactions: Sequence[TxnPartitions]
    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        """Ask ``broker_id``; ``{transactional_id: {tp: error}}``. Raises on a lost
        request."""
        ...

    async def close(self) -> None:
        """Close the connections to other brokers (at shutdown)."""
        ...


@dataclass(slots=True)
class _Queued:
    question: TxnPartitions
    answer: asyncio.Future[PartitionErrors]


@dataclass(slots=True)
class _NodeQueue:
    by_id: dict[str, _Queued] = field(default_factory=dict)


class PartitionVerifier:
    """Verifies (or adds) a transactional produce's partitions with their coordinator."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        *,
        broker_id: int,
        leader_of: LeaderLookup,
        transport: VerificationTransport | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._leader_of = leader_of
        self._transport = transport
        self._queues: dict[int, _NodeQueue] = {}
        self._flush_scheduled = False
        self._sending: set[asyncio.Task[None]] = set()

    def _coordinator_broker(self, transactional_id: str) -> int | None:
        partition = self._coordinator.state.partition_for(transactional_id)
        leader = self._leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return None if leader is None or leader == NO_LEADER else leader

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Collection[TopicPartition],
        *,
        add: bool,
    ) -> PartitionErrors:
        """The coordinator's answer per partition: verified (``add`` False) or added at
        transaction version 2 (``add`` True)."""
        question = TxnPartitions(
            transactional_id, producer_id, producer_epoch, tuple(partitions), not add
        )
        broker = self._coordinator_broker(transactional_id)
        if broker == self._broker_id or self._transport is None:
            return await self._local(question)
        if broker is None:
            return dict.fromkeys(question.partitions, ErrorCode.coordinator_not_available)
        return await self._enqueue(broker, question)

    async def _local(self, question: TxnPartitions) -> PartitionErrors:
        if question.verify_only:
            return self._coordinator.verify_partitions(
                question.transactional_id,
                question.producer_id,
                question.producer_epoch,
                set(question.partitions),
            )
        answer: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()

        def deliver(error: ErrorCode) -> None:
            if not answer.done():
                answer.set_result(error)

        self._coordinator.add_partitions(
            question.transactional_id,
            question.producer_id,
            question.producer_epoch,
            set(question.partitions),
            deliver,
            client_transaction_version=TV_2,
        )
        return dict.fromkeys(question.partitions, await answer)

    async def answer(self, questions: Sequence[TxnPartitions]) -> dict[str, PartitionErrors]:
        """The coordinator's side of AddPartitionsToTxn v4+: each transaction's answers."""
        answers = await asyncio.gather(*(self._local(q) for q in questions))
        return {q.transactional_id: a for q, a in zip(questions, answers, strict=True)}

    async def _enqueue(self, broker: int, question: TxnPartitions) -> PartitionErrors:
        loop = asyncio.get_running_loop()
        queue = self._queues.setdefault(broker, _NodeQueue())
        queued = queue.by_id.get(question.transactional_id)
        if queued is not None:
            if question.producer_epoch < queued.question.producer_epoch:
                return dict.fromkeys(question.partitions, ErrorCode.invalid_producer_epoch)
            replaced = (
                ErrorCode.network_exception
                if question.producer_epoch == queued.question.producer_epoch
                else ErrorCode.invalid_producer_epoch
            )
            queued.answer.set_result(dict.fromkeys(queued.question.partitions, replaced))
        entry = _Queued(question, loop.create_future())
        queue.by_id[question.transactional_id] = entry
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return await entry.answer

    def _flush(self) -> None:
        self._flush_scheduled = False
        queues, self._queues = self._queues, {}
        for broker, queue in queues.items():
            task = asyncio.get_running_loop().create_task(self._send(broker, queue))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, broker: int, queue: _NodeQueue) -> None:
        assert self._transport is not None
        entries = list(queue.by_id.values())
        try:
            results = await self._transport.add_partitions_to_txn(
                broker, [entry.question for entry in entries]
            )
        except (TimeoutError, OSError, EOFError, ValueError) as exc:
            # EOFError: the coordinator closed the connection mid-request
            # (``asyncio.IncompleteReadError``).
            _log.info("AddPartitionsToTxn to broker %d failed: %s", broker, exc)
            results = {}
        for entry in entries:
            if entry.answer.done():
                continue
            got = results.get(entry.question.transactional_id, {})
            entry.answer.set_result(
                {tp: got.get(tp, ErrorCode.network_exception) for tp in entry.question.partitions}
            )

    async def close(self) -> None:
        """Cancel the requests in flight and close the transport (at shutdown)."""
        for task in list(self._sending):
            task.cancel()
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
        if self._transport is not None:
            await self._transport.close()
