"""A started ``ReplicaManager`` hosting topic ``t`` (two partitions) on the test's loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tickwheel.log import LogConfig
from tickwheel.replica import ReplicaManager, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
BROKER_ID = 0


@pytest_asyncio.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    replica_manager = ReplicaManager(BROKER_ID, [tmp_path])
    replica_manager.start()
    for tp in (T0, T1):
        replica_manager.make_leader(tp, LogConfig())
    yield replica_manager
    replica_manager.shutdown()
