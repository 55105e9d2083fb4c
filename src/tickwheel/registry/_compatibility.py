"""Compatibility levels: which earlier versions a new schema is checked against, and how.

Confluent's seven levels. BACKWARD: the new schema reads data written with the latest
version; FORWARD: the latest version reads data written with the new schema; FULL: both.
Their ``_TRANSITIVE`` forms check against every live version instead of the latest only;
NONE checks nothing. Schemas are compared by their type's rules (``_avro``,
``_json_schema``); a subject whose type changes is incompatible. ``check`` takes the
earlier versions newest first and answers every reason the new schema is refused
(empty: accepted).

Pure functions; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from tickwheel.registry import _avro, _json_schema
from tickwheel.registry._avro import AvroSchema
from tickwheel.registry._json_schema import JsonSchema

ParsedSchema = AvroSchema | JsonSchema


class Compatibility(enum.StrEnum):
    """Confluent's compatibility levels."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD


def read_errors(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader``, by their type's rules."""
    if isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema):
        return _avro.read_errors(reader, writer)
    if isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema):
        return _json_schema.read_errors(reader, writer)
    return ["/: the schema type changed"]


def check(
    level: Compatibility, new: ParsedSchema, earlier_newest_first: Sequence[ParsedSchema]
) -> list[str]:
    """Why ``new`` may not follow ``earlier_newest_first`` under ``level`` (empty: it may)."""
    if level is Compatibility.NONE or not earlier_newest_first:
        return []
    against = earlier_newest_first if level.transitive else earlier_newest_first[:1]
    errors: list[str] = []
    for previous in against:
        if level.backward:
            errors.extend(f"reading the earlier: {e}" for e in read_errors(new, previous))
        if level.forward:
            errors.extend(f"read by the earlier: {e}" for e in read_errors(previous, new))
    return errors
