"""The ACL znodes' paths and change notifications, in Kafka's ZooKeeper layout."""

from __future__ import annotations

import json

import pytest

from tickwheel.cluster._acls import (
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    acl_path,
    decode_change,
    encode_change,
)
from tickwheel.security import AclError, PatternType, ResourcePattern, ResourceType


def test_paths_are_kafkas() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-1", PatternType.LITERAL)
    prefixed = ResourcePattern(ResourceType.GROUP, "pay", PatternType.PREFIXED)
    assert acl_path(literal) == "/kafka-acl/TransactionalId/tx-1"
    assert acl_path(prefixed) == "/kafka-acl-extended/prefixed/Group/pay"


@pytest.mark.parametrize("name", ["a/b", ".", ".."])
def test_names_that_are_no_single_znode_are_refused(name: str) -> None:
    with pytest.raises(AclError):
        acl_path(ResourcePattern(ResourceType.GROUP, name, PatternType.LITERAL))


def test_change_notifications_round_trip() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "orders:eu", PatternType.LITERAL)
    prefix, data = encode_change(literal)
    assert prefix == f"{LITERAL_CHANGES_PATH}/acl_changes_"
    assert data == b"TOPIC:orders:eu"
    assert decode_change(LITERAL_CHANGES_PATH, data) == literal
    # Kafka before 2.0 wrote the PascalCase type name.
    assert decode_change(LITERAL_CHANGES_PATH, b"Topic:orders") == ResourcePattern(
        ResourceType.TOPIC, "orders", PatternType.LITERAL
    )

    prefixed = ResourcePattern(ResourceType.GROUP, "pay", PatternType.PREFIXED)
    prefix, data = encode_change(prefixed)
    assert prefix == f"{EXTENDED_CHANGES_PATH}/acl_changes_"
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "pay",
        "patternType": "PREFIXED",
    }
    assert decode_change(EXTENDED_CHANGES_PATH, data) == prefixed
    with pytest.raises(AclError):
        decode_change(EXTENDED_CHANGES_PATH, b"{}")
    with pytest.raises(AclError):
        decode_change(LITERAL_CHANGES_PATH, b"no-separator")
