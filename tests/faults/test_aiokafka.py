"""aiokafka through injected faults, on a broker on the test's own event loop."""

from __future__ import annotations

import asyncio

import aiokafka
import pytest

from tickwheel.faults import FaultPlan
from tickwheel.server import Broker

pytestmark = pytest.mark.integration

COUNT = 20
TIMEOUT_S = 20.0


@pytest.mark.asyncio
async def test_an_idempotent_producer_and_a_group_ride_out_the_faults(
    async_tickwheel_broker: Broker, async_tickwheel_faults: FaultPlan
) -> None:
    servers = async_tickwheel_broker.bootstrap_servers
    faults = async_tickwheel_faults
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=servers, enable_idempotence=True, retry_backoff_ms=20
    )
    await producer.start()
    try:
        await producer.send_and_wait("ai", b"warm-up")
        not_leader = faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=2)
        sent = [await producer.send_and_wait("ai", b"a-%d" % i) for i in range(COUNT)]
    finally:
        await producer.stop()
    assert not_leader.spent
    assert [m.offset for m in sent] == list(range(1, COUNT + 1))
    coordinator_faults = [
        faults.add(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=1),
        faults.add(api="JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", count=1),
        faults.add(api="OffsetFetch", kind="delay", delay_ms=200, count=1),
    ]
    consumer = aiokafka.AIOKafkaConsumer(
        "ai",
        bootstrap_servers=servers,
        group_id="ai-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        retry_backoff_ms=20,
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        while len(values) < COUNT + 1:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), TIMEOUT_S)
            values += [m.value for messages in batches.values() for m in messages if m.value]
        await consumer.commit()
    finally:
        await consumer.stop()
    assert values == [b"warm-up", *(b"a-%d" % i for i in range(COUNT))]
    assert [handle.spent for handle in coordinator_faults] == [True, True, True]
