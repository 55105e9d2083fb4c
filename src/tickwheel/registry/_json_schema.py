"""JSON Schema schemas for the registry: checked with jsonschema, compared as sets of documents.

``parse_json`` reads a schema (a JSON object or boolean) and checks it against its
draft's metaschema with ``jsonschema``'s validator for that draft (``$schema``; the
newest draft when absent); an invalid one raises ``SchemaError`` with the validator's
reason. Its identity is its compact JSON (``canonical``); ``normalized`` sorts the keys.

``read_errors(reader, writer)`` answers why a document valid under ``writer`` might not
be valid under ``reader`` (empty: every such document is), as Confluent's JSON Schema
compatibility does, for the keywords that decide it: ``type`` (``integer`` is a
``number``), ``properties``, ``required`` and ``additionalProperties`` (a property the
reader adds is compatible only when the writer's content model is closed,
``additionalProperties: false``, since an open writer may have written it with any
value), ``items``, ``enum``, ``const`` and the bounds (``maxLength`` ... ``minimum``:
a reader may widen them, never narrow). A schema using ``$ref`` or a combinator
(``allOf``, ``anyOf``, ``oneOf``, ``not``) or ``pattern`` where the other schema has it
differently is refused as a change this checker cannot prove safe. Each reason names
the path in the reader's schema.

Pure functions over immutable values; safe from any thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema.exceptions
import jsonschema.validators

from tickwheel.registry._avro import SchemaError

JSON = "JSON"

# Bounds a reader may only widen: keyword -> True when greater is wider.
_BOUNDS = {
    "maxLength": True,
    "maxItems": True,
    "maxProperties": True,
    "maximum": True,
    "exclusiveMaximum": True,
    "minLength": False,
    "minItems": False,
    "minProperties": False,
    "minimum": False,
    "exclusiveMinimum": False,
}
_UNPROVEN = ("$ref", "allOf", "anyOf", "oneOf", "not", "pattern", "if", "then", "else")
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})


@dataclass(frozen=True, slots=True)
class JsonSchema:
    """A checked JSON Schema document."""

    document: Any
    canonical: str
    normalized: str


def parse_json(text: str) -> JsonSchema:
    """Parse and check ``text`` as a JSON Schema."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"not JSON: {exc}") from exc
    if not isinstance(document, (dict, bool)):
        raise SchemaError("a JSON Schema is a JSON object or boolean")
    if isinstance(document, dict):  # true and false are schemas as they stand
        validator = jsonschema.validators.validator_for(document)
        try:
            validator.check_schema(document)
        except jsonschema.exceptions.SchemaError as exc:
            raise SchemaError(exc.message) from exc
    return JsonSchema(
        document,
        json.dumps(document, separators=(",", ":"), ensure_ascii=False),
        json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=True),
    )


def read_errors(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why a document valid under ``writer`` might be invalid under ``reader``."""
    return _check(reader.document, writer.document, "")


def _types(schema: dict[str, Any]) -> frozenset[str]:
    declared = schema.get("type")
    if declared is None:
        return _ALL_TYPES
    types = frozenset([declared] if isinstance(declared, str) else declared)
    return types | {"integer"} if "number" in types else types


def _check(reader: Any, writer: Any, path: str) -> list[str]:
    where = path or "/"
    if reader is True or reader in ({}, writer):
        return []
    if writer is False:
        return []
    if reader is False:
        return [f"{where}: the reader accepts nothing"]
    if writer is True:
        writer = {}
    for keyword in _UNPROVEN:
        if reader.get(keyword) != writer.get(keyword):
            return [f"{where}/{keyword}: a change of '{keyword}' is not proven compatible"]
    errors: list[str] = []
    widened = _types(writer) - _types(reader)
    if widened:
        errors.append(f"{where}/type: the reader does not accept {sorted(widened)}")
    for keyword in ("enum", "const"):
        errors.extend(_check_values(reader, writer, keyword, where))
    for keyword, greater_is_wider in _BOUNDS.items():
        errors.extend(_check_bound(reader, writer, keyword, greater_is_wider, where))
    errors.extend(_check_object(reader, writer, path))
    if "items" in reader or "items" in writer:
        errors.extend(_check(reader.get("items", True), writer.get("items", True), f"{path}/items"))
    return errors


def _check_values(
    reader: dict[str, Any], writer: dict[str, Any], keyword: str, where: str
) -> list[str]:
    if keyword not in reader:
        return []
    if keyword not in writer:
        return [f"{where}/{keyword}: the reader adds '{keyword}'"]
    allowed = reader[keyword] if keyword == "enum" else [reader[keyword]]
    written = writer[keyword] if keyword == "enum" else [writer[keyword]]
    missing = [value for value in written if value not in allowed]
    return [f"{where}/{keyword}: the reader lacks {missing}"] if missing else []


def _check_bound(
    reader: dict[str, Any], writer: dict[str, Any], keyword: str, greater_is_wider: bool, where: str
) -> list[str]:
    if keyword not in reader:
        return []
    bound = reader[keyword]
    if keyword not in writer:
        return [f"{where}/{keyword}: the reader adds the bound {bound}"]
    narrower = bound < writer[keyword] if greater_is_wider else bound > writer[keyword]
    return (
        [f"{where}/{keyword}: the reader narrows {writer[keyword]} to {bound}"] if narrower else []
    )


def _check_object(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    where = path or "/"
    errors: list[str] = []
    newly_required = sorted(set(reader.get("required", ())) - set(writer.get("required", ())))
    if newly_required:
        errors.append(f"{where}/required: the reader requires {newly_required}")
    reader_properties = reader.get("properties", {})
    writer_properties = writer.get("properties", {})
    reader_extra = reader.get("additionalProperties", True)
    writer_extra = writer.get("additionalProperties", True)
    for name, schema in reader_properties.items():
        field_path = f"{path}/properties/{name}"
        if name in writer_properties:
            errors.extend(_check(schema, writer_properties[name], field_path))
        else:
            # What an open writer may have written under this name: its extra schema.
            errors.extend(
                f"{error} (the property is new and the writer's content model is open)"
                for error in _check(schema, writer_extra, field_path)
            )
    for name, schema in writer_properties.items():
        if name not in reader_properties:
            errors.extend(_check(reader_extra, schema, f"{path}/additionalProperties"))
    if reader_extra is not True and writer_extra is True:
        errors.append(f"{where}/additionalProperties: the reader closes an open content model")
    return errors
