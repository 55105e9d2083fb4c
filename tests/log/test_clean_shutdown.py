"""The clean shutdown marker, as Kafka's ``CleanShutdownFileHandler`` keeps it."""

from __future__ import annotations

import json
from pathlib import Path

from tickwheel.log import (
    CLEAN_SHUTDOWN_FILE,
    NO_BROKER_EPOCH,
    take_clean_shutdown,
    write_clean_shutdown,
)


def test_a_clean_shutdown_is_read_once_with_its_broker_epoch(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for log_dir in dirs:
        log_dir.mkdir()
    write_clean_shutdown(dirs, 4242)
    marker = json.loads((dirs[0] / CLEAN_SHUTDOWN_FILE).read_text())
    assert marker == {"version": 0, "brokerEpoch": 4242}
    assert take_clean_shutdown(dirs) == 4242
    assert not any((log_dir / CLEAN_SHUTDOWN_FILE).exists() for log_dir in dirs)
    # Killed after that start: the next start finds no marker.
    assert take_clean_shutdown(dirs) == NO_BROKER_EPOCH


def test_a_directory_without_a_readable_marker_makes_the_shutdown_unclean(
    tmp_path: Path,
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for log_dir in dirs:
        log_dir.mkdir()
    write_clean_shutdown(dirs[:1], 7)
    assert take_clean_shutdown(dirs) == NO_BROKER_EPOCH
    (dirs[0] / CLEAN_SHUTDOWN_FILE).write_text("{not json")
    assert take_clean_shutdown(dirs[:1]) == NO_BROKER_EPOCH
