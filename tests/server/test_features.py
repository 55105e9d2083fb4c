"""Finalized features on one broker: ApiVersions' feature fields, UpdateFeatures (over
the wire and through kafka-python's admin), and the levels kept over a restart."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

API_VERSIONS = ApiKey.API_VERSIONS
UPDATE_FEATURES = ApiKey.UPDATE_FEATURES
CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 68, 76
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
ELR = "eligible.leader.replicas.version"
SERVED = {ELR: 1, "group.version": 1, "share.version": 1, "transaction.version": 2}
ALL_FAILED = "The update failed for all features since the following feature had an error: "


def api_versions(client: WireClient, version: int = 4) -> Any:
    body = client.call(
        API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert body.error_code == ErrorCode.none
    return body


def finalized(client: WireClient) -> tuple[int, dict[str, int]]:
    """The finalized epoch and levels in a v4 ApiVersions answer (min level = max level)."""
    body = api_versions(client)
    assert all(f.min_version_level == f.max_version_level for f in body.finalized_features)
    levels = {f.name: f.max_version_level for f in body.finalized_features}
    return body.finalized_features_epoch, levels


def update(
    client: WireClient,
    updates: list[tuple[str, int, int]],
    *,
    version: int = 1,
    validate_only: bool = False,
) -> Any:
    keys = [
        {"feature": f, "max_version_level": level, "upgrade_type": t} for f, level, t in updates
    ]
    return client.call(
        UPDATE_FEATURES,
        version,
        {"feature_updates": keys, "timeout": 5000, "validate_only": validate_only},
    )


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[WireClient]:
    wire = WireClient(tickwheel_broker.bootstrap_servers)
    yield wire
    wire.close()


def test_a_new_broker_advertises_the_levels_it_serves(client: WireClient) -> None:
    v4 = api_versions(client, 4)
    assert {f.name: (f.min_version, f.max_version) for f in v4.supported_features} == {
        ELR: (0, 1),
        "group.version": (0, 1),
        "share.version": (0, 1),
        "transaction.version": (0, 2),
    }
    assert finalized(client) == (0, SERVED)
    # Below v4 Kafka leaves out every supported range starting at 0; the finalized
    # levels stay.
    v3 = api_versions(client, 3)
    assert v3.supported_features == ()
    assert [(f.name, f.min_version_level, f.max_version_level) for f in v3.finalized_features] == [
        (name, level, level) for name, level in SERVED.items()
    ]
    assert v3.finalized_features_epoch == 0


REFUSALS = [
    (
        [("transaction.version", 3, UPGRADE)],
        "Invalid update version 3 for feature transaction.version. "
        "Broker 0 only supports versions 0-2",
    ),
    (
        [("metadata.version", 27, UPGRADE)],
        "Invalid update version 27 for feature metadata.version. "
        "Broker 0 does not support this feature.",
    ),
    (
        [("group.version", 0, UPGRADE)],
        "Invalid update version 0 for feature group.version. Can't downgrade the version of "
        "this feature without setting the upgrade type to either safe or unsafe downgrade.",
    ),
    (
        [("share.version", -1, UNSAFE_DOWNGRADE)],
        "Invalid update version -1 for feature share.version. "
        "A feature version cannot be less than 0.",
    ),
    (
        [("group.version", 1, 9)],
        "Invalid update version 1 for feature group.version. "
        "The controller does not support the given upgrade type.",
    ),
    (
        # All or none: the downgrade before the refused upgrade is not made either.
        [("share.version", 0, SAFE_DOWNGRADE), ("transaction.version", 3, UPGRADE)],
        "Invalid update version 3 for feature transaction.version. "
        "Broker 0 only supports versions 0-2",
    ),
]


@pytest.mark.parametrize(("updates", "reason"), REFUSALS)
def test_a_refused_update_changes_nothing(
    client: WireClient, updates: list[tuple[str, int, int]], reason: str
) -> None:
    response = update(client, updates)
    assert (response.error_code, response.error_message, response.results) == (
        ErrorCode.invalid_update_version,
        ALL_FAILED + reason,
        (),
    )
    assert finalized(client) == (0, SERVED)


def test_a_downgrade_asked_as_one_may_not_raise_a_level(client: WireClient) -> None:
    assert update(client, [("share.version", 0, UNSAFE_DOWNGRADE)]).error_code == ErrorCode.none
    response = update(client, [("share.version", 1, SAFE_DOWNGRADE)])
    assert response.error_message == (
        ALL_FAILED + "Invalid update version 1 for feature share.version. "
        "Can't downgrade to a newer version."
    )
    assert finalized(client) == (
        1,
        {ELR: 1, "group.version": 1, "transaction.version": 2},
    )


def test_each_version_answers_as_kafka_does(client: WireClient) -> None:
    validated = update(client, [("group.version", 0, SAFE_DOWNGRADE)], validate_only=True)
    assert (validated.error_code, validated.results[0].feature) == (ErrorCode.none, "group.version")
    assert finalized(client) == (0, SERVED)
    # v0: allow_downgrade is a safe downgrade; every feature asked is listed.
    v0 = client.call(
        UPDATE_FEATURES,
        0,
        {
            "timeout": 5000,
            "feature_updates": [
                {"feature": "group.version", "max_version_level": 0, "allow_downgrade": True}
            ],
        },
    )
    assert [(r.feature, r.error_code, r.error_message) for r in v0.results] == [
        ("group.version", ErrorCode.none, None)
    ]
    assert finalized(client) == (1, {ELR: 1, "share.version": 1, "transaction.version": 2})
    # v2 answers a success with its top-level error code alone.
    v2 = update(client, [("group.version", 1, UPGRADE)], version=2)
    assert (v2.error_code, v2.error_message) == (ErrorCode.none, None)
    assert not hasattr(v2, "results")
    assert finalized(client) == (2, SERVED)
    # Asking for the levels already finalized changes nothing, not even the epoch.
    assert update(client, [("share.version", 1, UPGRADE)]).error_code == ErrorCode.none
    assert finalized(client) == (2, SERVED)


def heartbeat_errors(client: WireClient) -> tuple[int, int]:
    """The error codes of a first consumer-protocol and a first share heartbeat."""
    member = {"member_id": uuid.uuid4().hex, "member_epoch": 0, "rack_id": None}
    consumer = client.call(
        CONSUMER_GROUP_HEARTBEAT,
        1,
        {
            **member,
            "group_id": "gated-consumers",
            "instance_id": None,
            "rebalance_timeout": datetime.timedelta(seconds=30),
            "subscribed_topic_names": ["gated"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
    )
    share = client.call(
        SHARE_GROUP_HEARTBEAT,
        1,
        {**member, "group_id": "gated-share", "subscribed_topic_names": ["gated"]},
    )
    return consumer.error_code, share.error_code


def test_a_feature_at_level_0_turns_its_group_protocol_off(client: WireClient) -> None:
    off = [("group.version", 0, SAFE_DOWNGRADE), ("share.version", 0, SAFE_DOWNGRADE)]
    assert update(client, off).error_code == ErrorCode.none
    assert heartbeat_errors(client) == (ErrorCode.unsupported_version,) * 2
    on = [("group.version", 1, UPGRADE), ("share.version", 1, UPGRADE)]
    assert update(client, on).error_code == ErrorCode.none
    assert ErrorCode.unsupported_version not in heartbeat_errors(client)


def test_kafka_python_describes_and_updates_the_features(
    tickwheel_broker: BackgroundBroker,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=tickwheel_broker.bootstrap_servers)
    try:
        assert admin.describe_features()["transaction.version"] == {
            "supported": (0, 2),
            "finalized": (2, 2),
            "finalized_epoch": 0,
        }
        assert admin.update_features({"share.version": ("SAFE_DOWNGRADE", 0)}) == {
            "share.version": "OK"
        }
        described = admin.describe_features()
        assert described["share.version"] == {"supported": (0, 1)}
        assert described["group.version"]["finalized_epoch"] == 1
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"transaction.version": 3})
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
    finally:
        admin.close()


def test_the_finalized_levels_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with BackgroundBroker(config) as broker:
        client = WireClient(broker.bootstrap_servers)
        try:
            assert update(client, [("group.version", 0, SAFE_DOWNGRADE)]).error_code == 0
            assert finalized(client) == (1, {ELR: 1, "share.version": 1, "transaction.version": 2})
        finally:
            client.close()
    with BackgroundBroker(config) as broker:
        client = WireClient(broker.bootstrap_servers)
        try:
            assert finalized(client) == (1, {ELR: 1, "share.version": 1, "transaction.version": 2})
        finally:
            client.close()
