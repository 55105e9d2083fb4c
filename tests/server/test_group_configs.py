"""Group configs (resource type 32): set, read back, bounded by the broker's settings,
kept over a restart, through confluent-kafka's AdminClient."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.server.config._groups import (
    GroupConfigError,
    GroupConfigs,
    group_defaults,
    validate_group_overrides,
)
from tickwheel.share_delivery import by_duration_ms

TIMEOUT_S = 15.0
GROUP_CONFIG_SOURCE = 8
DEFAULT_CONFIG_SOURCE = 5


def test_defaults_come_from_the_broker_settings() -> None:
    defaults = group_defaults({"group.share.record.lock.duration.ms": "20000"})
    assert defaults["share.record.lock.duration.ms"] == "20000"
    assert defaults["consumer.session.timeout.ms"] == "45000"
    assert defaults["share.auto.offset.reset"] == "latest"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no.such.config": "1"}, "Unknown group config"),
        ({"share.record.lock.duration.ms": "ten"}, "Not a number"),
        ({"share.record.lock.duration.ms": "14999"}, "between 15000"),
        ({"consumer.session.timeout.ms": "60001"}, "and 60000"),
        ({"share.auto.offset.reset": "newest"}, "Invalid value newest"),
        ({"share.auto.offset.reset": "by_duration:1h"}, "Invalid value"),
        ({"share.isolation.level": "serializable"}, "Invalid value"),
        ({"share.auto.offset.reset": "by_duration:P"}, "Invalid value"),
    ],
)
def test_invalid_overrides_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(GroupConfigError, match=message):
        validate_group_overrides(overrides, {})


def test_bounds_follow_the_broker_settings() -> None:
    broker = {"group.share.min.record.lock.duration.ms": "1000"}
    validate_group_overrides({"share.record.lock.duration.ms": "1000"}, broker)
    validate_group_overrides({"share.auto.offset.reset": "by_duration:PT1H30M"}, broker)
    validate_group_overrides({"share.auto.offset.reset": "by_duration:P1DT2.5S"}, broker)


@pytest.mark.parametrize(
    ("reset", "duration_ms"),
    [
        ("by_duration:PT1H30M", 5_400_000),
        ("by_duration:P1DT2.5S", 86_402_500),
        ("by_duration:PT0S", 0),
        ("by_duration:1h", None),
        ("latest", None),
    ],
)
def test_by_duration_resets_are_iso_8601_durations(reset: str, duration_ms: int | None) -> None:
    assert by_duration_ms(reset) == duration_ms


def test_effective_values_are_override_else_default() -> None:
    properties = {"group.consumer.session.timeout.ms": "50000"}
    configs = GroupConfigs(lambda: properties)
    configs.set("g", {"share.auto.offset.reset": "earliest"})
    assert configs.effective("g")["share.auto.offset.reset"] == "earliest"
    assert configs.effective("g")["consumer.session.timeout.ms"] == "50000"
    assert configs.effective("other")["share.auto.offset.reset"] == "latest"
    assert configs.overrides_of("g") == {"share.auto.offset.reset": "earliest"}
    assert configs.overrides_of("other") == {}
    configs.set("g", {})
    assert "g" not in configs.overrides


def _set(admin: AdminClient, group: str, entries: list[ConfigEntry]) -> None:
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def _described(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    (future,) = admin.describe_configs([resource]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(TIMEOUT_S).items()}


@pytest.mark.integration
def test_group_configs_through_the_admin_client_and_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        before = _described(admin, "queue")
        assert before["share.auto.offset.reset"] == ("latest", DEFAULT_CONFIG_SOURCE)
        _set(
            admin,
            "queue",
            [
                ConfigEntry(
                    "share.auto.offset.reset",
                    "earliest",
                    incremental_operation=AlterConfigOpType.SET,
                ),
                ConfigEntry(
                    "share.record.lock.duration.ms",
                    "20000",
                    incremental_operation=AlterConfigOpType.SET,
                ),
            ],
        )
        with pytest.raises(KafkaException) as refused:
            _set(
                admin,
                "queue",
                [
                    ConfigEntry(
                        "share.record.lock.duration.ms",
                        "1",
                        incremental_operation=AlterConfigOpType.SET,
                    )
                ],
            )
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        after = _described(admin, "queue")
        assert after["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG_SOURCE)
        assert after["share.record.lock.duration.ms"] == ("20000", GROUP_CONFIG_SOURCE)
        assert after["share.session.timeout.ms"] == ("45000", DEFAULT_CONFIG_SOURCE)
        _set(
            admin,
            "queue",
            [
                ConfigEntry(
                    "share.auto.offset.reset", None, incremental_operation=AlterConfigOpType.DELETE
                )
            ],
        )
        assert _described(admin, "queue")["share.auto.offset.reset"] == (
            "latest",
            DEFAULT_CONFIG_SOURCE,
        )
