"""``GroupService``: the group coordinator as a broker runs it, on its event loop.

It puts the parts together the way Kafka's broker does: the coordinator's two
purgatories, "Heartbeat" and "Rebalance", each on its own ``SystemTimer`` of the
broker's ``LoopTimers`` (an ``InlineExecutor`` driven by an ``AsyncioTimerDriver``, or by
a ``ManualClock``'s ``advance`` in tests; no thread; expirations run on the loop);
``__consumer_offsets`` through the ``ReplicaManager`` (``ReplicaOffsetsLog``);
and ``GroupApis`` behind ``ConsumerGroupApis`` (``apis``) for the requests, whose
handlers the broker's API table calls. ``start()`` loads the groups of every offsets
partition this broker leads. As in Kafka, ``__consumer_offsets`` is created when the first
FindCoordinator needs it (through the broker's ``create_offsets_topic``), so a broker
that never sees a group never pays for its partitions.

Like Kafka's GroupMetadataManager.startup, ``start`` also schedules the coordinator's
"delete-expired-group-metadata" task: ``cleanup_group_metadata`` runs at once, then
every ``offsets.retention.check.interval.ms`` (on the broker's ``Scheduler``) until
``shutdown``. Commit and expiry timestamps read ``wall_clock_ms`` (epoch milliseconds;
a manual clock's view of them in tests).
Each run visits every group this broker coordinates, holding one group's lock at a
time, and appends the tombstones of what it removed; then the consumer-protocol groups
left empty without offsets are deleted too.

Consumer-protocol groups (KIP-848, ``tickwheel.coordinator.group.consumer``) share the offsets
manager and the offsets log: their ``ConsumerGroupCoordinator`` has its own timer
("ConsumerGroupTimeouts") for member sessions and rebalance timeouts, replays its records
when the manager loads a partition, and ``ConsumerGroupApis`` stands in front of the
classic ``GroupApis`` (it answers ConsumerGroupHeartbeat and ConsumerGroupDescribe, and
looks at a group id before handing a classic API on). ``topics`` is how it sees the
broker's topics (ids, names, partition counts).

The service installs the coordinator's ``on_transaction_completed`` as the
ReplicaManager's ``txn_completion_listener``, so a transaction marker appended to an
offsets partition commits or drops the transaction's pending offsets; ``shutdown``
removes it.

Concurrency contract: event-loop thread only (like the ReplicaManager); ``start`` must
run on the loop, since the timer drivers arm ``loop.call_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tickwheel.coordinator import CoordinatorLocator, CoordinatorNode
from tickwheel.coordinator.group._apis import GroupApis, PartitionChecker
from tickwheel.coordinator.group._config import GroupConfig
from tickwheel.coordinator.group._coordinator import GroupCoordinator
from tickwheel.coordinator.group._manager import GroupMetadataManager, wall_clock_ms
from tickwheel.coordinator.group._offsets_log import OFFSETS_TOPIC
from tickwheel.coordinator.group._replica_offsets_log import ReplicaOffsetsLog
from tickwheel.coordinator.group.consumer import (
    ConsumerGroupApis,
    ConsumerGroupCoordinator,
    TopicCatalog,
)
from tickwheel.purgatory import DelayedOperationPurgatory
from tickwheel.replica import ReplicaManager, TopicPartition
from tickwheel.timer import LoopTimers, Scheduler, SystemTimer, TimerTask

_CLEANUP_TASK = "delete-expired-group-metadata"
_CONSUMER_GROUP_TIMER = "ConsumerGroupTimeouts"


class GroupService:
    """A broker's group coordinator: purgatories on the loop, offsets in its partitions."""

    def __init__(
        self,
        config: GroupConfig,
        replica_manager: ReplicaManager,
        *,
        broker_id: int,
        advertised: Callable[[], CoordinatorNode],
        create_offsets_topic: Callable[[], None] | None = None,
        locate: CoordinatorLocator | None = None,
        partition_exists: PartitionChecker,
        topics: TopicCatalog,
        timers: LoopTimers | None = None,
        scheduler: Scheduler | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self._replica_manager = replica_manager
        self._advertised = advertised
        self._create_offsets_topic = create_offsets_topic
        # The owner starts and stops shared timers; a private set is started here.
        self._owns_timers = timers is None
        self._timers = LoopTimers() if timers is None else timers
        self._scheduler = Scheduler(self._timers) if scheduler is None else scheduler
        self._cleanup: TimerTask | None = None
        offsets_log = ReplicaOffsetsLog(
            replica_manager, commit_timeout_ms=config.offsets_commit_timeout_ms
        )
        manager = GroupMetadataManager(config, offsets_log, clock_ms=clock_ms)
        self.coordinator = GroupCoordinator(
            config, manager, timer_for=self._timer_for, broker_id=broker_id, reaper_enabled=False
        )
        self.consumer_groups = ConsumerGroupCoordinator(
            config, manager, offsets_log, topics, timer=self._timer_for(_CONSUMER_GROUP_TIMER)
        )
        manager.other_records_listener = self.consumer_groups.replay
        replica_manager.txn_completion_listener = self.coordinator.on_transaction_completed
        # A cluster passes its own ``locate`` (the partition leader from its metadata).
        self.apis = ConsumerGroupApis(
            GroupApis(self.coordinator, locate or self._locate, partition_exists=partition_exists),
            self.consumer_groups,
            topics,
        )

    @property
    def purgatories(self) -> tuple[DelayedOperationPurgatory[Any], ...]:
        """The Heartbeat and Rebalance purgatories (for the broker's metrics)."""
        return (self.coordinator.heartbeat_purgatory, self.coordinator.join_purgatory)

    def _timer_for(self, name: str) -> SystemTimer:
        return self._timers.new_timer(name)

    def _offsets_partition(self, partition: int) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, partition)

    def _locate(self, partition: int) -> CoordinatorNode | None:
        """This broker if it leads the partition (one node: the only possible leader)."""
        tp = self._offsets_partition(partition)
        if self._replica_manager.get_partition(tp) is None and self._create_offsets_topic:
            self._create_offsets_topic()
            self._elect_hosted()
        hosted = self._replica_manager.get_partition(tp)
        if hosted is None or not hosted.is_leader:
            return None
        return self._advertised()

    def _elect_hosted(self) -> None:
        owned = self.coordinator.manager.owned_partitions
        for partition in range(self.config.offsets_topic_num_partitions):
            hosted = self._replica_manager.get_partition(self._offsets_partition(partition))
            if hosted is not None and hosted.is_leader and partition not in owned:
                self.coordinator.on_elected(partition)

    def on_elected(self, partition: int) -> None:
        """This broker became leader of offsets ``partition``: coordinate its groups."""
        self.coordinator.on_elected(partition)

    def on_resigned(self, partition: int) -> None:
        """This broker is no longer leader of offsets ``partition``: drop its groups."""
        self.coordinator.on_resigned(partition)
        self.consumer_groups.unload(partition)

    def start(self) -> None:
        """Start the timer drivers, load the groups of every offsets partition led here,
        and schedule the periodic cleanup of expired offsets and dead groups."""
        if self._owns_timers:
            self._timers.start()
        self.coordinator.startup()
        self._elect_hosted()
        self._cleanup = self._scheduler.schedule(
            _CLEANUP_TASK,
            self._cleanup_group_metadata,
            self.config.offsets_retention_check_interval_ms,
            delay_ms=0,
        )

    def _cleanup_group_metadata(self) -> None:
        self.coordinator.cleanup_group_metadata()
        manager = self.coordinator.manager
        self.consumer_groups.delete_empty_groups(lambda g: manager.get_group(g) is not None)

    def shutdown(self) -> None:
        """Stop the cleanup, the timer drivers and both purgatories (the offsets logs belong
        to the broker)."""
        if self._cleanup is not None:
            self._cleanup.cancel()
            self._cleanup = None
        if self._owns_timers:
            self._timers.stop()
        if (
            self._replica_manager.txn_completion_listener
            == self.coordinator.on_transaction_completed
        ):
            self._replica_manager.txn_completion_listener = None
        self.consumer_groups.shutdown()
        self.coordinator.shutdown()
