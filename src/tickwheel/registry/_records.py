"""The records of the ``_schemas`` topic, in the JSON Confluent and Karapace write.

Every record's key is a JSON object with a ``keytype``; its value is JSON too, or null
(a tombstone, which compaction eventually removes):

=================  ===========================================  ===========================
keytype            key fields                                   value
=================  ===========================================  ===========================
SCHEMA             subject, version, magic 1                    subject, version, id,
                                                                schema, deleted, schemaType
                                                                (not for AVRO), references
                                                                (when any); null: hard
                                                                delete of the version
CONFIG             subject (null: global), magic 0              compatibilityLevel; null:
                                                                the subject's level removed
MODE               subject (null: global), magic 0              mode; null: removed
DELETE_SUBJECT     subject, magic 0                             subject, version (the
                                                                subject's newest version)
NOOP               magic 0                                      null (a marker to read up to)
=================  ===========================================  ===========================

Keys are written with their fields in that order, compact, as both write them, so a key
compacts with the same key written by either. ``decode`` reads any of them (unknown
fields are ignored, unknown key types answer None) and raises ``RecordError`` for a
record that is not one.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tickwheel.registry._avro import AVRO

SCHEMAS_TOPIC = "_schemas"
_SCHEMA_MAGIC = 1
_OTHER_MAGIC = 0


class RecordError(ValueError):
    """A ``_schemas`` record that is not one of the formats above."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A named type a schema takes from another subject's version."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject, as stored."""

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """A version written (``value``) or hard-deleted (None)."""

    subject: str
    version: int
    value: SchemaValue | None


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A compatibility level set, or removed (None); ``subject`` None: the global one."""

    subject: str | None
    compatibility: str | None


@dataclass(frozen=True, slots=True)
class ModeChange:
    """A mode set, or removed (None); ``subject`` None: the global one."""

    subject: str | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class DeleteSubjectChange:
    """Every version of ``subject`` up to ``version`` soft-deleted."""

    subject: str
    version: int


Change = SchemaChange | ConfigChange | ModeChange | DeleteSubjectChange


def _dump(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump(
        {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": _SCHEMA_MAGIC}
    )


def encode_schema(value: SchemaValue) -> tuple[bytes, bytes]:
    """The record of a version."""
    document: dict[str, Any] = {
        "subject": value.subject,
        "version": value.version,
        "id": value.schema_id,
        "schema": value.schema,
        "deleted": value.deleted,
    }
    if value.schema_type != AVRO:
        document["schemaType"] = value.schema_type
    if value.references:
        document["references"] = [reference.as_json() for reference in value.references]
    return schema_key(value.subject, value.version), _dump(document)


def encode_config(subject: str | None, compatibility: str | None) -> tuple[bytes, bytes | None]:
    """The record setting (or, None, removing) a compatibility level."""
    key = _dump({"keytype": "CONFIG", "subject": subject, "magic": _OTHER_MAGIC})
    return key, None if compatibility is None else _dump({"compatibilityLevel": compatibility})


def encode_mode(subject: str | None, mode: str | None) -> tuple[bytes, bytes | None]:
    """The record setting (or, None, removing) a mode."""
    key = _dump({"keytype": "MODE", "subject": subject, "magic": _OTHER_MAGIC})
    return key, None if mode is None else _dump({"mode": mode})


def encode_delete_subject(subject: str, version: int) -> tuple[bytes, bytes]:
    """The record soft-deleting ``subject`` up to ``version``."""
    key = _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": _OTHER_MAGIC})
    return key, _dump({"subject": subject, "version": version})


def encode_noop() -> tuple[bytes, None]:
    """A marker record: reading up to it reads everything written before it."""
    return _dump({"keytype": "NOOP", "magic": _OTHER_MAGIC}), None


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"the {what} is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise RecordError(f"the {what} is not a JSON object")
    return document


def _reference(document: Any) -> Reference:
    if not isinstance(document, dict):
        raise RecordError("a reference is not a JSON object")
    return Reference(str(document["name"]), str(document["subject"]), int(document["version"]))


def _decode_schema(key_document: dict[str, Any], value: bytes | None) -> SchemaChange:
    subject, version = str(key_document["subject"]), int(key_document["version"])
    if value is None:
        return SchemaChange(subject, version, None)
    document = _object(value, "value")
    return SchemaChange(
        subject,
        version,
        SchemaValue(
            str(document["subject"]),
            int(document["version"]),
            int(document["id"]),
            str(document["schema"]),
            str(document.get("schemaType") or AVRO),
            tuple(_reference(r) for r in document.get("references") or ()),
            bool(document.get("deleted", False)),
        ),
    )


def _decode_other(keytype: object, subject: Any, value: bytes | None) -> Change | None:
    document = None if value is None else _object(value, "value")
    if keytype == "CONFIG":
        level = None if document is None else document.get("compatibilityLevel")
        return ConfigChange(subject, None if level is None else str(level))
    if keytype == "MODE":
        mode = None if document is None else document.get("mode")
        return ModeChange(subject, None if mode is None else str(mode))
    if keytype == "DELETE_SUBJECT" and document is not None:
        return DeleteSubjectChange(str(document["subject"]), int(document["version"]))
    return None


def decode(key: bytes, value: bytes | None) -> Change | None:
    """The change a record makes; None for NOOP and key types this registry does not keep."""
    key_document = _object(key, "key")
    keytype = key_document.get("keytype")
    try:
        if keytype == "SCHEMA":
            return _decode_schema(key_document, value)
        return _decode_other(keytype, key_document.get("subject"), value)
    except RecordError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"a {keytype} record lacks or mistypes a field: {exc!r}") from exc
