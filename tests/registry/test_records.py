"""The ``_schemas`` records: Confluent's and Karapace's bytes read, ours written alike."""

from __future__ import annotations

import pytest

from tickwheel.registry._records import (
    ConfigChange,
    DeleteSubjectChange,
    ModeChange,
    RecordError,
    Reference,
    SchemaChange,
    SchemaValue,
    decode,
    encode_config,
    encode_delete_subject,
    encode_noop,
    encode_schema,
)

# As Confluent Schema Registry writes them (Jackson, fields in declaration order).
CONFLUENT_SCHEMA = (
    b'{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}',
    b'{"subject":"orders-value","version":2,"id":7,"schemaType":"JSON",'
    b'"references":[{"name":"a.json","subject":"a","version":1}],'
    b'"schema":"{\\"type\\":\\"object\\"}","deleted":false}',
)


def test_a_confluent_schema_record_is_read() -> None:
    assert decode(*CONFLUENT_SCHEMA) == SchemaChange(
        "orders-value",
        2,
        SchemaValue(
            "orders-value", 2, 7, '{"type":"object"}', "JSON", (Reference("a.json", "a", 1),)
        ),
    )


def test_other_key_types_are_read() -> None:
    assert decode(
        b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'
    ) == ConfigChange(None, "FULL")
    assert decode(b'{"keytype":"CONFIG","subject":"s","magic":0}', None) == ConfigChange("s", None)
    assert decode(b'{"keytype":"MODE","subject":"s","magic":0}', b'{"mode":"READONLY"}') == (
        ModeChange("s", "READONLY")
    )
    assert decode(
        b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'{"subject":"s","version":3}'
    ) == DeleteSubjectChange("s", 3)
    assert decode(b'{"keytype":"NOOP","magic":0}', None) is None
    assert decode(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', None) == (
        SchemaChange("s", 1, None)
    )


def test_written_records_read_back_and_keys_match_confluents_bytes() -> None:
    value = SchemaValue(
        "orders-value", 2, 7, '{"type":"object"}', "JSON", (Reference("a.json", "a", 1),)
    )
    key, data = encode_schema(value)
    assert key == CONFLUENT_SCHEMA[0]
    assert decode(key, data) == SchemaChange("orders-value", 2, value)
    assert encode_config(None, "FULL") == (
        b'{"keytype":"CONFIG","subject":null,"magic":0}',
        b'{"compatibilityLevel":"FULL"}',
    )
    assert decode(*encode_delete_subject("s", 4)) == DeleteSubjectChange("s", 4)
    assert decode(*encode_noop()) is None


def test_an_avro_schema_record_leaves_schema_type_out() -> None:
    _, data = encode_schema(SchemaValue("s", 1, 1, '"int"'))
    assert b"schemaType" not in data


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"not json", None),
        (b"[1]", None),
        (b'{"keytype":"SCHEMA","subject":"s","magic":1}', None),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}'),
    ],
)
def test_records_that_are_not_ours_raise_record_error(key: bytes, value: bytes | None) -> None:
    with pytest.raises(RecordError):
        decode(key, value)
