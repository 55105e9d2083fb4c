"""``TransactionService``: the transaction coordinator as a broker runs it.

It puts the parts together the way Kafka's broker does: the transactional ids of the
``__transaction_state`` partitions this broker leads (``TransactionStateManager``,
appending through the ``ReplicaManager``), their timeouts and expirations on one timer
of the broker's ``LoopTimers`` ("transaction-timeouts"; driven by the loop, or by a
``ManualClock``'s ``advance`` in tests), the markers (``TransactionMarkerChannelManager``:
local partitions through ``ReplicaManager.append_txn_markers``, others through the
injected ``MarkerTransport``), the partition leaders' questions to the coordinator
(``PartitionVerifier``: local calls, or AddPartitionsToTxn v5 through the injected
``VerificationTransport``), and ``TransactionApis`` for the requests.

``start`` loads every ``__transaction_state`` partition this broker leads (at the
partition's leader epoch as coordinator epoch) and sends the markers of what a load
finds half completed; ``on_elected``/``on_resigned`` follow leadership changes. As with
``__consumer_offsets``, the topic is created when the first FindCoordinator needs it
(``create_topic``); on a single node the service then loads its partitions at once.

Concurrency contract: event-loop thread only; ``start`` must run on the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tickwheel.coordinator._locator import CoordinatorLocator, CoordinatorNode
from tickwheel.coordinator.transaction._apis import TransactionApis
from tickwheel.coordinator.transaction._config import TransactionConfig
from tickwheel.coordinator.transaction._coordinator import TransactionCoordinator
from tickwheel.coordinator.transaction._log import TRANSACTION_STATE_TOPIC
from tickwheel.coordinator.transaction._markers import (
    LeaderLookup,
    MarkerTransport,
    TransactionMarkerChannelManager,
)
from tickwheel.coordinator.transaction._state_manager import TransactionStateManager
from tickwheel.coordinator.transaction._timeouts import TxnTimeouts
from tickwheel.coordinator.transaction._verification import (
    PartitionVerifier,
    VerificationTransport,
)
from tickwheel.replica import NO_LEADER, ReplicaManager, TopicPartition
from tickwheel.timer import LoopTimers

TIMER_NAME = "transaction-timeouts"


class TransactionService:
    """A broker's transaction coordinator."""

    def __init__(
        self,
        config: TransactionConfig,
        replica_manager: ReplicaManager,
        *,
        broker_id: int,
        timers: LoopTimers,
        clock_ms: Callable[[], int],
        allocate_producer_id: Callable[[], Awaitable[int]],
        partition_exists: Callable[[str, int], bool],
        offsets_partition: Callable[[str], TopicPartition],
        advertised: Callable[[], CoordinatorNode] | None = None,
        create_topic: Callable[[], None] | None = None,
        locate: CoordinatorLocator | None = None,
        leader_of: LeaderLookup | None = None,
        transport: MarkerTransport | None = None,
        verification_transport: VerificationTransport | None = None,
    ) -> None:
        self.config = config
        self._replica_manager = replica_manager
        self._broker_id = broker_id
        self._advertised = advertised
        self._create_topic = create_topic
        self._timer = timers.new_timer(TIMER_NAME)
        coordinator: TransactionCoordinator | None = None

        def on_timeout(txn_id: str, pid: int, epoch: int, start: int) -> None:
            assert coordinator is not None
            coordinator.abort_timed_out(txn_id, pid, epoch, start)

        def on_expiration(txn_id: str) -> None:
            assert coordinator is not None
            coordinator.expire(txn_id)

        self.timeouts = TxnTimeouts(
            self._timer,
            expiration_ms=config.transactional_id_expiration_ms,
            on_timeout=on_timeout,
            on_expiration=on_expiration,
        )
        self.state = TransactionStateManager(
            config, replica_manager, self.timeouts, clock_ms=clock_ms
        )
        existing = [
            tp.partition
            for tp in replica_manager.log_manager.existing_partitions()
            if tp.topic == TRANSACTION_STATE_TOPIC
        ]
        if existing:
            # The topic's real partition count decides where ids live (Kafka's rule).
            self.state.partition_count = max(existing) + 1
        self.markers = TransactionMarkerChannelManager(
            broker_id,
            replica_manager,
            self.state,
            self._timer,
            leader_of=leader_of or self._local_leader,
            transport=transport,
            request_timeout_ms=config.request_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        coordinator = TransactionCoordinator(
            self.state, self.markers, allocate_producer_id=allocate_producer_id, clock_ms=clock_ms
        )
        self.coordinator = coordinator
        self.verifier = PartitionVerifier(
            coordinator,
            broker_id=broker_id,
            leader_of=leader_of or self._local_leader,
            transport=verification_transport,
        )
        self.apis = TransactionApis(
            coordinator,
            locate or self._locate,
            partition_exists=partition_exists,
            offsets_partition=offsets_partition,
            verifier=self.verifier,
        )

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(TRANSACTION_STATE_TOPIC, partition)

    def _local_leader(self, tp: TopicPartition) -> int | None:
        """One node: this broker leads every partition it hosts; others do not exist."""
        hosted = self._replica_manager.get_partition(tp)
        if hosted is None:
            return None
        return self._broker_id if hosted.is_leader else NO_LEADER

    def _locate(self, partition: int) -> CoordinatorNode | None:
        """This broker if it leads the partition, creating the topic on first need."""
        tp = self._tp(partition)
        if self._replica_manager.get_partition(tp) is None and self._create_topic is not None:
            self._create_topic()
            self._elect_hosted()
        hosted = self._replica_manager.get_partition(tp)
        if hosted is None or not hosted.is_leader or self._advertised is None:
            return None
        if partition not in self.state.owned_partitions:
            return None
        return self._advertised()

    def _elect_hosted(self) -> None:
        owned = self.state.owned_partitions
        for tp, hosted in list(self._replica_manager.partitions.items()):
            if (
                tp.topic == TRANSACTION_STATE_TOPIC
                and hosted.is_leader
                and tp.partition not in owned
            ):
                self.coordinator.on_elected(tp.partition, hosted.leader_epoch)

    def on_elected(self, partition: int) -> None:
        """This broker became leader of ``__transaction_state`` ``partition``."""
        hosted = self._replica_manager.get_partition(self._tp(partition))
        epoch = 0 if hosted is None else hosted.leader_epoch
        self.coordinator.on_elected(partition, epoch)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads ``partition``."""
        self.coordinator.on_resigned(partition)

    def start(self) -> None:
        """Answer requests; load every ``__transaction_state`` partition led here."""
        self.coordinator.startup()
        self._elect_hosted()

    async def shutdown(self) -> None:
        """Stop answering, cancel every timer task and marker sender (the timer itself
        belongs to the broker's ``LoopTimers``)."""
        self.coordinator.shutdown()
        await self.verifier.close()
        await self.markers.close()
