"""``SchemaRegistry``: Confluent's registry operations over the ``_schemas`` topic.

Reads answer from the ``SchemaStore`` after applying whatever the topic holds that was
not read yet (``catch_up``), so a registry answers what the topic says. A write checks
its request against the store, appends its records to the topic, and answers only once
it has read them back from the topic and applied them: what it answered is what every
later read sees, and what a restart rebuilds. Writes are serialized by a lock, so the
compatibility check, the id chosen and the version chosen hold until their record is
written.

Versions are numbered from 1 per subject (the next after the greatest, soft-deleted ones
included); ids are global (``SchemaStore.next_id``) and reused for the same schema.
Modes: READWRITE, READONLY (writes refused, 42205) and IMPORT (a register may name its
id and version). Schema types: AVRO (references give it other subjects' named types)
and JSON (references must name JSON schemas; they are not resolved, and a change of a
``$ref`` is refused as not proven compatible); another type, or a reference to a
missing version or to a schema of another type, is refused as invalid (42201).

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from tickwheel.registry import _errors as errors
from tickwheel.registry._avro import AVRO, AvroSchema, SchemaError, parse_avro
from tickwheel.registry._compatibility import (
    DEFAULT_COMPATIBILITY,
    Compatibility,
    ParsedSchema,
    check,
)
from tickwheel.registry._json_schema import JSON, JsonSchema, parse_json
from tickwheel.registry._records import (
    RecordError,
    Reference,
    SchemaValue,
    decode,
    encode_config,
    encode_delete_subject,
    encode_mode,
    encode_schema,
    schema_key,
)
from tickwheel.registry._schemas_log import SchemasLog
from tickwheel.registry._store import SchemaStore

_log = logging.getLogger(__name__)
Parsed = TypeVar("Parsed", AvroSchema, JsonSchema)

READWRITE = "READWRITE"
READONLY = "READONLY"
IMPORT = "IMPORT"
MODES = (READWRITE, READONLY, IMPORT)
LATEST = "latest"
_MAX_VERSION = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    """A schema as a request gives it."""

    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()
    schema_id: int | None = None
    version: int | None = None


class SchemaRegistry:
    """The registry of one broker."""

    def __init__(self, schemas_log: SchemasLog) -> None:
        self._log = schemas_log
        self.store = SchemaStore()
        self._write_lock = asyncio.Lock()
        self._parsed: dict[int, ParsedSchema] = {}

    def load(self) -> None:
        """Read the topic from its start (at broker start-up)."""
        self.catch_up()
        _log.info(
            "schema registry loaded %d subjects, %d schemas",
            len(self.store.subjects),
            len(self.store.by_id),
        )

    def catch_up(self) -> None:
        """Apply what the ``_schemas`` topic holds that was not read yet (one comparison
        of offsets when nothing)."""
        records = self._log.read_new()
        for offset, key, value in records:
            try:
                change = decode(key, value)
            except RecordError as exc:
                _log.error("_schemas offset %d is skipped: %s", offset, exc)
                continue
            if change is not None:
                self.store.apply(change)
        if records:
            # A hard delete may have freed an id, which IMPORT may give another schema.
            for schema_id in self._parsed.keys() - self.store.by_id.keys():
                del self._parsed[schema_id]

    # -- reads -----------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False) -> list[str]:
        self.catch_up()
        return sorted(
            subject
            for subject, versions in self.store.subjects.items()
            if deleted or any(not v.deleted for v in versions.values())
        )

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        self.catch_up()
        return [v.version for v in self._versions(subject, deleted=deleted)]

    def _versions(self, subject: str, *, deleted: bool) -> list[SchemaValue]:
        versions = self.store.subjects.get(subject)
        if not versions:
            raise errors.subject_not_found(subject)
        chosen = [versions[v] for v in sorted(versions) if deleted or not versions[v].deleted]
        if not chosen:
            raise errors.subject_not_found(subject)
        return chosen

    def version(self, subject: str, version: str, *, deleted: bool = False) -> SchemaValue:
        """Version ``version`` (a number, ``latest`` or -1) of ``subject``."""
        self.catch_up()
        number = parse_version(version)
        versions = self._versions(subject, deleted=deleted)
        if number is None:
            return versions[-1]
        for value in versions:
            if value.version == number:
                return value
        raise errors.version_not_found(subject, number)

    def schema(self, schema_id: int) -> SchemaValue:
        self.catch_up()
        value = self.store.by_id.get(schema_id)
        if value is None:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return value

    def id_versions(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """Every ``(subject, version)`` registered with ``schema_id``."""
        self.schema(schema_id)
        return [
            (subject, value.version)
            for subject in sorted(self.store.subjects)
            for value in sorted(self.store.subjects[subject].values(), key=lambda v: v.version)
            if value.schema_id == schema_id and (deleted or not value.deleted)
        ]

    def referenced_by(self, subject: str, version: str) -> list[int]:
        """The ids of the live schemas that reference ``version`` of ``subject``."""
        value = self.version(subject, version)
        return sorted(
            {
                other.schema_id
                for versions in self.store.subjects.values()
                for other in versions.values()
                if not other.deleted
                and any(
                    (r.subject, r.version) == (subject, value.version) for r in other.references
                )
            }
        )

    def lookup(
        self,
        subject: str,
        request: SchemaRequest,
        *,
        normalize: bool = False,
        deleted: bool = False,
    ) -> SchemaValue:
        """The version of ``subject`` that is ``request``'s schema."""
        self.catch_up()
        parsed = self._parse(request)
        versions = self.store.subjects.get(subject)
        if not versions or not (deleted or any(not v.deleted for v in versions.values())):
            raise errors.subject_not_found(subject)
        for value in sorted(versions.values(), key=lambda v: v.version):
            if value.deleted and not deleted:
                continue
            if self._same(value, request, parsed, normalize=normalize):
                return value
        raise errors.schema_not_found()

    def _same(
        self, value: SchemaValue, request: SchemaRequest, parsed: ParsedSchema, *, normalize: bool
    ) -> bool:
        if value.schema_type != request.schema_type or value.references != request.references:
            return False
        if normalize:
            stored = self._parsed_by_id(value.schema_id)
            return stored.normalized == parsed.normalized
        return value.schema == parsed.canonical

    def compatibility(self, subject: str | None) -> Compatibility:
        """The level ``subject`` follows: its own, else the global one, else BACKWARD."""
        self.catch_up()
        level = self.store.compatibility.get(subject) if subject is not None else None
        level = level or self.store.compatibility.get(None)
        return Compatibility(level) if level else DEFAULT_COMPATIBILITY

    def subject_compatibility(self, subject: str) -> Compatibility:
        """The level set on ``subject`` itself (40408 if none)."""
        self.catch_up()
        level = self.store.compatibility.get(subject)
        if level is None:
            raise errors.subject_config_not_found(subject)
        return Compatibility(level)

    def mode(self, subject: str | None) -> str:
        self.catch_up()
        mode = self.store.modes.get(subject) if subject is not None else None
        return mode or self.store.modes.get(None) or READWRITE

    def subject_mode(self, subject: str) -> str:
        self.catch_up()
        mode = self.store.modes.get(subject)
        if mode is None:
            raise errors.subject_mode_not_found(subject)
        return mode

    def check_compatibility(
        self, subject: str, version: str | None, request: SchemaRequest
    ) -> list[str]:
        """Why ``request`` is incompatible with ``version`` of ``subject`` (None: with
        the versions its level names); empty: compatible."""
        self.catch_up()
        parsed = self._parse(request)
        if subject not in self.store.subjects and version is None:
            return []
        level = self.compatibility(subject)
        if version is None:
            earlier = self.store.live_versions(subject)
        else:
            earlier = [self.version(subject, version)]
            if level is Compatibility.NONE:
                return []
            level = Compatibility(level.value.removesuffix("_TRANSITIVE"))
        return check(level, parsed, [self._parsed_by_id(v.schema_id) for v in reversed(earlier)])

    # -- writes ----------------------------------------------------------------------

    async def register(
        self, subject: str, request: SchemaRequest, *, normalize: bool = False
    ) -> SchemaValue:
        """Register ``request`` under ``subject``: its existing version if already
        there, else a new version once it passes the subject's compatibility check."""
        async with self._write_lock:
            self.catch_up()
            mode = self._writable(subject)
            parsed = self._parse(request)
            versions = self.store.subjects.get(subject, {})
            for value in sorted(versions.values(), key=lambda v: v.version):
                if not value.deleted and self._same(value, request, parsed, normalize=normalize):
                    return value
            value = self._new_version(subject, request, parsed, mode=mode, normalize=normalize)
            await self._log.append([encode_schema(value)])
            self.catch_up()
            self._parsed[value.schema_id] = parsed
            return self.store.subjects[subject][value.version]

    def _new_version(
        self,
        subject: str,
        request: SchemaRequest,
        parsed: ParsedSchema,
        *,
        mode: str,
        normalize: bool,
    ) -> SchemaValue:
        """The version ``request`` would add to ``subject``: checked against the
        subject's level, or, in IMPORT mode, with the id and version it names."""
        versions = self.store.subjects.get(subject, {})
        text = parsed.normalized if normalize else parsed.canonical
        next_version = max(versions, default=0) + 1
        if mode == IMPORT:
            if request.schema_id is None:
                raise errors.operation_not_permitted("A schema id is required in IMPORT mode")
            schema_id = request.schema_id
            holder = self.store.by_id.get(schema_id)
            if holder is not None and (holder.schema_type, holder.schema) != (
                request.schema_type,
                text,
            ):
                raise errors.operation_not_permitted(
                    f"Overwrite new schema with id {schema_id} is not permitted."
                )
        else:
            if request.schema_id is not None:
                raise errors.operation_not_permitted("A schema id may be given only in IMPORT mode")
            earlier = [
                self._parsed_by_id(v.schema_id) for v in reversed(self.store.live_versions(subject))
            ]
            reasons = check(self.compatibility(subject), parsed, earlier)
            if reasons:
                raise errors.incompatible_schema(reasons)
            key = (request.schema_type, text, request.references)
            schema_id = self.store.ids.get(key) or self.store.next_id
        version = request.version or next_version
        if version in versions or (mode != IMPORT and version != next_version):
            raise errors.operation_not_permitted(
                f"Version {version} of subject {subject} cannot be written: "
                f"the next version is {next_version}"
            )
        return SchemaValue(
            subject, version, schema_id, text, request.schema_type, request.references
        )

    def _writable(self, subject: str) -> str:
        mode = self.mode(subject)
        if mode == READONLY:
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft-delete every version of ``subject`` (or, ``permanent``, remove the
        soft-deleted ones); the versions deleted."""
        async with self._write_lock:
            self.catch_up()
            self._writable(subject)
            versions = self.store.subjects.get(subject)
            if not versions:
                raise errors.subject_not_found(subject)
            if permanent:
                if any(not v.deleted for v in versions.values()):
                    raise errors.subject_not_soft_deleted(subject)
                deleted = sorted(versions)
                await self._log.append(
                    [(schema_key(subject, v), None) for v in deleted]
                    + [encode_config(subject, None), encode_mode(subject, None)]
                )
            else:
                deleted = [v for v in sorted(versions) if not versions[v].deleted]
                if not deleted:
                    raise errors.subject_soft_deleted(subject)
                await self._log.append([encode_delete_subject(subject, max(versions))])
            self.catch_up()
            return deleted

    async def delete_version(self, subject: str, version: str, *, permanent: bool = False) -> int:
        """Soft-delete (or, ``permanent``, remove a soft-deleted) version of ``subject``."""
        async with self._write_lock:
            self.catch_up()
            self._writable(subject)
            number = parse_version(version)
            versions = self.store.subjects.get(subject)
            if not versions:
                raise errors.subject_not_found(subject)
            if number is None:
                live = [v for v in sorted(versions) if not versions[v].deleted]
                if not live:
                    raise errors.subject_not_found(subject)
                number = live[-1]
            value = versions.get(number)
            if value is None:
                raise errors.version_not_found(subject, number)
            if permanent:
                if not value.deleted:
                    raise errors.version_not_soft_deleted(subject, number)
                await self._log.append([(schema_key(subject, number), None)])
            else:
                if value.deleted:
                    raise errors.version_soft_deleted(subject, number)
                soft = dataclasses.replace(value, deleted=True)
                await self._log.append([encode_schema(soft)])
            self.catch_up()
            return number

    async def set_compatibility(self, subject: str | None, level: str) -> Compatibility:
        try:
            compatibility = Compatibility(level)
        except ValueError:
            raise errors.invalid_compatibility_level(
                ", ".join(c.value for c in Compatibility)
            ) from None
        async with self._write_lock:
            await self._log.append([encode_config(subject, compatibility.value)])
            self.catch_up()
        return compatibility

    async def delete_compatibility(self, subject: str | None) -> Compatibility:
        """Remove the level of ``subject`` (None: the global one); the level it had."""
        async with self._write_lock:
            self.catch_up()
            previous = self.store.compatibility.get(subject)
            if previous is None:
                if subject is not None:
                    raise errors.subject_config_not_found(subject)
                return DEFAULT_COMPATIBILITY
            await self._log.append([encode_config(subject, None)])
            self.catch_up()
        return Compatibility(previous)

    async def set_mode(self, subject: str | None, mode: str) -> str:
        if mode not in MODES:
            raise errors.invalid_mode(", ".join(MODES))
        async with self._write_lock:
            await self._log.append([encode_mode(subject, mode)])
            self.catch_up()
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self._write_lock:
            self.catch_up()
            previous = self.store.modes.get(subject)
            if previous is None:
                raise errors.subject_mode_not_found(subject)
            await self._log.append([encode_mode(subject, None)])
            self.catch_up()
        return previous

    # -- schemas ---------------------------------------------------------------------

    def _parse(self, request: SchemaRequest) -> ParsedSchema:
        return self._parse_text(request.schema, request.schema_type, request.references)

    def _parse_text(
        self, text: str, schema_type: str, references: tuple[Reference, ...]
    ) -> ParsedSchema:
        try:
            if schema_type == AVRO:
                avro = tuple(self._referenced(r, AvroSchema) for r in references)
                return parse_avro(text, avro)
            if schema_type == JSON:
                for reference in references:
                    self._referenced(reference, JsonSchema)
                return parse_json(text)
        except SchemaError as exc:
            raise errors.invalid_schema(str(exc)) from exc
        raise errors.invalid_schema(f"schema type {schema_type} is not supported")

    def _referenced(self, reference: Reference, kind: type[Parsed]) -> Parsed:
        """The schema ``reference`` names, which must be of the referencing one's type."""
        try:
            value = self.version(reference.subject, str(reference.version))
        except errors.RegistryError:
            raise errors.invalid_schema(
                f"reference {reference.name} names {reference.subject} version "
                f"{reference.version}, which does not exist"
            ) from None
        parsed = self._parsed_by_id(value.schema_id)
        if not isinstance(parsed, kind):
            raise errors.invalid_schema(
                f"reference {reference.name} is a {value.schema_type} schema, "
                "not of the referencing schema's type"
            )
        return parsed

    def _parsed_by_id(self, schema_id: int) -> ParsedSchema:
        parsed = self._parsed.get(schema_id)
        if parsed is None:
            value = self.store.by_id[schema_id]
            try:
                parsed = self._parse_text(value.schema, value.schema_type, value.references)
            except errors.RegistryError as exc:
                # Only a topic another registry wrote can hold one.
                raise errors.store_error(
                    f"stored schema {schema_id} is invalid: {exc.message}"
                ) from exc
            self._parsed[schema_id] = parsed
        return parsed


def parse_version(version: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for ``latest``/-1."""
    if version in (LATEST, "-1"):
        return None
    try:
        number = int(version)
    except ValueError:
        raise errors.invalid_version(version) from None
    if not 1 <= number <= _MAX_VERSION:
        raise errors.invalid_version(version)
    return number


def request_references(document: Sequence[object]) -> tuple[Reference, ...]:
    """The ``references`` of a request body."""
    references: list[Reference] = []
    for entry in document:
        if not isinstance(entry, dict):
            raise errors.unprocessable("each reference must be a JSON object")
        try:
            references.append(
                Reference(str(entry["name"]), str(entry["subject"]), int(entry["version"]))
            )
        except (KeyError, TypeError, ValueError):
            raise errors.unprocessable(
                "a reference needs a name, a subject and an integer version"
            ) from None
    return tuple(references)
