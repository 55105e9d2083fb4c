"""The record names RecordNameStrategy and TopicRecordNameStrategy take from a schema."""

from __future__ import annotations

import json

import pytest

from tickwheel.registry._records import SchemaValue
from tickwheel.registry._validator import record_name


def named(schema: object, schema_type: str = "AVRO") -> str | None:
    return record_name(SchemaValue("s", 1, 1, json.dumps(schema), schema_type))


@pytest.mark.parametrize(
    ("schema", "name"),
    [
        (
            {"type": "record", "name": "User", "namespace": "com.acme", "fields": []},
            "com.acme.User",
        ),
        (
            {"type": "record", "name": "com.acme.User", "namespace": "org.x", "fields": []},
            "com.acme.User",
        ),
        ({"type": "record", "name": "User", "fields": []}, "User"),
        ({"type": "enum", "name": "Colour", "namespace": "a", "symbols": ["RED"]}, "a.Colour"),
        ({"type": "fixed", "name": "Hash", "size": 16}, "Hash"),
        ("string", None),
        ({"type": "array", "items": "int"}, None),
    ],
)
def test_an_avro_schemas_record_name_is_its_full_name(schema: object, name: str | None) -> None:
    assert named(schema) == name


def test_a_json_schemas_record_name_is_its_title() -> None:
    assert named({"title": "Reading", "type": "object"}, "JSON") == "Reading"
    assert named({"type": "object"}, "JSON") is None
    assert named(True, "JSON") is None
