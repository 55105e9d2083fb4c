"""TopicRegistry: topic names and ids, persistence, and producer ids that are never reused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.server._topics import (
    METADATA_FILE,
    PRODUCER_ID_BLOCK_SIZE,
    TopicRegistry,
    decode_topic_id,
    encode_topic_id,
    legacy_topic_id,
    topic_name_error,
)


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad/name", "spa ce", "ü"])
def test_illegal_topic_names(name: str) -> None:
    assert topic_name_error(name) is not None


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "a" * 249])
def test_legal_topic_names(name: str) -> None:
    assert topic_name_error(name) is None


def test_topics_survive_a_reload(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    registry.create("t", 2, {"retention.ms": "5"})
    registry.set_partitions("t", 4)
    registry.create("gone", 1, {})
    registry.delete("gone")
    reloaded = TopicRegistry(tmp_path)
    reloaded.load()
    assert list(reloaded.topics) == ["t"]
    assert reloaded.topics["t"].num_partitions == 4
    assert reloaded.topics["t"].configs == {"retention.ms": "5"}


def test_producer_ids_continue_after_the_reserved_block(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    first = [registry.allocate_producer_id() for _ in range(3)]
    assert first == [0, 1, 2]
    reloaded = TopicRegistry(tmp_path)
    reloaded.load()
    assert reloaded.allocate_producer_id() == PRODUCER_ID_BLOCK_SIZE


def test_partitions_found_on_disk_are_adopted(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    registry.adopt("disk", 3)
    registry.adopt("disk", 2)
    assert registry.topics["disk"].num_partitions == 3


def test_topic_ids_survive_a_reload_and_name_their_topic(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    first = registry.create("a", 1, {}).topic_id
    second = registry.create("b", 1, {}).topic_id
    assert first != second
    reloaded = TopicRegistry(tmp_path)
    reloaded.load()
    assert reloaded.topics["a"].topic_id == first
    assert reloaded.name_of(first) == "a"
    assert reloaded.name_of(second) == "b"


def test_a_topic_created_again_gets_a_new_id(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    old = registry.create("t", 1, {}).topic_id
    registry.delete("t")
    assert registry.name_of(old) is None
    new = registry.create("t", 1, {}).topic_id
    assert new != old
    assert registry.name_of(old) is None
    assert registry.name_of(new) == "t"


def test_a_file_without_topic_ids_gets_the_same_ids_on_every_broker(tmp_path: Path) -> None:
    old_format = {
        "version": 1,
        "producer_id_block_end": 0,
        "topics": {"legacy": {"partitions": 2, "configs": {}}},
        "broker_configs": {},
    }
    ids = []
    for broker in ("b0", "b1"):
        (tmp_path / broker).mkdir()
        (tmp_path / broker / METADATA_FILE).write_text(json.dumps(old_format))
        registry = TopicRegistry(tmp_path / broker)
        registry.load()
        ids.append(registry.topics["legacy"].topic_id)
        adopted = TopicRegistry(tmp_path / broker / "adopted")
        adopted.adopt("legacy", 2)
        ids.append(adopted.topics["legacy"].topic_id)
    assert len(set(ids)) == 1
    assert ids[0] == legacy_topic_id("legacy")


@given(st.uuids())
def test_topic_ids_round_trip_through_kafkas_text_form(topic_id: uuid.UUID) -> None:
    text = encode_topic_id(topic_id)
    assert len(text) == 22
    assert "=" not in text
    assert decode_topic_id(text) == topic_id


@pytest.mark.parametrize("text", ["", "not base64!", "AAAA"])
def test_text_that_is_no_topic_id_decodes_to_none(text: str) -> None:
    assert decode_topic_id(text) is None
