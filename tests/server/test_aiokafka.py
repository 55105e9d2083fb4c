"""aiokafka's producer and consumer against a broker on the test's own event loop."""

from __future__ import annotations

import asyncio

import aiokafka
import pytest

from tickwheel.server import Broker

pytestmark = pytest.mark.integration

COUNT = 200
TIMEOUT_S = 10.0


@pytest.mark.asyncio
async def test_produce_and_consume(async_tickwheel_broker: Broker) -> None:
    servers = async_tickwheel_broker.bootstrap_servers
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, acks="all")
    await producer.start()
    try:
        sent = [await producer.send_and_wait("ak", b"a-%d" % i, partition=0) for i in range(COUNT)]
    finally:
        await producer.stop()
    assert [m.offset for m in sent] == list(range(COUNT))
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition("ak", 0)])
        await consumer.seek_to_beginning()
        values: list[bytes] = []
        while len(values) < COUNT:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), TIMEOUT_S)
            values += [m.value for messages in batches.values() for m in messages if m.value]
    finally:
        await consumer.stop()
    assert values == [b"a-%d" % i for i in range(COUNT)]
