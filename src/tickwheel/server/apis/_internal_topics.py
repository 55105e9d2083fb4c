"""What the coordinators' internal topics share in a cluster: who leads a partition
(creating the topic on first need), and who hears of leadership changes.

``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` are each
created when a coordinator first needs one of their partitions, with their own
partition count, replication factor and configs; as in Kafka, never with fewer
replicas than configured: while fewer brokers are alive, the topic is not created, a
warning names the setting, and the coordinator is "not available" until it is.
``internal_topic_leader`` answers the leader of a partition per this broker's metadata
cache, on a listener (None while there is none or the topic is being created):
FindCoordinator answers name it on the listener the request came on.

Each coordinator loads a partition of its topic when this broker starts leading it and
unloads it when it stops; the node has one leadership listener, so each coordinator's
is chained after the ones set before it (``chain_leadership``).

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tickwheel.cluster import BrokerEndpoint, ClusterNode
from tickwheel.replica import TopicPartition

_log = logging.getLogger(__name__)

LeadershipListener = Callable[[TopicPartition, bool], None]


def internal_topic_leader(
    cluster: ClusterNode,
    tp: TopicPartition,
    *,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    replication_setting: str,
    listener_name: str,
) -> BrokerEndpoint | None:
    """The live leader of ``tp`` of an internal topic, on the listener named, creating
    the topic if it is absent and enough brokers are alive for ``replication_factor``
    (``replication_setting``)."""
    cache = cluster.cache
    if tp.topic not in cache.topics:
        if len(cache.brokers) < replication_factor:
            _log.warning(
                "Number of alive brokers %d does not meet the required replication factor "
                "%d for %s (%s); this can be ignored while the cluster is starting up",
                len(cache.brokers),
                replication_factor,
                tp.topic,
                replication_setting,
            )
            return None
        cluster.create_topic_later(tp.topic, num_partitions, replication_factor, configs)
        return None
    return cache.broker(cache.leader(tp), listener_name)


def chain_leadership(
    cluster: ClusterNode,
    topic: str,
    on_elected: Callable[[int], None],
    on_resigned: Callable[[int], None],
) -> None:
    """Tell ``on_elected``/``on_resigned`` of each partition of ``topic`` this broker
    starts or stops leading, after every listener the node had."""
    previous = cluster.leadership_listener

    def changed(tp: TopicPartition, leading: bool) -> None:
        if previous is not None:
            previous(tp, leading)
        if tp.topic != topic:
            return
        if leading:
            on_elected(tp.partition)
        else:
            on_resigned(tp.partition)

    cluster.leadership_listener = changed
