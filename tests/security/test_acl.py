"""The ACL model: Kafka's codes and names, what a binding may hold, what a filter selects."""

from __future__ import annotations

import pytest

from tickwheel.security import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
)

ANY_BINDING = AclBindingFilter(
    ResourceType.ANY,
    None,
    PatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)
ALLOW_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def name_filter(name: str | None, pattern_type: PatternType) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        name,
        pattern_type,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def test_wire_codes_are_kafkas() -> None:
    assert ResourceType.TOPIC == 2
    assert ResourceType.CLUSTER == 4
    assert ResourceType.USER == 7
    assert PatternType.MATCH == 2
    assert PatternType.PREFIXED == 4
    assert AclOperation.IDEMPOTENT_WRITE == 12
    assert AclOperation.TWO_PHASE_COMMIT == 15
    assert AclPermissionType.ALLOW == 3
    assert ResourceType.from_code(99) == ResourceType.UNKNOWN


def test_names_are_kafkas_pascal_case_and_parse_back() -> None:
    assert ResourceType.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert AclOperation.CLUSTER_ACTION.pascal_name == "ClusterAction"
    assert AclOperation.from_name("DescribeConfigs") == AclOperation.DESCRIBE_CONFIGS
    assert AclOperation.from_name("DESCRIBE_CONFIGS") == AclOperation.DESCRIBE_CONFIGS
    with pytest.raises(AclError):
        AclPermissionType.from_name("Maybe")


def test_pattern_prints_as_the_audit_line_writes_it() -> None:
    assert str(topic("orders")) == "Topic:LITERAL:orders"


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (AclBinding(topic(""), ALLOW_READ), "empty resource name"),
        (
            AclBinding(ResourcePattern(ResourceType.CLUSTER, "x", PatternType.LITERAL), ALLOW_READ),
            "kafka-cluster",
        ),
        (AclBinding(topic("t", PatternType.MATCH), ALLOW_READ), "only for filters"),
        (
            AclBinding(ResourcePattern(ResourceType.ANY, "t", PatternType.LITERAL), ALLOW_READ),
            "concrete",
        ),
        (
            AclBinding(
                topic("t"),
                AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "Type:name",
        ),
        (
            AclBinding(
                topic("t"),
                AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
            ),
            "only for filters",
        ),
        (
            AclBinding(
                topic("t"),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.UNKNOWN),
            ),
            "only for filters",
        ),
    ],
)
def test_bindings_kafka_refuses(binding: AclBinding, reason: str) -> None:
    with pytest.raises(AclError, match=reason):
        binding.validate()


def test_match_selects_every_pattern_that_applies_to_a_resource() -> None:
    match = name_filter("orders-eu", PatternType.MATCH)
    assert match.matches_pattern(topic("orders-eu"))
    assert match.matches_pattern(topic("*"))
    assert match.matches_pattern(topic("orders", PatternType.PREFIXED))
    assert match.matches_pattern(topic("orders-eu", PatternType.PREFIXED))
    assert not match.matches_pattern(topic("orders"))
    assert not match.matches_pattern(topic("orders-eu-2", PatternType.PREFIXED))


def test_any_and_exact_pattern_filters_match_names_exactly() -> None:
    assert name_filter("orders", PatternType.ANY).matches_pattern(
        topic("orders", PatternType.PREFIXED)
    )
    assert not name_filter("orders", PatternType.ANY).matches_pattern(topic("*"))
    assert name_filter("orders", PatternType.LITERAL).matches_pattern(topic("orders"))
    assert not name_filter("orders", PatternType.LITERAL).matches_pattern(
        topic("orders", PatternType.PREFIXED)
    )
    assert name_filter(None, PatternType.PREFIXED).matches_pattern(topic("x", PatternType.PREFIXED))


def test_entry_filter_takes_values_literally() -> None:
    wildcard = AccessControlEntry("User:*", "*", AclOperation.ALL, AclPermissionType.DENY)
    alice = AclBindingFilter(
        ResourceType.ANY,
        None,
        PatternType.ANY,
        "User:alice",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert alice.matches_entry(ALLOW_READ)
    assert not alice.matches_entry(wildcard)
    assert ANY_BINDING.matches(AclBinding(topic("t"), wildcard))


def test_a_filter_with_an_unknown_code_is_invalid() -> None:
    bad = AclBindingFilter(
        ResourceType.UNKNOWN,
        None,
        PatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    with pytest.raises(AclError, match="unknown elements"):
        bad.validate()
    ANY_BINDING.validate()


def test_entries_round_trip_through_kafkas_json() -> None:
    entries = {
        ALLOW_READ,
        AccessControlEntry(
            "User:*", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY
        ),
    }
    data = encode_entries(entries)
    assert b'"operation":"IdempotentWrite"' in data
    assert b'"permissionType":"Deny"' in data
    assert decode_entries(data) == entries
    with pytest.raises(AclError):
        decode_entries(b'{"version": 2, "acls": []}')
