"""Feature versioning (KIP-584, KIP-1022): the features this broker supports and the
levels finalized for the whole cluster.

A feature is a name with integer levels; level 0 is "off". Each broker supports a range
of levels per feature and the cluster finalizes one level per feature, which every
broker advertises in ApiVersions (v3+: ``supported_features``, ``finalized_features``,
``finalized_features_epoch``) and clients read to know what they may use. tickwheel
finalizes the features of Kafka 4.x's broker that describe what it serves, and not
``metadata.version`` (a KRaft record-format level a ZooKeeper-mode broker has no use
for; asking to set it is refused as for any feature not supported):

====================================  =========  =======  ===============================
feature                               supported  default  a level enables
====================================  =========  =======  ===============================
``eligible.leader.replicas.version``  0-1        1        1: eligible leader replicas
                                                          (KIP-966, in a cluster: the
                                                          controller keeps them; 0
                                                          clears them)
``group.version``                     0-1        1        1: the consumer group protocol
                                                          (KIP-848)
``share.version``                     0-1        1        1: share groups (KIP-932)
``transaction.version``               0-2        2        1: flexible transaction-log
                                                          records; 2: transactions v2
                                                          (KIP-890 part 2: partitions
                                                          added by their leaders at
                                                          Produce v12, an epoch bump per
                                                          EndTxn v5, TxnOffsetCommit v5)
====================================  =========  =======  ===============================

A new cluster starts at the defaults, as a new Kafka 4.3 cluster is formatted at its
latest production levels (eligible leader replicas are on in a new cluster from Kafka
4.1). Clients read ``transaction.version`` to choose the transaction protocol (a Java
client uses version 2 at level 2); the broker serves both protocols at every level,
each transaction by the versions its client sends.
The levels change only through UpdateFeatures (``kafka-features.sh upgrade`` /
``downgrade``), checked here as Kafka's controller checks them (``plan_update``): a
level outside the supported range, a lower level asked as an upgrade, or a higher one
asked as a downgrade fails the whole request with INVALID_UPDATE_VERSION and Kafka's
message; safe and unsafe downgrades are the same for these features. Each change
raises the epoch by one. At level 0 a group feature turns its protocol off
(``server.apis._feature_gate``).

Where they are kept: on a single node in the topic registry file
(``TopicRegistry.set_finalized_features``), in a cluster in ZooKeeper's ``/feature``
znode, whose version is the epoch (``ClusterNode.update_features``).

Concurrency: pure values and functions, safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from tickwheel.cluster import ELR_FEATURE

ELIGIBLE_LEADER_REPLICAS_VERSION: Final = ELR_FEATURE
GROUP_VERSION: Final = "group.version"
SHARE_VERSION: Final = "share.version"
TRANSACTION_VERSION: Final = "transaction.version"


@dataclass(frozen=True, slots=True)
class SupportedFeature:
    """The levels of one feature this broker supports, and a new cluster's level."""

    name: str
    min_level: int
    max_level: int
    default_level: int

    def describe_range(self) -> str:
        """The range as Kafka writes it (``0-1``; one level alone: ``1``)."""
        if self.min_level == self.max_level:
            return str(self.min_level)
        return f"{self.min_level}-{self.max_level}"


SUPPORTED_FEATURES: Final = (
    SupportedFeature(ELIGIBLE_LEADER_REPLICAS_VERSION, 0, 1, 1),
    SupportedFeature(GROUP_VERSION, 0, 1, 1),
    SupportedFeature(SHARE_VERSION, 0, 1, 1),
    SupportedFeature(TRANSACTION_VERSION, 0, 2, 2),
)
_SUPPORTED_BY_NAME: Final = {feature.name: feature for feature in SUPPORTED_FEATURES}
UNKNOWN_EPOCH: Final = -1
"""Kafka's epoch of finalized features not known (yet)."""


class UpgradeType(enum.IntEnum):
    """UpdateFeatures' ``upgrade_type`` (v1+); v0's ``allow_downgrade`` is SAFE_DOWNGRADE."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The cluster's finalized levels at ``epoch``; a feature absent is at level 0."""

    epoch: int
    levels: Mapping[str, int] = field(default_factory=dict)

    def level(self, name: str) -> int:
        """The finalized level of ``name`` (0: not finalized)."""
        return self.levels.get(name, 0)


def default_levels() -> dict[str, int]:
    """A new cluster's finalized levels (features at level 0 left out)."""
    return {f.name: f.default_level for f in SUPPORTED_FEATURES if f.default_level > 0}


def initial_features() -> FinalizedFeatures:
    """A new single node's finalized features: the defaults, at epoch 0."""
    return FinalizedFeatures(0, default_levels())


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """One asked change: ``feature`` to ``max_level`` (0: not finalized) by ``upgrade_type``
    (an int as sent: a value that is no ``UpgradeType`` is refused)."""

    feature: str
    max_level: int
    upgrade_type: int


class FeatureUpdateError(Exception):
    """An update refused: Kafka's INVALID_UPDATE_VERSION, with its message."""


def _refuse(update: FeatureUpdate, reason: str) -> FeatureUpdateError:
    return FeatureUpdateError(
        f"Invalid update version {update.max_level} for feature {update.feature}. {reason}"
    )


def _check(update: FeatureUpdate, current_level: int, broker_id: int) -> None:
    if update.upgrade_type not in tuple(UpgradeType):
        raise _refuse(update, "The controller does not support the given upgrade type.")
    if update.max_level < 0:
        raise _refuse(update, "A feature version cannot be less than 0.")
    supported = _SUPPORTED_BY_NAME.get(update.feature)
    if supported is None:
        raise _refuse(update, f"Broker {broker_id} does not support this feature.")
    if not supported.min_level <= update.max_level <= supported.max_level:
        raise _refuse(
            update, f"Broker {broker_id} only supports versions {supported.describe_range()}"
        )
    upgrading = update.upgrade_type == UpgradeType.UPGRADE
    if update.max_level < current_level and upgrading:
        raise _refuse(
            update,
            "Can't downgrade the version of this feature without setting the upgrade type "
            "to either safe or unsafe downgrade.",
        )
    if update.max_level > current_level and not upgrading:
        raise _refuse(update, "Can't downgrade to a newer version.")


def plan_update(
    current: FinalizedFeatures, updates: Sequence[FeatureUpdate], broker_id: int
) -> dict[str, int]:
    """The finalized levels after ``updates`` (features at level 0 left out), or
    ``FeatureUpdateError`` for the first update refused (then none is made)."""
    levels = dict(current.levels)
    for update in updates:
        _check(update, current.level(update.feature), broker_id)
        levels[update.feature] = update.max_level
    return {name: level for name, level in sorted(levels.items()) if level > 0}
