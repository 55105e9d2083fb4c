"""A started ``ReplicaManager`` and ``SharePartitionManager`` on a manual clock.

``Shares`` bundles them on the test's event loop, with topic ``t`` (one partition) whose
id the manager resolves, the in-memory persister, and helpers to produce and to move
the clock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest_asyncio

from replica.records import batch
from tickwheel.log import LogConfig
from tickwheel.replica import ReplicaManager, TopicPartition
from tickwheel.share_delivery import ShareConfig, SharePartitionKey, SharePartitionManager
from tickwheel.timer import LoopTimers, ManualClock

from .persister import InMemoryPersister

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=7)
TP = TopicPartition(TOPIC, 0)
KEY = SharePartitionKey("g", TOPIC_ID, 0)
LOCK_MS = 1_000
CONFIG = ShareConfig(
    group_share_record_lock_duration_ms=LOCK_MS,
    group_share_min_record_lock_duration_ms=LOCK_MS,
    group_share_delivery_count_limit=3,
)


class Shares:
    """The managers, the clock, the persister and the group configs of one test."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock()
        self.timers = LoopTimers(self.clock)
        self.replica_manager = ReplicaManager(0, [tmp_path], timers=self.timers)
        self.persister = InMemoryPersister()
        self.group_configs: dict[str, str] = {}
        self.manager = self.new_manager()

    def new_manager(self, clock_ms: Callable[[], int] | None = None) -> SharePartitionManager:
        """A share-partition manager over the same log and persister (a restart)."""
        manager = SharePartitionManager(
            CONFIG,
            self.replica_manager,
            self.persister,
            timers=self.timers,
            topic_name=lambda topic_id: TOPIC if topic_id == TOPIC_ID else None,
            group_configs=lambda group_id: self.group_configs,
            **({} if clock_ms is None else {"clock_ms": clock_ms}),
        )
        self.replica_manager.high_watermark_listener = manager.on_high_watermark
        return manager

    async def produce(self, *values: bytes) -> None:
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.replica_manager.append_records(1_000, 1, {TP: batch(*values)}, done.set_result)
        await done

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await asyncio.sleep(0)  # let the tasks the expiries started run


@pytest_asyncio.fixture
async def shares(tmp_path: Path) -> AsyncIterator[Shares]:
    bundle = Shares(tmp_path)
    bundle.timers.start()
    bundle.replica_manager.make_leader(TP, LogConfig())
    yield bundle
    bundle.manager.shutdown()
    bundle.timers.stop()
    bundle.replica_manager.shutdown()
