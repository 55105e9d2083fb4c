"""``LocalOffsetsLog`` over real ``tickwheel.log`` Logs: commits survive closing the logs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.group import (
    OFFSETS_TOPIC,
    GroupCoordinator,
    GroupMetadataManager,
    LocalOffsetsLog,
    OffsetValue,
)
from tickwheel.log import Log, LogConfig

from .harness import make_config

PARTITIONS = 3
# Small segments, so that a load reads across several of them.
SEGMENT_BYTES = 1024


class Logs:
    """One Log per ``__consumer_offsets`` partition in a directory; closable and reopenable."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.open_logs: dict[int, Log] = {}

    def log_for(self, partition: int) -> Log:
        if partition not in self.open_logs:
            config = LogConfig.from_properties({"segment.bytes": str(SEGMENT_BYTES)})
            path = self.root / f"{OFFSETS_TOPIC}-{partition}"
            self.open_logs[partition] = Log.open(path, config)
        return self.open_logs[partition]

    def close(self) -> None:
        for log in self.open_logs.values():
            log.close()
        self.open_logs.clear()


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[Logs]:
    opened = Logs(tmp_path)
    yield opened
    opened.close()


def start(logs: Logs) -> tuple[GroupCoordinator, Callable[[], None]]:
    config = make_config(offsets_topic_num_partitions=PARTITIONS)
    manager = GroupMetadataManager(config, LocalOffsetsLog(logs.log_for))
    coordinator = GroupCoordinator(config, manager, reaper_enabled=False)
    coordinator.startup()
    for partition in range(PARTITIONS):
        coordinator.on_elected(partition)
    return coordinator, coordinator.shutdown


def test_commits_survive_closing_and_reopening_the_logs(logs: Logs) -> None:
    coordinator, stop = start(logs)
    answers: list[dict[tuple[str, int], ErrorCode]] = []
    for round_number in range(40):  # enough records to roll several segments
        for group_id in ("alpha", "beta", "gamma"):
            offsets = {("t", p): OffsetValue(round_number * 10 + p, -1, "md", 0) for p in (0, 1)}
            coordinator.handle_commit_offsets(group_id, "", None, -1, offsets, answers.append)
    assert all(set(a.values()) == {ErrorCode.none} for a in answers)
    assert coordinator.handle_delete_groups(["gamma"]) == {"gamma": ErrorCode.none}
    stop()
    logs.close()
    assert len(logs.log_for(coordinator.partition_for("alpha")).segment_base_offsets) > 1

    reopened, stop_again = start(logs)
    try:
        for group_id in ("alpha", "beta"):
            error, fetched = reopened.handle_fetch_offsets(group_id, None)
            assert error is ErrorCode.none
            assert {tp: f.offset for tp, f in fetched.items()} == {("t", 0): 390, ("t", 1): 391}
            assert fetched[("t", 0)].metadata == "md"
        assert reopened.handle_fetch_offsets("gamma", None)[1] == {}
    finally:
        stop_again()


def test_append_errors_come_back_as_codes(logs: Logs) -> None:
    offsets_log = LocalOffsetsLog(logs.log_for)
    outcomes: list[tuple[ErrorCode, int]] = []

    def appended(error: ErrorCode, base_offset: int) -> None:
        outcomes.append((error, base_offset))

    offsets_log.append(0, b"not a record batch", appended)
    tombstone = build_batch([(b"\x00\x02\x00\x01g", None)], 0)
    offsets_log.append(0, tombstone, appended)
    offsets_log.append(0, tombstone, appended)
    assert outcomes[0][0] is not ErrorCode.none
    assert outcomes[0][1] == -1
    assert outcomes[1:] == [(ErrorCode.none, 0), (ErrorCode.none, 1)]
    assert b"".join(offsets_log.read(0)).startswith(b"\x00" * 8)  # first offset is 0
