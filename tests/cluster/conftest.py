"""The cluster tests' fixture: ZooKeeper and three broker processes per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwheel.cluster import LocalCluster

from .helpers import local_cluster

_LOG_TAIL_LINES = 40


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A running three-broker cluster, stopped (paused brokers included) at the end.

    The end of each broker's log is printed at teardown: pytest shows it when the
    test failed.
    """
    with local_cluster(tmp_path) as running:
        yield running
    for broker in running.brokers:
        lines = broker.output.read_text(encoding="utf-8", errors="replace").splitlines()
        print(f"--- broker {broker.broker_id} ({broker.output}) ---")
        print("\n".join(lines[-_LOG_TAIL_LINES:]))
