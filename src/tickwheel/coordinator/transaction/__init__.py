"""tickwheel.coordinator.transaction: Kafka's transaction coordinator (versions 0-2).

A transactional producer's broker-side partner: it hands out producer ids and epochs
per ``transactional.id`` (fencing zombies), records which partitions a transaction
touched, and on EndTxn writes COMMIT or ABORT markers to them. Its state lives in the
internal topic ``__transaction_state`` (one compacted record per transactional id, in
Kafka's byte format), so a new leader of a partition of that topic takes over its
transactions. The modules, lowest first:

- ``_config`` -- ``TransactionConfig`` (Kafka's ``transaction.*`` properties).
- ``_metadata`` -- states, ``TransactionMetadata`` and its prepare/complete transitions.
- ``_log`` -- the ``__transaction_state`` key/value codec and record batches.
- ``_timeouts`` -- ``transaction.timeout.ms`` and ``transactional.id.expiration.ms`` as
  timer tasks on the hierarchical wheel (Kafka scans periodically instead).
- ``_state_manager`` -- the cached ids per led partition; load, unload, append.
- ``_markers`` -- markers to the transaction's partitions (local through the
  ``ReplicaManager``, remote through a ``MarkerTransport``), then completion.
- ``_coordinator`` -- the request logic in Kafka's validation order.
- ``_verification`` -- ``PartitionVerifier``: a partition leader's questions to the
  coordinator (local, or AddPartitionsToTxn v5 batched per coordinator broker).
- ``_apis`` -- the requests as kio entities, with Kafka's version down-maps.
- ``_service`` -- the coordinator inside a broker.

Transaction versions 0/1 and 2 side by side, each transaction by the versions its
client sends. Version 2 (KIP-890 part 2, the broker's ``transaction.version`` feature
at 2): partitions and the group's offsets partition are added by the brokers that
receive a Produce v12 or TxnOffsetCommit v5 (``PartitionVerifier``), and each EndTxn
v5 bumps the epoch, answers it, and the markers carry it; the client version is kept
in ``__transaction_state`` (value version 1, ClientTransactionVersion). Part 1, for
every version: a partition leader verifies a transactional produce's partition with
the coordinator before the produce may open a transaction there (``verify_partitions``;
the leader's log keeps the guard), so a produce never added, or late after an abort,
cannot open a transaction no marker closes. A version 2 EndTxn whose epoch is exhausted
completes at a new producer id (``next_producer_id``). Not built: WriteTxnMarkers v2
(the markers' transaction version): markers go as v1, and a partition leader applies
the same rules to every marker (an epoch at least the producer's; a higher one moves
the producer to it, its next batch starting at sequence 0).

**Locks.** Everything runs on the broker's event-loop thread, so no transaction
metadata has a lock; what the group coordinator's lock rules protect against still
applies in this form: a transition is prepared completely before its append starts,
and no callback or append is issued from inside a half-made change, because on one
node an acks=all append (and the marker appends after it) completes inside the call.

Layering: imports ``replica``, ``log``, ``timer``, ``protocol`` and, of the group
coordinator's package, its hashing (``partition_for``), record batch builder,
``CoordinatorNode`` and ``CoordinatorLocator``; never ``server`` or ``cluster`` (the
broker injects the locator, the leader lookup and the marker transport).
"""

from tickwheel.coordinator.transaction._apis import (
    TRANSACTION_API_HANDLERS,
    TRANSACTION_API_NAMES,
    TRANSACTION_API_VERSIONS,
    TransactionApiHandler,
    TransactionApis,
    client_error,
    described_state,
)
from tickwheel.coordinator.transaction._config import (
    CLUSTER_TRANSACTION_STATE_MIN_ISR,
    CLUSTER_TRANSACTION_STATE_REPLICATION_FACTOR,
    TransactionConfig,
)
from tickwheel.coordinator.transaction._coordinator import (
    DescribedTransaction,
    EndTxnResult,
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionCoordinator,
)
from tickwheel.coordinator.transaction._log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tickwheel.coordinator.transaction._markers import (
    LeaderLookup,
    MarkerTransport,
    TransactionMarkerChannelManager,
)
from tickwheel.coordinator.transaction._metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from tickwheel.coordinator.transaction._service import TransactionService
from tickwheel.coordinator.transaction._state_manager import TransactionStateManager
from tickwheel.coordinator.transaction._timeouts import TxnTimeouts
from tickwheel.coordinator.transaction._verification import (
    PartitionVerifier,
    TxnPartitions,
    VerificationTransport,
    client_answer,
)

__all__ = [
    "CLUSTER_TRANSACTION_STATE_MIN_ISR",
    "CLUSTER_TRANSACTION_STATE_REPLICATION_FACTOR",
    "TRANSACTION_API_HANDLERS",
    "TRANSACTION_API_NAMES",
    "TRANSACTION_API_VERSIONS",
    "TRANSACTION_STATE_TOPIC",
    "DescribedTransaction",
    "EndTxnResult",
    "IllegalTransitionError",
    "InitProducerIdResult",
    "LeaderLookup",
    "ListTransactionsResult",
    "MarkerTransport",
    "PartitionVerifier",
    "TransactionApiHandler",
    "TransactionApis",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionLogError",
    "TransactionLogValue",
    "TransactionMarkerChannelManager",
    "TransactionMetadata",
    "TransactionService",
    "TransactionState",
    "TransactionStateManager",
    "TxnPartitions",
    "TxnTimeouts",
    "TxnTransitMetadata",
    "VerificationTransport",
    "client_answer",
    "client_error",
    "decode_key",
    "decode_value",
    "described_state",
    "encode_key",
    "encode_value",
    "is_epoch_exhausted",
]
