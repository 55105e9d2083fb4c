"""``ShareCoordinatorService``: the share coordinator as a broker runs it.

It puts together the ``ShareCoordinator`` over this broker's ``__share_group_state``
partitions, the handlers of the share-state requests (``ShareStateApis``) and the
``CoordinatorPersister`` that this broker's share-partitions use. As Kafka does for its
other internal topics, ``__share_group_state`` is created when first needed: on a single
node by ``create_topic`` the first time a state is located (its partitions are then led
here and loaded at once); in a cluster the owner's ``locate`` asks the controller for it
and answers None until its leaders are known, which the persister retries.
``on_elected``/``on_resigned`` follow the leadership of the topic's partitions.

Concurrency contract: event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from tickwheel.coordinator._locator import CoordinatorNode
from tickwheel.coordinator.share_state._apis import ShareStateApis
from tickwheel.coordinator.share_state._config import ShareCoordinatorConfig
from tickwheel.coordinator.share_state._coordinator import ShareCoordinator
from tickwheel.coordinator.share_state._persister import (
    CoordinatorPersister,
    ShareCoordinatorLocator,
    ShareStateTransport,
)
from tickwheel.coordinator.share_state._records import SHARE_GROUP_STATE_TOPIC
from tickwheel.replica import ReplicaManager, TopicPartition

PERSISTER_TIMEOUT_MS = 30_000
"""How long a state read or write keeps retrying a coordinator that is moving or loading
(Kafka's default ``request.timeout.ms``: the time a client waits for its answer)."""


class ShareCoordinatorService:
    """A broker's share coordinator and the persister of its share-partitions."""

    def __init__(
        self,
        config: ShareCoordinatorConfig,
        replica_manager: ReplicaManager,
        *,
        broker_id: int,
        clock_ms: Callable[[], int],
        create_topic: Callable[[], None] | None = None,
        locate: ShareCoordinatorLocator | None = None,
        transport: ShareStateTransport | None = None,
        endpoint_of: Callable[[int], CoordinatorNode | None],
    ) -> None:
        self.config = config
        self._replica_manager = replica_manager
        self._broker_id = broker_id
        self._create_topic = create_topic
        self._endpoint_of = endpoint_of
        self._transport = transport
        self.coordinator = ShareCoordinator(config, replica_manager, clock_ms=clock_ms)
        self.apis = ShareStateApis(self.coordinator, self._node_of)
        self._locate_broker = locate or self._locate
        self.persister = CoordinatorPersister(
            self.coordinator,
            broker_id=broker_id,
            locate=self._locate_broker,
            transport=transport,
            timeout_ms=PERSISTER_TIMEOUT_MS,
        )

    def _locate(self, partition: int) -> int | None:
        """This broker if it leads the partition (one node: the only possible leader)."""
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)
        if self._replica_manager.get_partition(tp) is None and self._create_topic is not None:
            self._create_topic()
            self.elect_hosted()
        hosted = self._replica_manager.get_partition(tp)
        if hosted is None or not hosted.is_leader:
            return None
        return self._broker_id

    def _node_of(self, partition: int) -> CoordinatorNode | None:
        broker_id = self._locate_broker(partition)
        return None if broker_id is None else self._endpoint_of(broker_id)

    def elect_hosted(self) -> None:
        """Load every state partition this broker leads and has not loaded yet."""
        owned = self.coordinator.owned_partitions
        for partition in range(self.coordinator.partition_count):
            hosted = self._replica_manager.get_partition(
                TopicPartition(SHARE_GROUP_STATE_TOPIC, partition)
            )
            if hosted is not None and hosted.is_leader and partition not in owned:
                self.coordinator.on_elected(partition)

    def on_elected(self, partition: int) -> None:
        """This broker became leader of state ``partition``."""
        self.coordinator.on_elected(partition)

    def on_resigned(self, partition: int) -> None:
        """This broker is no longer leader of state ``partition``."""
        self.coordinator.on_resigned(partition)

    async def shutdown(self) -> None:
        """Close the connections to other brokers' share coordinators."""
        if self._transport is not None:
            await self._transport.close()
