"""The Avro decoder and encoder on Arrow batches, without Spark or a registry (a record
written with the reader's own schema needs no registry)."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType

from tickwheel.spark import SparkKafkaError
from tickwheel.spark._avro_read import AvroColumn, column_types, decode_batches
from tickwheel.spark._avro_write import AvroEncoding, encode_batches
from tickwheel.spark._batch_decode import arrow_schema
from tickwheel.spark._options import RegistryOptions
from tickwheel.spark._schema import source_schema

SCHEMA_ID = 12
USER = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        ],
    }
)
# Nothing listens there: these tests must not need the registry.
NO_REGISTRY = RegistryOptions(("http://127.0.0.1:9",))
COLUMN = AvroColumn("value", "users-value", SCHEMA_ID, USER, NO_REGISTRY)


def framed(value: dict[str, object]) -> bytes:
    stream = io.BytesIO()
    stream.write(b"\x00" + SCHEMA_ID.to_bytes(4, "big"))
    fastavro.schemaless_writer(stream, fastavro.parse_schema(json.loads(USER)), value)
    return stream.getvalue()


def source_batch(values: list[bytes | None], first_offset: int = 0) -> pa.RecordBatch:
    schema = arrow_schema(False)
    rows = len(values)
    columns = [
        [None] * rows,
        values,
        ["users"] * rows,
        [0] * rows,
        list(range(first_offset, first_offset + rows)),
        [0] * rows,
        [0] * rows,
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(c, schema.field(i).type) for i, c in enumerate(columns)], schema=schema
    )


def decoded(batch: pa.RecordBatch) -> list[dict[str, object]]:
    schema = source_schema(include_headers=False, column_types=column_types([COLUMN]))
    out = list(decode_batches([batch], [COLUMN], schema))
    assert [b.schema for b in out] == [to_arrow_schema(schema, timezone="UTC")]
    values: list[dict[str, object]] = out[0].column(1).to_pylist()
    return values


def test_framed_values_decode_into_the_struct_column_and_nulls_stay_null() -> None:
    batch = source_batch([framed({"name": "ada", "attrs": {"a": 1, "b": None}}), None])

    assert decoded(batch) == [{"name": "ada", "attrs": [("a", 1), ("b", None)]}, None]


def test_a_value_not_confluent_framed_fails_naming_its_offset() -> None:
    batch = source_batch([framed({"name": "ada", "attrs": {}}), b"plain"], first_offset=40)

    with pytest.raises(SparkKafkaError, match="users-0 offset 41: the value is not Confluent"):
        decoded(batch)


def test_encoded_structs_are_framed_avro_with_their_schema_id() -> None:
    struct = StructType(
        [StructField("name", StringType()), StructField("attrs", MapType(StringType(), LongType()))]
    )
    values = pa.array(
        [{"name": "ada", "attrs": [("a", 1)]}, None],
        to_arrow_schema(StructType([StructField("value", struct)])).field(0).type,
    )
    batch = pa.RecordBatch.from_arrays([values], names=["value"])

    (encoded,) = encode_batches([batch], [AvroEncoding("value", "users-value", SCHEMA_ID, USER)])

    first, second = encoded.column(0).to_pylist()
    assert first[:5] == b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    parsed = fastavro.parse_schema(json.loads(USER))
    assert fastavro.schemaless_reader(io.BytesIO(first[5:]), parsed, None) == {
        "name": "ada",
        "attrs": {"a": 1},
    }
    assert second is None
