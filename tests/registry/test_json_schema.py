"""JSON Schema: checked against its draft's metaschema, compared as sets of documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwheel.registry._avro import SchemaError, parse_avro
from tickwheel.registry._compatibility import Compatibility, check, read_errors
from tickwheel.registry._json_schema import parse_json


def obj(properties: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": properties, **extra})


NAME = {"name": {"type": "string"}}
NAME_AGE = {"name": {"type": "string"}, "age": {"type": "integer"}}


def errors(reader: str, writer: str) -> list[str]:
    return read_errors(parse_json(reader), parse_json(writer))


def test_a_property_added_to_a_closed_writer_is_compatible() -> None:
    assert errors(obj(NAME_AGE), obj(NAME, additionalProperties=False)) == []


def test_a_property_added_to_an_open_writer_is_not() -> None:
    (reason,) = errors(obj(NAME_AGE), obj(NAME))
    assert "/properties/age" in reason
    assert "open" in reason


def test_a_property_removed_is_compatible_unless_the_reader_is_closed() -> None:
    assert errors(obj(NAME), obj(NAME_AGE)) == []
    assert errors(obj(NAME, additionalProperties=False), obj(NAME_AGE)) != []


def test_required_types_enums_and_bounds() -> None:
    assert errors(obj(NAME, required=["name"]), obj(NAME)) != []
    assert errors(obj(NAME), obj(NAME, required=["name"])) == []
    assert errors('{"type": "number"}', '{"type": "integer"}') == []
    assert errors('{"type": "integer"}', '{"type": "number"}') != []
    assert errors('{"enum": ["a", "b"]}', '{"enum": ["a"]}') == []
    assert errors('{"enum": ["a"]}', '{"enum": ["a", "b"]}') != []
    assert errors('{"type": "string", "maxLength": 10}', '{"type": "string", "maxLength": 5}') == []
    assert errors('{"type": "string", "maxLength": 5}', '{"type": "string", "maxLength": 10}') != []
    assert errors('{"type": "string", "maxLength": 5}', '{"type": "string"}') != []
    items = '{"type": "array", "items": {"type": "integer"}}'
    assert errors('{"type": "array", "items": {"type": "number"}}', items) == []
    assert errors(items, '{"type": "array", "items": {"type": "number"}}') != []


def test_combinators_that_change_are_not_proven() -> None:
    one_of = '{"oneOf": [{"type": "string"}, {"type": "integer"}]}'
    assert errors(one_of, one_of) == []
    assert "oneOf" in errors(one_of, '{"oneOf": [{"type": "string"}]}')[0]


def test_a_changed_schema_type_is_incompatible() -> None:
    assert check(Compatibility.BACKWARD, parse_json('{"type": "string"}'), [parse_avro('"string"')])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ("5", "object or boolean"),
        ('{"type": "strang"}', "strang"),
        ('{"type": "object", "required": "name"}', "not of type 'array'"),
    ],
)
def test_invalid_json_schemas_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(SchemaError, match=reason):
        parse_json(text)
