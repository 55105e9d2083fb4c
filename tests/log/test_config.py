"""LogConfig: Kafka's names, defaults and checks."""

from __future__ import annotations

import pytest

from tickwheel.log import LogConfig


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.max_message_bytes == 1048588
    assert config.index_interval_bytes == 4096
    assert config.retention_bytes == -1
    assert config.flush_messages == 2**63 - 1


def test_from_properties_takes_dotted_names_and_ignores_kafkas_others() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1024",
            "retention.ms": "-1",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete",
            "min.insync.replicas": "2",
        }
    )
    assert config.segment_bytes == 1024
    assert config.retention_ms == -1
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.min_insync_replicas == 2


@pytest.mark.parametrize(
    "properties",
    [
        {"segment.bytez": "1"},
        {"segment.bytes": "10"},
        {"segment.bytes": "lots"},
        {"message.timestamp.type": "Sometime"},
        {"retention.bytes": "-2"},
        {"flush.messages": "0"},
    ],
)
def test_bad_properties_are_rejected(properties: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"."):
        LogConfig.from_properties(properties)
