"""The store the ``_schemas`` records build: ids shared by subjects, soft and hard deletes."""

from __future__ import annotations

from tickwheel.registry._records import (
    ConfigChange,
    DeleteSubjectChange,
    SchemaChange,
    SchemaValue,
)
from tickwheel.registry._store import SchemaStore


def version(subject: str, number: int, schema_id: int, schema: str = '"int"') -> SchemaChange:
    return SchemaChange(subject, number, SchemaValue(subject, number, schema_id, schema))


def test_an_id_lives_while_a_version_holds_it() -> None:
    store = SchemaStore()
    store.apply(version("a", 1, 1))
    store.apply(version("b", 1, 1))
    store.apply(SchemaChange("a", 1, None))
    assert 1 in store.by_id
    assert list(store.subjects) == ["b"]
    store.apply(SchemaChange("b", 1, None))
    assert store.by_id == {}
    assert store.ids == {}
    assert store.next_id == 2  # never given again while this store lives


def test_a_subject_deleted_softly_keeps_its_versions_and_ids() -> None:
    store = SchemaStore()
    store.apply(version("a", 1, 1))
    store.apply(version("a", 2, 2, '"long"'))
    store.apply(DeleteSubjectChange("a", 2))
    assert [v.deleted for v in store.subjects["a"].values()] == [True, True]
    assert store.live_versions("a") == []
    assert set(store.by_id) == {1, 2}


def test_a_version_rewritten_with_another_id_frees_the_old_one() -> None:
    store = SchemaStore()
    store.apply(version("a", 1, 1))
    store.apply(version("a", 1, 5, '"long"'))
    assert set(store.by_id) == {5}


def test_levels_are_set_and_removed_per_subject_and_globally() -> None:
    store = SchemaStore()
    store.apply(ConfigChange(None, "FULL"))
    store.apply(ConfigChange("a", "NONE"))
    store.apply(ConfigChange("a", None))
    assert store.compatibility == {None: "FULL"}


def test_subjects_by_id_follows_live_versions_through_soft_and_hard_deletes() -> None:
    store = SchemaStore()
    store.apply(version("a", 1, 1))
    store.apply(version("b", 1, 1))
    store.apply(version("a", 2, 2, '"long"'))
    assert store.subjects_by_id == {1: {"a", "b"}, 2: {"a"}}
    store.apply(DeleteSubjectChange("a", 2))
    assert store.subjects_by_id == {1: {"b"}}
    store.apply(SchemaChange("b", 1, None))
    assert store.subjects_by_id == {}
    store.apply(version("a", 3, 1))
    assert store.subjects_by_id == {1: {"a"}}


def test_a_version_soft_deleted_alone_leaves_the_subjects_other_ids() -> None:
    store = SchemaStore()
    store.apply(version("a", 1, 1))
    store.apply(version("a", 2, 2, '"long"'))
    soft = SchemaValue("a", 1, 1, '"int"', deleted=True)
    store.apply(SchemaChange("a", 1, soft))
    assert store.subjects_by_id == {2: {"a"}}
