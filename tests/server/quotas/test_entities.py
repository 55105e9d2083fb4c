"""Quota entities: their paths, the checks Kafka makes, and Kafka's 8-level precedence."""

from __future__ import annotations

import pytest

from tickwheel.server.quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    QuotaEntity,
    QuotaEntityError,
    entity_path,
    find_quota,
    make_entity,
    parse_entity_path,
    validate_quota,
)

ALICE, APP = "alice", "app"


def _entity(user: str | bool | None = False, client: str | bool | None = False) -> QuotaEntity:
    """An entity with a user and/or client id (None: the default; False: absent)."""
    pairs: list[tuple[str, str | None]] = []
    if user is not False:
        pairs.append((USER, None if user is None else str(user)))
    if client is not False:
        pairs.append((CLIENT_ID, None if client is None else str(client)))
    return make_entity(pairs)


LEVELS: list[tuple[QuotaEntity, tuple[str, str]]] = [
    (_entity(ALICE, APP), (ALICE, APP)),
    (_entity(ALICE, None), (ALICE, APP)),
    (_entity(ALICE), (ALICE, "")),
    (_entity(None, APP), (ALICE, APP)),
    (_entity(None, None), (ALICE, APP)),
    (_entity(None), (ALICE, "")),
    (_entity(client=APP), ("", APP)),
    (_entity(client=None), ("", APP)),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_entity_that_sets_the_key_applies(level: int) -> None:
    quotas = {
        entity: {PRODUCER_BYTE_RATE: float(index)} for index, (entity, _) in enumerate(LEVELS)
    }
    for entity, _ in LEVELS[:level]:
        del quotas[entity]
    tags = LEVELS[level][1]
    assert find_quota(quotas, PRODUCER_BYTE_RATE, ALICE, APP) == (tags, float(level))


def test_another_key_of_a_more_specific_entity_does_not_hide_the_quota() -> None:
    quotas = {
        _entity(ALICE, APP): {"consumer_byte_rate": 10.0},
        _entity(client=None): {PRODUCER_BYTE_RATE: 5.0},
    }
    assert find_quota(quotas, PRODUCER_BYTE_RATE, ALICE, APP) == (("", APP), 5.0)
    assert find_quota(quotas, "request_percentage", ALICE, APP) is None


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (_entity(ALICE), "users/alice"),
        (_entity(None), "users/<default>"),
        (_entity("a b/c", None), "users/a%20b%2Fc/clients/<default>"),
        (_entity(client="<default>"), "clients/%3Cdefault%3E"),
        (_entity(client=None), "clients/<default>"),
    ],
)
def test_entities_are_kept_under_kafka_s_paths(entity: QuotaEntity, path: str) -> None:
    assert entity_path(entity) == path
    assert parse_entity_path(path) == entity


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([(USER, "a"), (USER, "b")], "duplicate quota entity type 'user'"),
        ([("group", "g")], "unknown quota entity type 'group'"),
        ([(USER, "")], "empty user name"),
        ([], "at least one entity type"),
        ([("ip", "1.2.3.4"), (USER, "a")], "cannot be combined"),
    ],
)
def test_invalid_entities_are_refused(pairs: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaEntityError, match=message):
        make_entity(pairs)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("producer_bytes_rate", 1.0, "unknown quota key 'producer_bytes_rate'"),
        (PRODUCER_BYTE_RATE, 1.5, "whole number"),
        (PRODUCER_BYTE_RATE, 0.0, "positive"),
        ("request_percentage", -1.0, "positive"),
    ],
)
def test_invalid_quotas_are_refused(key: str, value: float, message: str) -> None:
    with pytest.raises(QuotaEntityError, match=message):
        validate_quota(key, value)
    validate_quota("request_percentage", 12.5)
