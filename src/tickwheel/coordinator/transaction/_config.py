"""Settings of the transaction coordinator, under Kafka's broker property names.

Each field is a Kafka property with dots as underscores, with Kafka's default, except
the replication factor and min ISR of ``__transaction_state``: Kafka's defaults (3 and
2) are what a broker in a ZooKeeper cluster gets (``BrokerConfig`` sets them); a single
broker keeps 1, as the ``server.properties`` Kafka ships does.

Kafka scans for timed-out transactions and expired ids every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and
``transaction.remove.expired.transaction.cleanup.interval.ms``; tickwheel arms one timer
task per transaction and per idle id instead (``_timeouts``), so a transaction is
aborted within a tick of its timeout. The first interval is how long a timed-out
transaction whose abort failed waits before the next attempt (when Kafka's scan would
find it again); the second is accepted and unused.

Frozen value object; share it freely between threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tickwheel._settings import int_settings

_MIB = 1024 * 1024

CLUSTER_TRANSACTION_STATE_REPLICATION_FACTOR = 3
"""Kafka's default ``transaction.state.log.replication.factor`` (a ZooKeeper cluster's)."""
CLUSTER_TRANSACTION_STATE_MIN_ISR = 2
"""Kafka's default ``transaction.state.log.min.isr`` (a ZooKeeper cluster's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionConfig:
    """Coordinator settings; each field is the Kafka property with dots as underscores."""

    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 1
    transaction_state_log_min_isr: int = 1
    transaction_state_log_segment_bytes: int = 100 * _MIB
    transaction_state_log_load_buffer_size: int = 5 * _MIB
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100

    def __post_init__(self) -> None:
        if self.transaction_state_log_num_partitions <= 0:
            raise ValueError("transaction.state.log.num.partitions must be positive")
        if self.transaction_state_log_replication_factor <= 0:
            raise ValueError("transaction.state.log.replication.factor must be positive")
        if self.transaction_max_timeout_ms <= 0:
            raise ValueError("transaction.max.timeout.ms must be positive")
        if self.transactional_id_expiration_ms <= 0:
            raise ValueError("transactional.id.expiration.ms must be positive")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> TransactionConfig:
        """Build from Kafka's dotted property names; other properties are ignored."""
        return cls(**int_settings(cls, properties))

    def topic_configs(self) -> dict[str, str]:
        """``__transaction_state``'s topic configs (Kafka's ``transactionTopicConfigs``)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(self.transaction_state_log_min_isr),
            "segment.bytes": str(self.transaction_state_log_segment_bytes),
            "unclean.leader.election.enable": "false",
        }
