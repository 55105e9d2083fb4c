"""Struct columns written as registered, Confluent-framed Avro: the sink's Avro encoder.

Planning, on the driver (``plan_columns``), before any task runs: an Avro column's
schema is the option ``key.schema`` / ``value.schema`` when given, else the one Spark's
``to_avro`` derives from the column's type (``_avro_types.avro_schema``). It is
registered under the topic's subject, ``<topic>-key`` or ``<topic>-value``
(TopicNameStrategy) -- the registry answers the id it has when the schema is there
already, and refuses one its compatibility rule forbids -- or, with
``auto.register.schemas=false`` (the name Confluent's serializers use), looked up there,
and a schema not registered fails the write. The executors get the schema and its id,
and never talk to the registry.

Encoding, on the executors (``encode_batches``): each row's struct, as Arrow's Python
values, is written by fastavro behind the frame Confluent's serializers write -- a magic
byte 0, the schema id in four bytes big-endian -- and the column becomes binary, which
the produce path (``_produce``) sends like any value. A null struct is a null value (a
tombstone). Arrow gives maps as lists of pairs; they go to fastavro as dicts. A row
that does not fit the schema (possible with a schema given as an option) fails the task
with the column, subject and fastavro's reason.

Concurrency: ``plan_columns`` runs on the driver; ``encode_batches`` in one task's
thread, on values it owns.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.types import StructType

from tickwheel.spark._avro_read import FRAME_BYTES, MAGIC_BYTE, subject_name
from tickwheel.spark._avro_types import avro_schema, parse
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions
from tickwheel.spark._registry_client import lookup, register

_ID_BYTES = FRAME_BYTES - 1
_Convert = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class AvroEncoding:
    """How a sink writes one struct column: its subject, schema and the schema's id."""

    column: str
    subject: str
    schema_id: int
    schema: str


def plan_columns(options: SinkOptions, schema: StructType) -> tuple[AvroEncoding, ...]:
    """The encoding of each Avro column of ``schema``, its schema registered (or looked
    up, with ``auto.register.schemas=false``) under its subject."""
    formats = options.formats
    fields = {field.name.lower(): field for field in schema.fields}
    given = {"key": options.key_schema, "value": options.value_schema}
    encodings: list[AvroEncoding] = []
    for column in formats.avro_columns():
        field = fields.get(column)
        if field is None:
            continue
        registry, topic = formats.registry_and_topic()
        text = given[column]
        if text is None:
            text = avro_schema(field.dataType, column)
        else:
            try:
                parse(text)
            except SparkKafkaError as exc:
                raise SparkKafkaError(f"option {column}.schema: {exc}") from None
        subject = subject_name(topic, column)
        if options.auto_register:
            schema_id = register(registry, subject, text)
        else:
            found = lookup(registry, subject, text)
            if found is None:
                raise SparkKafkaError(
                    f"the {column} schema is not registered under {subject!r} and"
                    " auto.register.schemas=false"
                )
            schema_id = found
        encodings.append(AvroEncoding(column, subject, schema_id, text))
    return tuple(encodings)


def encode_batches(
    batches: Iterable[pa.RecordBatch], encodings: Sequence[AvroEncoding]
) -> Iterator[pa.RecordBatch]:
    """``batches`` with the struct column of each of ``encodings`` encoded as binary."""
    for batch in batches:
        names = [name.lower() for name in batch.schema.names]
        arrays = list(batch.columns)
        for encoding in encodings:
            index = names.index(encoding.column)
            arrays[index] = _encode(encoding, arrays[index])
        yield pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _encode(encoding: AvroEncoding, column: pa.Array) -> pa.Array:
    schema = parse(encoding.schema)
    frame = bytes([MAGIC_BYTE]) + encoding.schema_id.to_bytes(_ID_BYTES, "big")
    convert = _python_for_avro(column.type)
    encoded: list[bytes | None] = []
    for value in column.to_pylist():
        if value is None:
            encoded.append(None)
            continue
        stream = io.BytesIO()
        stream.write(frame)
        try:
            fastavro.schemaless_writer(stream, schema, value if convert is None else convert(value))
        except Exception as exc:  # whatever fastavro raises for a value it cannot write
            raise SparkKafkaError(
                f"a {encoding.column} does not fit {encoding.subject}'s schema id"
                f" {encoding.schema_id}: {exc}"
            ) from None
        encoded.append(stream.getvalue())
    return pa.array(encoded, pa.binary())


def _python_for_avro(arrow_type: pa.DataType) -> _Convert | None:
    """What turns Arrow's Python value of ``arrow_type`` into fastavro's (maps: lists
    of pairs into dicts), or None when nothing needs to."""
    if pa.types.is_map(arrow_type):
        item = _python_for_avro(arrow_type.item_type)
        return lambda pairs: (
            None if pairs is None else {k: (v if item is None else item(v)) for k, v in pairs}
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = _python_for_avro(arrow_type.value_type)
        if element is None:
            return None
        return lambda items: None if items is None else [element(v) for v in items]
    if pa.types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        converts = {f.name: c for f in fields if (c := _python_for_avro(f.type)) is not None}
        if not converts:
            return None
        return lambda record: (
            None
            if record is None
            else {k: (converts[k](v) if k in converts else v) for k, v in record.items()}
        )
    return None
