"""``leader_hints``: the KIP-951 hints of the partitions a Produce or Fetch answers with a
leader error, from the broker's own view of them.

Kafka's ``KafkaApis.getCurrentLeader``: a partition this broker hosts tells its leader
and epoch itself (``Partition.leader_id``, ``leader_epoch``); one it does not host is
looked up in the cluster's metadata cache; one known to neither is leader -1, epoch -1.
The leader's endpoint is the one on the listener the request came on (this broker's
advertised endpoint, or a live broker's in the cluster cache); a leader without one
(dead, or no such listener) is hinted without an endpoint, as Kafka's
``getAliveBrokerNode`` leaves it out.

The handlers (``_produce``, ``_fetch``) and the fault plan's injected errors (through
the dispatcher's ``DispatchEffects``) take their hints here, so an injected
NOT_LEADER_OR_FOLLOWER reads on the wire as the broker's own.

Concurrency: event-loop thread only, like the handlers.
"""

from __future__ import annotations

from collections.abc import Iterable

from tickwheel.protocol import LEADER_HINT_ERRORS, NO_LEADER_HINTS, LeaderHints, NodeEndpoint
from tickwheel.replica import NO_LEADER, TopicPartition
from tickwheel.server._context import BrokerContext

_NO_EPOCH = -1


def _current_leader(context: BrokerContext, tp: TopicPartition) -> tuple[int, int]:
    partition = context.replica_manager.get_partition(tp)
    if partition is not None:
        return partition.leader_id, partition.leader_epoch
    cluster = context.cluster
    state = None if cluster is None else cluster.cache.partition_states.get(tp)
    if cluster is None or state is None:
        return NO_LEADER, _NO_EPOCH
    return cluster.cache.leader(tp), state.leader_epoch


def _endpoint(context: BrokerContext, broker_id: int) -> NodeEndpoint | None:
    if broker_id == context.broker_id:
        advertised = context.advertised
        return NodeEndpoint(broker_id, advertised.host, advertised.port)
    cluster = context.cluster
    found = None if cluster is None else cluster.cache.broker(broker_id, context.request_listener)
    return None if found is None else NodeEndpoint(broker_id, found.host, found.port)


def leader_hints(
    context: BrokerContext, errors: Iterable[tuple[TopicPartition, int]]
) -> LeaderHints:
    """The hints of the partitions among ``errors`` (partition, error code) answered
    NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""
    leaders: dict[tuple[str, int], tuple[int, int]] = {}
    endpoints: dict[int, NodeEndpoint] = {}
    for tp, error in errors:
        if error not in LEADER_HINT_ERRORS:
            continue
        leader = leaders[tp.topic, tp.partition] = _current_leader(context, tp)
        leader_id = leader[0]
        if leader_id != NO_LEADER and leader_id not in endpoints:
            endpoint = _endpoint(context, leader_id)
            if endpoint is not None:
                endpoints[leader_id] = endpoint
    if not leaders:
        return NO_LEADER_HINTS
    return LeaderHints(leaders, tuple(endpoints[b] for b in sorted(endpoints)))
