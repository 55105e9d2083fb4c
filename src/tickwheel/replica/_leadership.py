"""Leader and follower transitions of a hosted partition (Kafka's ``makeLeader`` /
``makeFollower``), from a ``LeaderAndIsr`` the cluster decided.

- ``become_leader``: open (or create) the log; take the leader epoch (recorded in the
  log's leader-epoch cache as starting at its log end), the assigned replicas and the
  ISR; keep a ``ReplicaState`` per follower. The high watermark
  starts where this log had it (its checkpoint, which may lag) and moves once the
  followers report their log ends; an ISR of this broker alone raises it to its log
  end at once.
- ``become_follower``: open (or create) the log and record who leads at which epoch;
  the fetcher then truncates the log to where it and the leader's agree
  (OffsetsForLeaderEpoch) before it fetches.

Either way every operation waiting on the partition is woken: a produce or fetch
that waited for this broker as leader must learn that it no longer is one.

Concurrency: event-loop thread only, like the ``ReplicaManager``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.log import LogConfig
from tickwheel.purgatory import TopicPartitionOperationKey
from tickwheel.replica._leader_and_isr import LeaderAndIsr
from tickwheel.replica._manager import ReplicaManager
from tickwheel.replica._partition import Partition, ReplicaState
from tickwheel.replica._types import TopicPartition


def _hosted(
    replica_manager: ReplicaManager, tp: TopicPartition, log_config: LogConfig
) -> Partition:
    return replica_manager.host_partition(
        tp, log_config, min_insync_replicas=log_config.min_insync_replicas
    )


def _wake(replica_manager: ReplicaManager, tp: TopicPartition) -> None:
    key = TopicPartitionOperationKey(tp.topic, tp.partition)
    for purgatory in replica_manager.purgatories:
        purgatory.check_and_complete(key)


def become_leader(
    replica_manager: ReplicaManager,
    tp: TopicPartition,
    state: LeaderAndIsr,
    replicas: Sequence[int],
    log_config: LogConfig,
) -> Partition:
    """Lead ``tp`` at ``state``'s epoch with ``replicas`` assigned and ``state``'s ISR."""
    partition = _hosted(replica_manager, tp, log_config)
    local = replica_manager.broker_id
    partition.leader_id = local
    partition.leader_epoch = state.leader_epoch
    partition.assigned_replicas = tuple(replicas)
    partition.isr = set(state.isr) | {local}
    partition.min_insync_replicas = log_config.min_insync_replicas
    partition.remote_replicas = {
        broker_id: ReplicaState(broker_id) for broker_id in replicas if broker_id != local
    }
    partition.start_leader_epoch()
    partition.maybe_increment_leader_hw()
    _wake(replica_manager, tp)
    return partition


def become_follower(
    replica_manager: ReplicaManager,
    tp: TopicPartition,
    state: LeaderAndIsr,
    replicas: Sequence[int],
    log_config: LogConfig,
) -> Partition:
    """Follow ``state``'s leader for ``tp`` at its epoch."""
    partition = _hosted(replica_manager, tp, log_config)
    partition.leader_id = state.leader
    partition.leader_epoch = state.leader_epoch
    partition.assigned_replicas = tuple(replicas)
    partition.isr = set(state.isr)
    partition.min_insync_replicas = log_config.min_insync_replicas
    partition.remote_replicas = {}
    _wake(replica_manager, tp)
    return partition
