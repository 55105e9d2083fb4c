"""A broker on a ``ManualClock``: its timeouts fire when the test advances the clock.

Real clients (confluent-kafka) talk to ``tickwheel_manual_broker``; each test picks a
timeout the broker decides -- a group session, the initial rebalance delay, a long
poll's ``fetch.wait.max.ms``, ``retention.ms`` -- and shows that it fires exactly when
``tickwheel_clock.advance`` passes it and not a millisecond before, with no sleeping.
The clients' own wall-clock timeouts are set far beyond the test's real duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiokafka
import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupState,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from server.wire import WireClient
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, Broker
from tickwheel.timer import ManualClock

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 60_000
INITIAL_REBALANCE_DELAY_MS = 3_000
FETCH_WAIT_MAX_MS = 30_000
RETENTION_MS = 60_000
RETENTION_CHECK_INTERVAL_MS = 1_000
OFFSETS_RETENTION_MS = 60_000
CONNECTIONS_MAX_IDLE_MS = 600_000  # Kafka's default; checked every tenth of it
API_VERSIONS = ApiKey.API_VERSIONS
WAIT_S = 20.0
TESTING_PAGE = Path(__file__).resolve().parents[1] / "docs" / "testing.md"
SRC = Path(__file__).resolve().parents[1] / "src"
_POLL_S = 0.01


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "group.initial.rebalance.delay.ms": str(INITIAL_REBALANCE_DELAY_MS),
        "log.retention.check.interval.ms": str(RETENTION_CHECK_INTERVAL_MS),
        "offsets.retention.minutes": str(OFFSETS_RETENTION_MS // 60_000),
        "offsets.retention.check.interval.ms": str(RETENTION_CHECK_INTERVAL_MS),
    }


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline_s = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline_s, f"timed out waiting for {what}"
        time.sleep(_POLL_S)


def _create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config or {})])
    futures[name].result(WAIT_S)


@pytest.fixture
def consumer(tickwheel_manual_broker: BackgroundBroker) -> Iterator[Consumer]:
    client = Consumer(
        {
            "bootstrap.servers": tickwheel_manual_broker.bootstrap_servers,
            "group.id": "manual-clock",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            # No heartbeat in the test's (real) lifetime: only the broker's clock counts.
            "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 3,
            "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
            "enable.auto.commit": False,
        }
    )
    yield client
    client.close()


def _group(bootstrap: str, group_id: str) -> tuple[ConsumerGroupState, list[str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group_id])[group_id].result(WAIT_S)
    return description.state, [member.member_id for member in description.members]


def test_a_member_joins_after_the_initial_delay_and_expires_after_its_session(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock, consumer: Consumer
) -> None:
    bootstrap = tickwheel_manual_broker.bootstrap_servers
    _create_topic(bootstrap, "sessions")
    consumer.subscribe(["sessions"])
    _wait_for(
        lambda: _group(bootstrap, "manual-clock")[0] == ConsumerGroupState.PREPARING_REBALANCING,
        "the JoinGroup waiting out group.initial.rebalance.delay.ms",
    )
    tickwheel_clock.advance(INITIAL_REBALANCE_DELAY_MS - 1)
    assert _group(bootstrap, "manual-clock")[0] == ConsumerGroupState.PREPARING_REBALANCING
    tickwheel_clock.advance(1)

    def assigned() -> bool:
        consumer.poll(_POLL_S)
        return bool(consumer.assignment())

    _wait_for(assigned, "the assignment")
    member_id = consumer.memberid()
    _wait_for(lambda: _group(bootstrap, "manual-clock")[0] == ConsumerGroupState.STABLE, "Stable")

    tickwheel_clock.advance(SESSION_TIMEOUT_MS - 1)
    assert _group(bootstrap, "manual-clock") == (ConsumerGroupState.STABLE, [member_id])
    tickwheel_clock.advance(1)
    assert _group(bootstrap, "manual-clock") == (ConsumerGroupState.EMPTY, [])


def test_a_long_poll_is_answered_when_the_clock_passes_its_max_wait(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock, consumer: Consumer
) -> None:
    _create_topic(tickwheel_manual_broker.bootstrap_servers, "long-poll")
    consumer.assign([TopicPartition("long-poll", 0, 0)])

    def fetch() -> tuple[int, int]:
        consumer.poll(_POLL_S)
        metrics = tickwheel_manual_broker.metrics()["Fetch"]
        return metrics.num_delayed_operations, metrics.expirations

    _wait_for(lambda: fetch() == (1, 0), "the consumer's fetch to wait in the purgatory")
    tickwheel_clock.advance(FETCH_WAIT_MAX_MS - 1)
    assert fetch() == (1, 0)
    tickwheel_clock.advance(1)
    assert tickwheel_manual_broker.metrics()["Fetch"].expirations == 1
    # Answered empty, the consumer fetches again, and waits again.
    _wait_for(lambda: fetch() == (1, 1), "the consumer's next fetch")


def test_retention_deletes_an_old_segment_when_the_clock_passes_retention_ms(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock, consumer: Consumer
) -> None:
    bootstrap = tickwheel_manual_broker.bootstrap_servers
    _create_topic(bootstrap, "retained", {"retention.ms": str(RETENTION_MS)})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("retained", b"old")
    assert producer.flush(WAIT_S) == 0
    partition = TopicPartition("retained", 0)
    assert consumer.get_watermark_offsets(partition, WAIT_S) == (0, 1)
    # The record's timestamp is the client's (real) clock, a moment after the broker's
    # epoch origin: one check interval of margin covers it.
    tickwheel_clock.advance(RETENTION_MS - RETENTION_CHECK_INTERVAL_MS)
    assert consumer.get_watermark_offsets(partition, WAIT_S) == (0, 1)
    tickwheel_clock.advance(2 * RETENTION_CHECK_INTERVAL_MS + RETENTION_MS)
    assert consumer.get_watermark_offsets(partition, WAIT_S) == (1, 1)


@pytest.mark.asyncio
async def test_on_the_tests_loop_an_advance_expires_a_long_poll_inline(
    async_tickwheel_manual_broker: Broker, tickwheel_clock: ManualClock
) -> None:
    broker = async_tickwheel_manual_broker
    await asyncio.to_thread(_create_topic, broker.bootstrap_servers, "async-long-poll")
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, fetch_max_wait_ms=FETCH_WAIT_MAX_MS
    )
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition("async-long-poll", 0)])
        consumer.seek(aiokafka.TopicPartition("async-long-poll", 0), 0)
        polling = asyncio.create_task(consumer.getmany(timeout_ms=int(WAIT_S * 1000)))
        deadline_s = time.monotonic() + WAIT_S
        while broker.metrics()["Fetch"].num_delayed_operations == 0:
            assert time.monotonic() < deadline_s, "timed out waiting for the long poll"
            await asyncio.sleep(_POLL_S)
        tickwheel_clock.advance(FETCH_WAIT_MAX_MS - 1)
        assert broker.metrics()["Fetch"].expirations == 0
        tickwheel_clock.advance(1)
        assert broker.metrics()["Fetch"].expirations == 1
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
    finally:
        await consumer.stop()


def test_committed_offsets_expire_when_the_clock_passes_offsets_retention(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock, consumer: Consumer
) -> None:
    bootstrap = tickwheel_manual_broker.bootstrap_servers
    _create_topic(bootstrap, "committed")
    partition = TopicPartition("committed", 0, 7)
    consumer.commit(offsets=[partition], asynchronous=False)

    def committed() -> int:
        return int(consumer.committed([TopicPartition("committed", 0)], WAIT_S)[0].offset)

    assert committed() == 7
    # A group that only stores offsets: each expires retention after its commit time,
    # at the next offsets.retention.check.interval.ms tick.
    tickwheel_clock.advance(OFFSETS_RETENTION_MS - RETENTION_CHECK_INTERVAL_MS)
    assert committed() == 7
    tickwheel_clock.advance(RETENTION_CHECK_INTERVAL_MS)
    assert committed() == OFFSET_INVALID


def test_an_idle_connection_is_closed_when_the_clock_passes_connections_max_idle_ms(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        assert client.call(API_VERSIONS, 0, {}).error_code == 0
        tickwheel_clock.advance(CONNECTIONS_MAX_IDLE_MS)
        client.sock.settimeout(0.05)
        with pytest.raises(socket.timeout):
            client.sock.recv(1)
        tickwheel_clock.advance(CONNECTIONS_MAX_IDLE_MS // 10)
        client.sock.settimeout(WAIT_S)
        assert client.sock.recv(1) == b""
    finally:
        client.close()


def test_the_testing_page_example_runs_as_a_test_of_its_own(tmp_path: Path) -> None:
    """The manual-clock example of docs/testing.md, run by pytest with the installed plugin."""
    text = TESTING_PAGE.read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert match is not None
    example = tmp_path / "test_testing_page_example.py"
    example.write_text(match.group(1), encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert b"1 passed" in done.stdout
