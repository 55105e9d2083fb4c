"""Registered Avro keys and values read into typed columns: the source's Avro decoder.

Planning, on the driver (``plan_columns``): a column in the ``avro`` format
(``keyFormat`` / ``valueFormat``) reads the topic's subject, ``<topic>-key`` or
``<topic>-value`` (Confluent's TopicNameStrategy); the subject's latest version when the
query is planned is the reader's schema, fixed for the life of the query (a restarted
query plans again). Its Spark type (``_avro_types.spark_type``) replaces the column's
binary type in the source's schema (``column_types``); the other columns stay as
they are.

Decoding, on the executors (``decode_batches``): the fetch path hands over the source's
Arrow batches with binary keys and values; each key or value of an Avro column is
Confluent-framed -- a magic byte 0, the writer's schema id in four bytes big-endian,
then the Avro body -- and fastavro decodes it with the writer's schema (fetched by id,
kept per process: ``_registry_client``) resolved to the reader's by Avro's resolution
rules: a field the writer lacks takes the reader's default, a field the reader lacks is
skipped, an int is promoted to long, float or double, and so on. A null key or value
(a tombstone) is a null struct. It costs one Python call per record (fastavro decodes
in C); a record written with the reader's own schema skips the resolution.

A record that cannot be read fails the task, and so the query, with the record named by
topic-partition and offset: one that is not Confluent-framed, one whose schema id the
registry does not have (the id named), or one whose writer's schema the reader's cannot
resolve (both ids named, with fastavro's reason).

Concurrency: ``plan_columns`` runs on the driver; ``decode_batches`` in one task's
thread, on values it owns; the per-process caches it uses are thread-safe.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import fastavro
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructType

from tickwheel.spark._avro_types import parse, spark_type
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import RecordFormats, RegistryOptions
from tickwheel.spark._registry_client import AVRO_TYPE, latest_version, schema_by_id

MAGIC_BYTE: Final = 0
# The magic byte and the four bytes of the schema id.
FRAME_BYTES: Final = 5


@dataclass(frozen=True, slots=True)
class AvroColumn:
    """A key or value column read as registered Avro, as planned on the driver: its
    subject, and the reader's schema (the subject's latest version) with its id."""

    column: str
    subject: str
    schema_id: int
    schema: str
    registry: RegistryOptions


def subject_name(topic: str, column: str) -> str:
    """The subject of ``topic``'s keys or values (TopicNameStrategy)."""
    return f"{topic}-{column}"


def plan_columns(formats: RecordFormats) -> tuple[AvroColumn, ...]:
    """The Avro columns of a source with ``formats``, each with its subject's latest
    version (none, without talking to a registry, when no column is Avro)."""
    columns: list[AvroColumn] = []
    for column in formats.avro_columns():
        registry, topic = formats.registry_and_topic()
        subject = subject_name(topic, column)
        latest = latest_version(registry, subject)
        if latest.schema_type != AVRO_TYPE:
            raise SparkKafkaError(
                f"subject {subject!r} holds a {latest.schema_type} schema;"
                f" {column}Format=avro needs an Avro one"
            )
        parse(latest.text)
        columns.append(AvroColumn(column, subject, latest.schema_id, latest.text, registry))
    return tuple(columns)


def column_types(columns: Iterable[AvroColumn]) -> dict[str, DataType]:
    """The Spark type of each Avro column, by column name."""
    return {c.column: spark_type(parse(c.schema), c.column)[0] for c in columns}


def decode_batches(
    batches: Iterable[pa.RecordBatch], columns: Sequence[AvroColumn], schema: StructType
) -> Iterator[pa.RecordBatch]:
    """``batches`` (binary keys and values) with ``columns`` decoded, in the Arrow form
    of ``schema``, the source's schema Spark planned."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    decoders = [(arrow_schema.get_field_index(c.column), _ColumnDecoder(c)) for c in columns]
    for batch in batches:
        arrays = list(batch.columns)
        for index, decoder in decoders:
            arrays[index] = decoder.decode(batch, index, arrow_schema.field(index).type)
        yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


class _ColumnDecoder:
    """Decodes one Avro column of a task's batches; keeps the writers' schemas it met."""

    def __init__(self, column: AvroColumn) -> None:
        self._column = column
        self._reader = parse(column.schema)
        self._writers: dict[int, Any] = {column.schema_id: self._reader}

    def decode(self, batch: pa.RecordBatch, index: int, arrow_type: pa.DataType) -> pa.Array:
        column = self._column
        values: list[Any] = []
        for row, payload in enumerate(batch.column(index).to_pylist()):
            if payload is None:
                values.append(None)
                continue
            if len(payload) < FRAME_BYTES or payload[0] != MAGIC_BYTE:
                raise SparkKafkaError(
                    f"{_record(batch, row)}: the {column.column} is not Confluent-framed Avro"
                    f" (magic byte {MAGIC_BYTE}, then a four-byte schema id)"
                )
            schema_id = int.from_bytes(payload[1:FRAME_BYTES], "big")
            writer = self._writers.get(schema_id)
            if writer is None:
                writer = self._writers[schema_id] = self._writer(schema_id, batch, row)
            stream = io.BytesIO(payload)
            stream.seek(FRAME_BYTES)
            # The reader's own schema needs no resolution (fastavro would compare them).
            reader = None if schema_id == column.schema_id else self._reader
            try:
                values.append(fastavro.schemaless_reader(stream, writer, reader))
            except Exception as exc:  # whatever fastavro raises for bytes it cannot read
                raise SparkKafkaError(
                    f"{_record(batch, row)}: the {column.column} written with schema id"
                    f" {schema_id} cannot be read with {column.subject}'s schema id"
                    f" {column.schema_id}: {exc}"
                ) from None
        try:
            return pa.array(values, type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SparkKafkaError(
                f"{_record(batch, 0)} and on: the {column.column}s decoded with"
                f" {column.subject}'s schema id {column.schema_id} do not fit their"
                f" column: {exc}"
            ) from None

    def _writer(self, schema_id: int, batch: pa.RecordBatch, row: int) -> Any:
        column = self._column
        found = schema_by_id(column.registry, schema_id)
        if found is None:
            raise SparkKafkaError(
                f"{_record(batch, row)}: the {column.column}'s schema id {schema_id} is not in"
                f" the schema registry {', '.join(column.registry.urls)}"
            )
        if found.schema_type != AVRO_TYPE:
            raise SparkKafkaError(
                f"{_record(batch, row)}: the {column.column}'s schema id {schema_id} is a"
                f" {found.schema_type} schema, not Avro"
            )
        return parse(found.text)


def _record(batch: pa.RecordBatch, row: int) -> str:
    """The record at ``row`` as Kafka's messages name it: topic-partition and offset."""

    def cell(name: str) -> object:
        return batch.column(batch.schema.get_field_index(name))[row].as_py()

    return f"{cell('topic')}-{cell('partition')} offset {cell('offset')}"
