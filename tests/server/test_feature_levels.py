"""Feature updates planned as Kafka's controller plans them (no broker)."""

from __future__ import annotations

import pytest

from tickwheel.server._features import (
    SUPPORTED_FEATURES,
    FeatureUpdate,
    FeatureUpdateError,
    FinalizedFeatures,
    UpgradeType,
    initial_features,
    plan_update,
)

BROKER_ID = 7


def test_a_new_cluster_finalizes_what_is_served_transactions_v2_included() -> None:
    assert initial_features() == FinalizedFeatures(
        0,
        {
            "eligible.leader.replicas.version": 1,
            "group.version": 1,
            "share.version": 1,
            "transaction.version": 2,
        },
    )
    assert {f.name: (f.min_level, f.max_level) for f in SUPPORTED_FEATURES} == {
        "eligible.leader.replicas.version": (0, 1),
        "group.version": (0, 1),
        "share.version": (0, 1),
        "transaction.version": (0, 2),
    }


def test_a_plan_drops_level_0_and_keeps_the_rest() -> None:
    current = FinalizedFeatures(4, {"group.version": 1, "share.version": 1})
    updates = [
        FeatureUpdate("share.version", 0, UpgradeType.UNSAFE_DOWNGRADE),
        FeatureUpdate("transaction.version", 1, UpgradeType.UPGRADE),
    ]
    assert plan_update(current, updates, BROKER_ID) == {
        "group.version": 1,
        "transaction.version": 1,
    }
    # Asking for the level already finalized is no change, whatever the type.
    same = [FeatureUpdate("group.version", 1, UpgradeType.SAFE_DOWNGRADE)]
    assert plan_update(current, same, BROKER_ID) == dict(current.levels)


def test_the_first_refusal_names_the_broker_and_the_range() -> None:
    current = FinalizedFeatures(0, {"transaction.version": 1})
    with pytest.raises(FeatureUpdateError) as refused:
        plan_update(current, [FeatureUpdate("transaction.version", 3, 1)], BROKER_ID)
    assert str(refused.value) == (
        "Invalid update version 3 for feature transaction.version. "
        "Broker 7 only supports versions 0-2"
    )
