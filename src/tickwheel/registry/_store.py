"""``SchemaStore``: the registry's state, the ``_schemas`` topic applied in order.

Subjects hold versions (``SchemaValue``), soft-deleted ones included until a hard
delete removes them; a schema id names one schema (its type, its compact text and its
references) wherever it is registered, so registering the same schema under another
subject answers the same id. ``next_id`` is one more than the greatest id ever applied,
so ids stay unique across restarts: they are read back from the topic.

Compatibility levels and modes are kept per subject and globally (subject None).

Concurrency: event-loop thread only; ``apply`` is the one way state changes.
"""

from __future__ import annotations

import dataclasses
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
    max_id: int = 0

    @property
    def next_id(self) -> int:
        return self.max_id + 1

    def apply(self, change: Change) -> None:
        """Apply one record's change."""
        match change:
            case SchemaChange(subject, version, None):
                removed = self.subjects.get(subject, {}).pop(version, None)
                if not self.subjects.get(subject, True):
                    del self.subjects[subject]
                if removed is not None and not self._in_use(removed.schema_id):
                    self.by_id.pop(removed.schema_id, None)
                    self.ids.pop(identity(removed), None)
            case SchemaChange(subject, version, SchemaValue() as value):
                self.subjects.setdefault(subject, {})[version] = value
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

    def _in_use(self, schema_id: int) -> bool:
        return any(
            value.schema_id == schema_id
            for versions in self.subjects.values()
            for value in versions.values()
        )

    def live_versions(self, subject: str) -> list[SchemaValue]:
        """The versions of ``subject`` not soft-deleted, oldest first."""
        versions = self.subjects.get(subject, {})
        return [versions[v] for v in sorted(versions) if not versions[v].deleted]
