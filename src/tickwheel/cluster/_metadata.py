"""``MetadataCache``: what this broker knows of the cluster, as ZooKeeper last told it.

Kafka's ``MetadataCache``: the live brokers and their endpoints on every listener,
each topic's replica assignment (with the replicas a reassignment adds and removes)
and config overrides, each partition's
``LeaderAndIsr`` (with the znode version it was read at), the controller and the
cluster id. The ZooKeeper watches
feed it; Metadata responses, CreateTopics and the leader/follower transitions read it.

Updates never go backwards: a partition state older (by znode version) than the one
held is ignored, since a watch may report a state this broker already wrote itself.

Every update counts a generation: ``broker_generation`` for the live brokers (which
decide each leader's reachability), ``topic_generation`` per topic for its assignment,
configs, id and partition states; the Metadata handler keeps each topic's encoded
answer until one of them moves.

Concurrency: owned by the broker's event loop; every method is called on that thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tickwheel.cluster._reassignment import ReplicaAssignment
from tickwheel.cluster._znodes import BrokerEndpoint, BrokerRegistration
from tickwheel.replica import NO_LEADER, LeaderAndIsr, TopicPartition

NO_CONTROLLER = -1


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition as a Metadata response describes it."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]

    @property
    def has_leader(self) -> bool:
        """Whether the partition has a live leader."""
        return self.leader != NO_LEADER


@dataclass(slots=True)
class TopicMetadata:
    """A topic's assignment (partition -> replicas) and config overrides; ``adding`` and
    ``removing`` name the replicas of partitions being reassigned."""

    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str] = field(default_factory=dict)
    topic_id: str = ""
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


class MetadataCache:
    """Brokers, topics, partition states, controller and cluster id."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.partition_states: dict[TopicPartition, LeaderAndIsr] = {}
        self.controller_id = NO_CONTROLLER
        self.cluster_id = ""
        self.broker_generation = 0
        self._topic_generations: dict[str, int] = {}

    # -- updates ---------------------------------------------------------------------

    def set_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        """Replace the live brokers."""
        self.brokers = {b.broker_id: b for b in brokers}
        self.broker_generation += 1

    def topic_generation(self, name: str) -> int:
        """A number that changes with every update of topic ``name`` or its partitions."""
        return self._topic_generations.get(name, 0)

    def _topic_changed(self, name: str) -> None:
        self._topic_generations[name] = self._topic_generations.get(name, 0) + 1

    def set_topic(
        self,
        name: str,
        assignment: Mapping[int, tuple[int, ...]],
        configs: Mapping[str, str],
        topic_id: str = "",
        *,
        adding: Mapping[int, tuple[int, ...]] | None = None,
        removing: Mapping[int, tuple[int, ...]] | None = None,
    ) -> None:
        """Add a topic or replace its assignment and configs (partitions may only grow)."""
        self.topics[name] = TopicMetadata(
            dict(assignment), dict(configs), topic_id, dict(adding or {}), dict(removing or {})
        )
        self._topic_changed(name)

    def remove_topic(self, name: str) -> list[TopicPartition]:
        """Forget a deleted topic; returns its partitions."""
        info = self.topics.pop(name, None)
        self._topic_changed(name)
        gone = [TopicPartition(name, p) for p in (info.assignment if info else ())]
        for tp in [tp for tp in self.partition_states if tp.topic == name]:
            del self.partition_states[tp]
            if tp not in gone:
                gone.append(tp)
        return gone

    def set_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> bool:
        """Record ``state`` unless an equal or newer version is held; True if recorded."""
        held = self.partition_states.get(tp)
        if held is not None and held.version >= state.version:
            return False
        self.partition_states[tp] = state
        self._topic_changed(tp.topic)
        return True

    # -- queries ---------------------------------------------------------------------

    def broker(self, broker_id: int, listener_name: str) -> BrokerEndpoint | None:
        """A live broker's endpoint on the listener named, or None (not live, or no such
        listener: Kafka's ``getAliveBrokerNode``)."""
        registration = self.brokers.get(broker_id)
        return None if registration is None else registration.endpoint(listener_name)

    def endpoints(self, listener_name: str) -> list[BrokerEndpoint]:
        """Every live broker that has the listener named, by broker id."""
        found = (self.broker(broker_id, listener_name) for broker_id in sorted(self.brokers))
        return [endpoint for endpoint in found if endpoint is not None]

    def live_controller_id(self) -> int:
        """The controller if it is a live broker, else ``NO_CONTROLLER`` (a controller
        whose session has not expired yet may already be gone)."""
        return self.controller_id if self.controller_id in self.brokers else NO_CONTROLLER

    def contains_partition(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` exists in the cluster (whoever hosts it)."""
        info = self.topics.get(tp.topic)
        return info is not None and tp.partition in info.assignment

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The assigned replicas of ``tp`` (empty if unknown)."""
        info = self.topics.get(tp.topic)
        return () if info is None else info.assignment.get(tp.partition, ())

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """The replicas of ``tp``, with those a reassignment adds and removes."""
        info = self.topics.get(tp.topic)
        if info is None:
            return ReplicaAssignment(())
        return ReplicaAssignment(
            info.assignment.get(tp.partition, ()),
            info.adding.get(tp.partition, ()),
            info.removing.get(tp.partition, ()),
        )

    def leader(self, tp: TopicPartition) -> int:
        """The live leader of ``tp``, or ``NO_LEADER``."""
        state = self.partition_states.get(tp)
        if state is None or state.leader not in self.brokers:
            return NO_LEADER
        return state.leader

    def partition_metadata(self, topic: str) -> list[PartitionMetadata]:
        """Every partition of ``topic`` for a Metadata response (empty if unknown).

        A partition whose state is unknown, or whose leader is not live, is described
        with no leader: a response must never name a leader missing from its brokers.
        """
        info = self.topics.get(topic)
        if info is None:
            return []
        described = []
        for partition, replicas in sorted(info.assignment.items()):
            tp = TopicPartition(topic, partition)
            state = self.partition_states.get(tp)
            described.append(
                PartitionMetadata(
                    partition=partition,
                    leader=self.leader(tp),
                    leader_epoch=state.leader_epoch if state is not None else -1,
                    replicas=replicas,
                    isr=state.isr if state is not None else (),
                    offline_replicas=tuple(r for r in replicas if r not in self.brokers),
                )
            )
        return described
