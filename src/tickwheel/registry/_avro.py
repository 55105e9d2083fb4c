"""Avro schemas for the registry: parsing with fastavro, and Avro's resolution rules.

``parse_avro`` reads a schema's text (with the schemas it references, already parsed in
their order) through ``fastavro.parse_schema``, which checks names, defaults and the
type grammar; an invalid schema raises ``SchemaError`` with fastavro's reason. The
schema's identity in the registry is its compact JSON (``canonical``), as Confluent
compares the schema's normalized string; ``normalize=true`` uses Avro's Parsing
Canonical Form (``normalized``) instead, so schemas that differ in docs or order of
attributes match (a schema with references: with their named types defined before it).

``read_errors(reader, writer)`` applies the specification's schema resolution rules
(the rules Avro's ``SchemaCompatibility`` applies for Confluent): can data written with
``writer`` be read with ``reader``? It answers every reason it cannot, each with the
path in the reader's schema where it found it; an empty list means compatible. Logical
types are ignored, as Avro's resolution ignores them; named types are matched by their
unqualified name or one of the reader's aliases; recursive types are followed once per
pair of names.

Pure functions over immutable values; safe from any thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType, to_parsing_canonical_form

AVRO = "AVRO"

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# Writer type -> reader types it is promoted to (the specification's promotions).
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class SchemaError(ValueError):
    """A schema text that is not a valid schema of its type."""


@dataclass(frozen=True, slots=True)
class AvroSchema:
    """A parsed Avro schema: fastavro's parsed form and the named types it sees."""

    parsed: Any
    names: dict[str, Any] = field(compare=False)
    canonical: str
    normalized: str


def parse_avro(text: str, references: tuple[AvroSchema, ...] = ()) -> AvroSchema:
    """Parse ``text`` as an Avro schema whose named types may come from ``references``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON: {exc}") from exc
    _check_records(document)
    names: dict[str, Any] = {}
    for reference in references:
        names.update(reference.names)
    referenced = list(names.values())
    try:
        parsed = fastavro.parse_schema(document, named_schemas=names, _write_hint=False)
        normalized = to_parsing_canonical_form(_standalone(referenced, document))
    except (
        SchemaParseException,
        UnknownType,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
    ) as exc:
        raise SchemaError(str(exc) or type(exc).__name__) from exc
    canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return AvroSchema(parsed, names, canonical, normalized)


def _standalone(referenced: list[Any], document: Any) -> Any:
    """``document`` with the named types it takes from references defined before it (in
    the fields of a wrapping record), so its canonical form needs nothing else."""
    if not referenced:
        return document
    fields = [{"name": f"r{index}", "type": t} for index, t in enumerate(referenced)]
    fields.append({"name": "schema", "type": document})
    return {"type": "record", "name": "tickwheel.registry.Referencing", "fields": fields}


def _check_records(document: Any) -> None:
    """What Avro's parser refuses and fastavro lets pass: a schema that is not a JSON
    string, object or array; a record without a ``fields`` list, or with a field name
    twice."""
    if isinstance(document, list):
        for branch in document:
            _check_records(branch)
        return
    if not isinstance(document, (str, dict)):
        raise SchemaError("a schema is a JSON string, object or array")
    if not isinstance(document, dict):
        return
    if document.get("type") in ("record", "error"):
        fields = document.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"record {document.get('name')} needs a 'fields' list")
        seen: set[object] = set()
        for entry in fields:
            name = entry.get("name") if isinstance(entry, dict) else None
            if name in seen:
                raise SchemaError(f"record {document.get('name')} has field '{name}' twice")
            seen.add(name)
            if isinstance(entry, dict) and "type" in entry:
                _check_records(entry["type"])
    for nested in ("items", "values"):
        if nested in document:
            _check_records(document[nested])
    if isinstance(document.get("type"), (dict, list)):
        _check_records(document["type"])


def read_errors(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can)."""
    return _Resolution(reader.names, writer.names).check(reader.parsed, writer.parsed, "")


def _unqualified(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolution:
    """One check of a reader schema against a writer schema."""

    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self._reader_names = reader_names
        self._writer_names = writer_names
        self._seen: set[tuple[str, str]] = set()

    @staticmethod
    def _resolve(schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str):
            return schema if schema in _PRIMITIVES else names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema["type"]
        return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            return str(schema["type"])
        return str(schema)

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self._reader_names)
        writer = self._resolve(writer, self._writer_names)
        reader_kind, writer_kind = self._kind(reader), self._kind(writer)
        if writer_kind == "union":
            # Every branch the writer may have written must be readable.
            return [error for branch in writer for error in self.check(reader, branch, path)]
        if reader_kind == "union":
            if any(not self.check(branch, writer, path) for branch in reader):
                return []
            return [f"{path or '/'}: reader union lacks writer type {writer_kind}"]
        if reader_kind != writer_kind:
            if reader_kind in _PROMOTIONS.get(writer_kind, frozenset()):
                return []
            return [
                f"{path or '/'}: reader type {reader_kind} "
                f"not compatible with writer type {writer_kind}"
            ]
        return self._check_same_kind(reader_kind, reader, writer, path)

    def _check_same_kind(self, kind: str, reader: Any, writer: Any, path: str) -> list[str]:
        errors: list[str] = []
        if kind in ("record", "error", "enum", "fixed"):
            name_error = self._name_error(reader, writer, path)
            if name_error:
                errors.append(name_error)
            elif kind in ("record", "error"):
                errors.extend(self._check_record(reader, writer, path))
            elif kind == "enum":
                errors.extend(self._check_enum(reader, writer, path))
            elif reader["size"] != writer["size"]:
                errors.append(
                    f"{path or '/'}: expected fixed size {reader['size']}, found {writer['size']}"
                )
        elif kind == "array":
            errors.extend(self.check(reader["items"], writer["items"], f"{path}/items"))
        elif kind == "map":
            errors.extend(self.check(reader["values"], writer["values"], f"{path}/values"))
        return errors

    @staticmethod
    def _name_error(reader: dict[str, Any], writer: dict[str, Any], path: str) -> str:
        writer_name = writer["name"]
        accepted = {_unqualified(reader["name"])}
        accepted.update(_unqualified(alias) for alias in reader.get("aliases", ()))
        if _unqualified(writer_name) in accepted:
            return ""
        return f"{path}/name: expected {reader['name']}, found {writer_name}"

    def _check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        pair = (reader["name"], writer["name"])
        if pair in self._seen:
            return []
        self._seen.add(pair)
        written = {entry["name"]: entry for entry in writer["fields"]}
        errors: list[str] = []
        for index, reader_field in enumerate(reader["fields"]):
            field_path = f"{path}/fields/{index}"
            candidates = (reader_field["name"], *reader_field.get("aliases", ()))
            writer_field = next((written[n] for n in candidates if n in written), None)
            if writer_field is None:
                if "default" not in reader_field:
                    errors.append(
                        f"{field_path}: reader field '{reader_field['name']}' has no default "
                        "and is missing from the writer's schema"
                    )
                continue
            errors.extend(
                self.check(reader_field["type"], writer_field["type"], f"{field_path}/type")
            )
        return errors

    @staticmethod
    def _check_enum(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
        if missing and "default" not in reader:
            return [f"{path}/symbols: reader enum lacks the writer's symbols {missing}"]
        return []
