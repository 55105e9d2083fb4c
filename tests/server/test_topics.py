"""TopicRegistry: topic names, persistence, and producer ids that are never reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickwheel.server._topics import PRODUCER_ID_BLOCK_SIZE, TopicRegistry, topic_name_error


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
