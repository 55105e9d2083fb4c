"""The cluster tests' fixture: ZooKeeper and three broker processes per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwheel.cluster import LocalCluster

from .helpers import local_cluster, print_broker_logs


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A running three-broker cluster, stopped (paused brokers included) at the end.

    The end of each broker's log is printed at teardown: pytest shows it when the
    test failed.
    """
    with local_cluster(tmp_path) as running:
        yield running
    print_broker_logs(running)
