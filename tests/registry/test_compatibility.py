"""Avro's schema resolution rules and the seven compatibility levels, on parsed schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwheel.registry._avro import SchemaError, parse_avro, read_errors
from tickwheel.registry._compatibility import Compatibility, check


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


NAME = {"name": "name", "type": "string"}
AGE = {"name": "age", "type": "int"}
AGE_DEFAULT = {"name": "age", "type": "int", "default": 0}


def errors(reader: str, writer: str) -> list[str]:
    return read_errors(parse_avro(reader), parse_avro(writer))


def test_a_field_added_with_a_default_reads_old_data() -> None:
    assert errors(record(NAME, AGE_DEFAULT), record(NAME)) == []


def test_a_field_added_without_default_names_the_field_and_its_path() -> None:
    (reason,) = errors(record(NAME, AGE), record(NAME))
    assert "/fields/1" in reason
    assert "'age'" in reason


def test_a_removed_field_is_ignored_by_the_reader() -> None:
    assert errors(record(NAME), record(NAME, AGE)) == []


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int", "long"),
        ("int", "double"),
        ("long", "float"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    ],
)
def test_promotions(writer: str, reader: str) -> None:
    assert errors(json.dumps(reader), json.dumps(writer)) == []


def test_no_demotion() -> None:
    assert errors('"int"', '"long"') != []


def test_unions_every_writer_branch_must_be_readable() -> None:
    assert errors('["null", "string", "int"]', '["null", "string"]') == []
    assert errors('["null", "string"]', '["null", "string", "int"]') != []
    assert errors('["null", "long"]', '"int"') == []


def test_enums_need_the_writers_symbols_or_a_default() -> None:
    def enum(*symbols: str, **extra: Any) -> str:
        return json.dumps({"type": "enum", "name": "Suit", "symbols": list(symbols), **extra})

    assert errors(enum("A", "B", "C"), enum("A", "B")) == []
    assert errors(enum("A"), enum("A", "B")) != []
    assert errors(enum("A", "Z", default="Z"), enum("A", "B")) == []


def test_named_types_match_by_unqualified_name_or_alias() -> None:
    assert errors(record(NAME, namespace="a"), record(NAME, namespace="b")) == []
    assert errors(record(NAME, name="Person"), record(NAME)) != []
    assert errors(record(NAME, name="Person", aliases=["User"]), record(NAME)) == []


def test_fixed_sizes_arrays_and_maps() -> None:
    def fixed(size: int) -> str:
        return json.dumps({"type": "fixed", "name": "F", "size": size})

    assert errors(fixed(4), fixed(8)) != []
    assert errors('{"type": "array", "items": "long"}', '{"type": "array", "items": "int"}') == []
    assert errors('{"type": "map", "values": "int"}', '{"type": "map", "values": "string"}') != []


def test_recursive_types_terminate() -> None:
    node = record(
        {"name": "value", "type": "int"},
        {"name": "next", "type": ["null", "Node"], "default": None},
        name="Node",
    )
    assert errors(node, node) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"type": "record", "name": "R"}', "fields"),
        ('"nosuchtype"', "nosuchtype"),
        ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "unique"),
        ("5", "JSON string, object or array"),
        (record(NAME, NAME), "'name' twice"),
        (
            record({"name": "a", "type": "int", "default": "x"}),
            "Default value",
        ),
    ],
)
def test_invalid_schemas_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(SchemaError, match=reason):
        parse_avro(text)


V1 = record(NAME)
V2 = record(NAME, AGE_DEFAULT)
V3_DROPS_NAME = record(AGE_DEFAULT)


@pytest.mark.parametrize(
    ("level", "accepted"),
    [
        (Compatibility.NONE, True),
        # V3 reads V2 (name dropped) but V1 data lacks... nothing V3 needs: age has a default.
        (Compatibility.BACKWARD, True),
        (Compatibility.BACKWARD_TRANSITIVE, True),
        # V2 cannot read V3's data: 'name' has no default.
        (Compatibility.FORWARD, False),
        (Compatibility.FULL, False),
    ],
)
def test_levels_against_the_latest_or_all(level: Compatibility, accepted: bool) -> None:
    earlier = [parse_avro(V2), parse_avro(V1)]
    assert (check(level, parse_avro(V3_DROPS_NAME), earlier) == []) is accepted


def test_transitive_levels_check_every_earlier_version() -> None:
    v1 = record(NAME)
    v2 = record(NAME, {"name": "age", "type": "int", "default": 0})
    v3 = record(NAME, AGE)  # reads v2, not v1 (no default for age)
    earlier = [parse_avro(v2), parse_avro(v1)]
    assert check(Compatibility.BACKWARD, parse_avro(v3), earlier) == []
    assert check(Compatibility.BACKWARD_TRANSITIVE, parse_avro(v3), earlier) != []
