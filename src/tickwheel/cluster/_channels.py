"""The inter-broker channels: every set of connections a broker opens to the others, by
the client id it sends and the APIs it sends on them.

A broker talks to the other brokers of its cluster over four sets of channels
(``ClusterNode.inter_broker_channels``), each under a client id of its own that carries
the sending broker's id:

- the replica fetcher (``REPLICA_FETCHER``): Fetch and OffsetForLeaderEpoch to the
  leaders it follows;
- the transaction markers (``TXN_MARKERS``): WriteTxnMarkers from a transaction
  coordinator to the leaders of a transaction's partitions;
- the transaction verification (``TXN_VERIFICATION``): AddPartitionsToTxn from a
  partition leader to the transaction coordinator (KIP-890);
- the share state (``SHARE_STATE``): the share-group state APIs from a share-partition
  leader to the share coordinator.

Each channel starts with ApiVersions. The controller sends nothing over the wire: in
ZooKeeper mode its decisions reach the brokers through ZooKeeper's watches. The list is
what ``LocalCluster.isolate`` cuts: one fault rule closing each (client id, API) of a
channel, both ways, cuts the broker off from every inter-broker exchange while its
ZooKeeper session lives on.

Immutable; safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class InterBrokerChannel:
    """One set of inter-broker channels: its client id (``{}``: the sending broker's
    id) and the APIs (Kafka's names) it sends."""

    client_id_format: str
    apis: tuple[str, ...]

    def client_id(self, broker_id: int) -> str:
        """The client id broker ``broker_id`` sends on these channels."""
        return self.client_id_format.format(broker_id)


_HANDSHAKE: Final = "ApiVersions"

REPLICA_FETCHER: Final = InterBrokerChannel(
    "tickwheel-replica-{}", (_HANDSHAKE, "Fetch", "OffsetForLeaderEpoch")
)
TXN_MARKERS: Final = InterBrokerChannel("tickwheel-txn-markers-{}", (_HANDSHAKE, "WriteTxnMarkers"))
TXN_VERIFICATION: Final = InterBrokerChannel(
    "tickwheel-txn-verification-{}", (_HANDSHAKE, "AddPartitionsToTxn")
)
SHARE_STATE: Final = InterBrokerChannel(
    "tickwheel-share-state-{}",
    (
        _HANDSHAKE,
        "InitializeShareGroupState",
        "ReadShareGroupState",
        "WriteShareGroupState",
        "DeleteShareGroupState",
        "ReadShareGroupStateSummary",
    ),
)
INTER_BROKER_CHANNELS: Final = (REPLICA_FETCHER, TXN_MARKERS, TXN_VERIFICATION, SHARE_STATE)
"""Every set of channels a broker opens to the others."""
