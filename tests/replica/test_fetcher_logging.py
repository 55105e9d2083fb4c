"""A follower whose leader cannot be reached logs it once, then with backoff and a count.

The transport refuses every fetch, as a leader whose port is closed does, and counts the
attempts; the fetcher retries every ``replica.fetch.backoff.ms`` (10 ms here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import NoReturn

import pytest

from tickwheel.log import LogConfig
from tickwheel.replica import (
    EpochEndOffset,
    FetcherConfig,
    FollowerFetchRequest,
    FollowerFetchResult,
    LeaderAndIsr,
    ReplicaFetcherManager,
    ReplicaManager,
    TopicPartition,
    become_follower,
)

from .conftest import T0

FETCHER_LOGGER = "tickwheel.replica._fetcher"
# A leader id of this test's own: lines are limited per leader, process-wide.
UNREACHABLE_LEADER = 77
ATTEMPTS = 30
TIMEOUT_S = 10.0


class RefusingTransport:
    """A leader nobody listens for: every fetch is refused."""

    def __init__(self, attempts: int) -> None:
        self.calls = 0
        self.enough = asyncio.Event()
        self._attempts = attempts

    async def fetch(
        self, leader_id: int, request: FollowerFetchRequest
    ) -> Mapping[TopicPartition, FollowerFetchResult]:
        return self._refuse(leader_id)

    async def end_offsets_for_epochs(
        self, leader_id: int, replica_id: int, epochs: Mapping[TopicPartition, tuple[int, int]]
    ) -> Mapping[TopicPartition, EpochEndOffset]:
        return self._refuse(leader_id)

    def _refuse(self, leader_id: int) -> NoReturn:
        self.calls += 1
        if self.calls >= self._attempts:
            self.enough.set()
        raise ConnectionRefusedError(f"leader {leader_id} refused the connection")

    async def disconnect(self, leader_id: int) -> None:
        """Nothing is open."""


@pytest.mark.asyncio
async def test_an_unreachable_leader_is_one_line_not_one_per_attempt(
    manager: ReplicaManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, FETCHER_LOGGER)
    state = LeaderAndIsr(UNREACHABLE_LEADER, leader_epoch=1, isr=(UNREACHABLE_LEADER,), version=0)
    # The conftest's manager leads T0; make it follow the unreachable leader instead.
    become_follower(manager, T0, state, (UNREACHABLE_LEADER, 0), LogConfig())
    transport = RefusingTransport(ATTEMPTS)
    fetchers = ReplicaFetcherManager(manager, transport, FetcherConfig(backoff_ms=10))
    await fetchers.follow(T0, UNREACHABLE_LEADER, state.leader_epoch)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            await transport.enough.wait()
    finally:
        await fetchers.shutdown()
    lines = [r.getMessage() for r in caplog.records if r.name == FETCHER_LOGGER]
    assert transport.calls >= ATTEMPTS
    assert len(lines) == 1, lines
    # The log has a leader epoch, so its first question is where that epoch ends.
    assert lines[0].startswith(f"asking leader {UNREACHABLE_LEADER} where our epochs end failed")
