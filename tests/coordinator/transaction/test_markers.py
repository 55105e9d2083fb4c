"""Markers to partitions another broker leads: the ``MarkerTransport`` path and retries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.replica import TopicPartition, TxnMarker

from .conftest import T0, T1, Txn

pytestmark = pytest.mark.asyncio
E = ErrorCode
REMOTE = 1


class Transport:
    """Answers each request with the next scripted outcome (an exception or codes)."""

    def __init__(self, *outcomes: ErrorCode | Exception) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[tuple[int, tuple[TxnMarker, ...]]] = []
        self.answered = asyncio.Event()

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> dict[int, dict[TopicPartition, int]]:
        self.sent.append((broker_id, tuple(markers)))
        outcome = self.outcomes.pop(0)
        self.answered.set()
        if isinstance(outcome, Exception):
            raise outcome
        return {m.producer_id: dict.fromkeys(m.partitions, int(outcome)) for m in markers}

    async def close(self) -> None:
        self.outcomes.clear()


async def commit_remote(txn: Txn, transport: Transport) -> tuple[int, int]:
    txn.service.markers._transport = transport
    txn.leaders[T1] = REMOTE
    init = await txn.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert txn.add(pid, epoch, T0, T1) == E.none
    assert txn.end(pid, epoch) == E.none
    return pid, epoch


async def settle(transport: Transport) -> None:
    await asyncio.wait_for(transport.answered.wait(), 5)
    transport.answered.clear()
    for _ in range(3):  # let the sender task apply the answer
        await asyncio.sleep(0)


async def test_remote_partitions_get_write_txn_markers(txn: Txn) -> None:
    transport = Transport(E.none)
    pid, epoch = await commit_remote(txn, transport)
    assert txn.describe().state == "PrepareCommit"  # the local marker is written, T1 waits
    await settle(transport)
    ((broker, (marker,)),) = transport.sent
    assert (broker, marker.producer_id, marker.producer_epoch, marker.commit) == (
        REMOTE,
        pid,
        epoch,
        True,
    )
    assert marker.partitions == (T1,)
    assert txn.describe().state == "CompleteCommit"


async def test_a_lost_request_and_a_moved_leader_are_retried(txn: Txn) -> None:
    transport = Transport(ConnectionResetError("gone"), E.not_leader_or_follower, E.none)
    await commit_remote(txn, transport)
    await settle(transport)
    txn.clock.advance(100)  # retry.backoff.ms, then routed again
    await settle(transport)
    assert txn.describe().state == "PrepareCommit"
    txn.clock.advance(100)
    await settle(transport)
    assert len(transport.sent) == 3
    assert txn.describe().state == "CompleteCommit"


async def test_a_fenced_marker_stops_the_sending(txn: Txn) -> None:
    transport = Transport(E.transaction_coordinator_fenced)
    await commit_remote(txn, transport)
    await settle(transport)
    txn.clock.advance(1_000)
    assert len(transport.sent) == 1
    assert txn.describe().state == "PrepareCommit"
    assert txn.service.markers.pending == {}


async def test_an_answer_that_does_not_decode_is_retried_by_a_living_sender(txn: Txn) -> None:
    transport = Transport(ValueError("garbled answer"), E.none)
    await commit_remote(txn, transport)
    await settle(transport)
    txn.clock.advance(100)  # retry.backoff.ms
    await settle(transport)
    assert len(transport.sent) == 2
    assert txn.describe().state == "CompleteCommit"
