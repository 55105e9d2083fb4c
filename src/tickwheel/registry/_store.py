"""``SchemaStore``: the registry's state, the ``_schemas`` topic applied in order.

Subjects hold versions (``SchemaValue``), soft-deleted ones included until a hard
delete removes them; a schema id names one schema (its type, its compact text and its
references) wherever it is registered, so registering the same schema under another
subject answers the same id. ``next_id`` is one more than the greatest id ever applied,
so ids stay unique across restarts: they are read back from the topic.

``subjects_by_id`` indexes the subjects under which each id is a live (not
soft-deleted) version, kept as each change is applied, so the broker's schema
validation (``_validator``) asks one dict and one set per schema id.

Compatibility levels and modes are kept per subject and globally (subject None).

Concurrency: event-loop thread only; ``apply`` is the one way state changes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

from tickwheel.registry._records import (
    Change,
    ConfigChange,
    DeleteSubjectChange,
    ModeChange,
    Reference,
    SchemaChange,
    SchemaValue,
)

SchemaIdentity = tuple[str, str, tuple[Reference, ...]]
"""What makes two registered schemas the same: type, compact text, references."""


def identity(value: SchemaValue) -> SchemaIdentity:
    return value.schema_type, value.schema, value.references


@dataclass
class SchemaStore:
    """Subjects, ids, levels and modes, as the records applied so far say."""

    subjects: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    by_id: dict[int, SchemaValue] = field(default_factory=dict)
    ids: dict[SchemaIdentity, int] = field(default_factory=dict)
    compatibility: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    # How many versions (soft-deleted ones included) hold each id.
    uses: Counter[int] = field(default_factory=Counter)
    # The subjects in which each id is a live version.
    subjects_by_id: dict[int, set[str]] = field(default_factory=dict)
    max_id: int = 0

    @property
    def next_id(self) -> int:
        return self.max_id + 1

    def apply(self, change: Change) -> None:
        """Apply one record's change."""
        if not isinstance(change, (SchemaChange, DeleteSubjectChange)):
            self._apply(change)
            return
        subject = change.subject
        live_before = self._live_ids(subject)
        self._apply(change)
        live_after = self._live_ids(subject)
        for schema_id in live_before - live_after:
            holders = self.subjects_by_id[schema_id]
            holders.discard(subject)
            if not holders:
                del self.subjects_by_id[schema_id]
        for schema_id in live_after - live_before:
            self.subjects_by_id.setdefault(schema_id, set()).add(subject)

    def _live_ids(self, subject: str) -> set[int]:
        versions = self.subjects.get(subject, {})
        return {value.schema_id for value in versions.values() if not value.deleted}

    def _apply(self, change: Change) -> None:
        match change:
            case SchemaChange(subject, version, None):
                versions = self.subjects.get(subject, {})
                removed = versions.pop(version, None)
                if not versions:
                    self.subjects.pop(subject, None)
                if removed is not None:
                    self._forget_use(removed)
            case SchemaChange(subject, version, SchemaValue() as value):
                replaced = self.subjects.setdefault(subject, {}).get(version)
                self.subjects[subject][version] = value
                self.uses[value.schema_id] += 1
                if replaced is not None:
                    self._forget_use(replaced)
                self.by_id.setdefault(value.schema_id, value)
                self.ids.setdefault(identity(value), value.schema_id)
                self.max_id = max(self.max_id, value.schema_id)
            case ConfigChange(subject, None):
                self.compatibility.pop(subject, None)
            case ConfigChange(subject, str(level)):
                self.compatibility[subject] = level
            case ModeChange(subject, None):
                self.modes.pop(subject, None)
            case ModeChange(subject, str(mode)):
                self.modes[subject] = mode
            case DeleteSubjectChange(subject, newest):
                versions = self.subjects.get(subject, {})
                for version, value in list(versions.items()):
                    if version <= newest and not value.deleted:
                        versions[version] = dataclasses.replace(value, deleted=True)

    def _forget_use(self, value: SchemaValue) -> None:
        """``value`` no longer holds its id: the id is gone once nothing holds it."""
        self.uses[value.schema_id] -= 1
        if self.uses[value.schema_id] <= 0:
            del self.uses[value.schema_id]
            self.by_id.pop(value.schema_id, None)
            self.ids.pop(identity(value), None)

    def live_versions(self, subject: str) -> list[SchemaValue]:
        """The versions of ``subject`` not soft-deleted, oldest first."""
        versions = self.subjects.get(subject, {})
        return [versions[v] for v in sorted(versions) if not versions[v].deleted]
