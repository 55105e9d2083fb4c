"""The rules of config alteration without a broker: IncrementalAlterConfigs operations
against a model, and where DescribeConfigs says each value comes from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.cluster import DEFAULT_BROKER_ENTITY
from tickwheel.server import BrokerConfig
from tickwheel.server.config._admin import (
    ConfigAlterError,
    OpType,
    incremental,
    replace_all,
)
from tickwheel.server.config._dynamic import (
    DescribeSource,
    DynamicBrokerConfig,
)

POLICIES = st.sampled_from(["delete", "compact"])
OPS = st.lists(
    st.tuples(
        st.sampled_from([OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT]), POLICIES
    ),
    max_size=6,
)


@given(OPS)
def test_list_operations_match_a_model_of_ordered_sets(ops: list[tuple[OpType, str]]) -> None:
    current: dict[str, str] = {}
    model: list[str] | None = None  # None: no override, the default "delete" applies
    for op, value in ops:
        current = incremental([("cleanup.policy", op, value)])(
            current, {"cleanup.policy": "delete"}
        )
        base = ["delete"] if model is None else model
        if op == OpType.SET:
            model = [value]
        elif op == OpType.DELETE:
            model = None
        elif op == OpType.APPEND:
            model = base + ([] if value in base else [value])
        else:
            model = [item for item in base if item != value]
        expected = None if model is None else ",".join(model)
        assert current.get("cleanup.policy") == expected


def test_refusals_name_the_key() -> None:
    with pytest.raises(ConfigAlterError, match="append is not allowed for config key: retention"):
        incremental([("retention.ms", OpType.APPEND, "5")])
    with pytest.raises(ConfigAlterError, match="duplicate config keys"):
        incremental([("retention.ms", OpType.SET, "5"), ("retention.ms", OpType.DELETE, None)])
    with pytest.raises(ConfigAlterError, match="Null value"):
        replace_all([("retention.ms", None)])
    assert replace_all([("segment.ms", "5")])({"retention.ms": "1"}, {}) == {"segment.ms": "5"}


def test_sources_follow_kafkas_precedence() -> None:
    static = BrokerConfig.from_properties({"log.retention.ms": "1000"})
    dynamic = DynamicBrokerConfig(static)

    def sources(overrides: dict[str, str]) -> list[tuple[str, DescribeSource]]:
        chain = dynamic.topic_chain("retention.ms", overrides, "")
        return [(s.name, s.source) for s in chain]

    assert sources({}) == [
        ("log.retention.ms", DescribeSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", DescribeSource.DEFAULT_CONFIG),
    ]
    dynamic.set(DEFAULT_BROKER_ENTITY, {"log.retention.ms": "2000"})
    dynamic.set("0", {"log.retention.ms": "3000"})
    assert dynamic.current.log_retention_ms == 3000
    assert [source for _, source in sources({"retention.ms": "4000"})] == [
        DescribeSource.DYNAMIC_TOPIC_CONFIG,
        DescribeSource.DYNAMIC_BROKER_CONFIG,
        DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        DescribeSource.STATIC_BROKER_CONFIG,
        DescribeSource.DEFAULT_CONFIG,
    ]
    dynamic.set("0", {})
    assert dynamic.current.log_retention_ms == 2000
    assert dynamic.broker_chain("broker.id")[0].source == DescribeSource.DEFAULT_CONFIG
