"""Consumer groups with real clients against a real broker on loopback.

confluent-kafka (eager and cooperative-sticky assignors, a consumer process killed
with SIGKILL), kafka-python, aiokafka and Debian's kcat. Conditions are awaited by
polling the clients' own state with a deadline, never by fixed sleeps.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

PARTITIONS = 4
MESSAGES = 200
SESSION_TIMEOUT_MS = 2_000
HEARTBEAT_MS = 200
DEADLINE_S = 30.0
POLL_S = 0.05
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "group.initial.rebalance.delay.ms": "100",
        "group.min.session.timeout.ms": "500",
        "offsets.topic.num.partitions": "3",
    }


@pytest.fixture
def topic(tickwheel_broker: BackgroundBroker) -> str:
    name = f"events-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(DEADLINE_S)
    return name


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(start, start + count):
        producer.produce(topic, str(index).encode(), partition=index % PARTITIONS)
    assert producer.flush(DEADLINE_S) == 0


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            **extra,
        }
    )


class Group:
    """Consumers polled in turn; every message they see is recorded and committed."""

    def __init__(self) -> None:
        self.members: list[Consumer] = []
        self.seen: list[str] = []

    def poll_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            for member in self.members:
                message = member.poll(POLL_S)
                if message is not None:
                    self._record(member, message)

    def _record(self, member: Consumer, message: Message) -> None:
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        self.seen.append(value.decode())
        member.commit(message=message, asynchronous=False)

    def partitions(self, member: Consumer) -> set[int]:
        return {tp.partition for tp in member.assignment()}

    def split_evenly(self) -> bool:
        held = [self.partitions(m) for m in self.members]
        every = set().union(*held)
        disjoint = sum(len(h) for h in held) == len(every)
        return every == set(range(PARTITIONS)) and disjoint and all(held)


@pytest.fixture
def group() -> Iterator[Group]:
    consumers = Group()
    yield consumers
    for member in consumers.members:
        member.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_second_member_splits_the_partitions_and_leaving_hands_them_back(
    tickwheel_broker: BackgroundBroker, topic: str, group: Group, assignor: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = f"group-{assignor}"
    first = consumer(bootstrap, group_id, **{"partition.assignment.strategy": assignor})
    first.subscribe([topic])
    group.members.append(first)
    produce(bootstrap, topic, MESSAGES // 2)
    group.poll_until(lambda: len(group.partitions(first)) == PARTITIONS, "the first member")
    group.poll_until(lambda: len(group.seen) == MESSAGES // 2, "the first half")

    second = consumer(bootstrap, group_id, **{"partition.assignment.strategy": assignor})
    second.subscribe([topic])
    group.members.append(second)
    group.poll_until(group.split_evenly, "the partitions to be split")
    assert len(group.partitions(first)) == len(group.partitions(second)) == PARTITIONS // 2

    produce(bootstrap, topic, MESSAGES // 2, start=MESSAGES // 2)
    group.poll_until(lambda: len(group.seen) >= MESSAGES, "the second half")
    # Committed after every message, so a rebalance replays nothing.
    assert sorted(group.seen, key=int) == [str(i) for i in range(MESSAGES)]

    second.close()
    group.members.remove(second)
    group.poll_until(lambda: len(group.partitions(first)) == PARTITIONS, "the hand-back")


def generation_of(broker: BackgroundBroker, group_id: str) -> int:
    """The group's generation, read on the broker's loop."""

    def read(running: Any) -> int:
        found = running.context.groups.coordinator.manager.get_group(group_id)
        assert found is not None
        generation: int = found.generation_id
        return generation

    value = broker.call(read)
    assert isinstance(value, int)
    return value


def heartbeat_expirations(broker: BackgroundBroker) -> int:
    """How many DelayedHeartbeats have expired, read on the broker's loop."""

    def read(running: Any) -> int:
        expired: int = running.context.groups.coordinator.heartbeat_purgatory.expired
        return expired

    value = broker.call(read)
    assert isinstance(value, int)
    return value


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    tickwheel_broker: BackgroundBroker, topic: str, group: Group
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = "group-static"
    settings = {"group.instance.id": "instance-a", "session.timeout.ms": 10 * SESSION_TIMEOUT_MS}
    static = consumer(bootstrap, group_id, **settings)
    static.subscribe([topic])
    dynamic = consumer(bootstrap, group_id)
    dynamic.subscribe([topic])
    group.members += [static, dynamic]
    group.poll_until(group.split_evenly, "the first split")
    before = group.partitions(static)
    kept = group.partitions(dynamic)
    generation = generation_of(tickwheel_broker, group_id)
    static.close()  # a static member sends no LeaveGroup: the group stays as it is
    group.members.remove(static)

    restarted = consumer(bootstrap, group_id, **settings)
    restarted.subscribe([topic])
    group.members.append(restarted)
    group.poll_until(lambda: group.partitions(restarted) == before, "the same partitions back")
    # No rebalance: same generation, and the dynamic member kept its partitions.
    assert generation_of(tickwheel_broker, group_id) == generation
    assert group.partitions(dynamic) == kept


CHILD_CONSUMER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({
        "bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
        "session.timeout.ms": int(sys.argv[4]), "heartbeat.interval.ms": int(sys.argv[5]),
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([sys.argv[3]])
    announced = False
    while True:
        consumer.poll(0.05)
        if consumer.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
    """
)


def test_a_killed_member_is_evicted_after_its_session_timeout(
    tickwheel_broker: BackgroundBroker, topic: str, group: Group, tmp_path: Path
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = "group-sigkill"
    survivor = consumer(bootstrap, group_id)
    survivor.subscribe([topic])
    group.members.append(survivor)
    group.poll_until(lambda: len(group.partitions(survivor)) == PARTITIONS, "the survivor")
    script = tmp_path / "child_consumer.py"
    script.write_text(CHILD_CONSUMER)
    args = [bootstrap, group_id, topic, str(SESSION_TIMEOUT_MS), str(HEARTBEAT_MS)]
    with subprocess.Popen(
        [sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            group.poll_until(lambda: len(group.partitions(survivor)) == PARTITIONS // 2, "a split")
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "assigned"
            child.send_signal(signal.SIGKILL)
            child.wait(DEADLINE_S)
            killed_at = time.monotonic()
            group.poll_until(lambda: len(group.partitions(survivor)) == PARTITIONS, "the eviction")
            # One session timeout after the child's last heartbeat (sent at most a
            # heartbeat interval or so before the kill), plus the survivor's next
            # heartbeat: never much sooner, and not much later.
            elapsed_s = time.monotonic() - killed_at
            earliest_s = (SESSION_TIMEOUT_MS - 2 * HEARTBEAT_MS) / 1000
            assert earliest_s <= elapsed_s <= SESSION_TIMEOUT_MS / 1000 + 5
            # It was the child's DelayedHeartbeat that expired.
            assert heartbeat_expirations(tickwheel_broker) >= 1
        finally:
            if child.poll() is None:
                child.kill()


# kafka-python 3 reads its protocol schemas with a deprecated importlib.resources call.
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_group(tickwheel_broker: BackgroundBroker, topic: str) -> None:
    from kafka import KafkaConsumer  # noqa: PLC0415 - one client per test
    from kafka.errors import CommitFailedError, RebalanceInProgressError  # noqa: PLC0415

    bootstrap = tickwheel_broker.bootstrap_servers
    produce(bootstrap, topic, 40)
    seen: list[bytes] = []
    held: dict[int, int] = {}
    stop = threading.Event()
    lock = threading.Lock()

    # A JoinGroup blocks inside poll(), so each member needs its own thread, as it
    # would in production.
    def run_member(index: int) -> None:
        member = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="group-kafka-python",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS * 3,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        try:
            while not stop.is_set():
                batches = member.poll(timeout_ms=50)
                with lock:
                    seen.extend(r.value for records in batches.values() for r in records)
                    held[index] = len(member.assignment())
                if batches:
                    with contextlib.suppress(CommitFailedError, RebalanceInProgressError):
                        member.commit()
        finally:
            member.close()

    threads = [threading.Thread(target=run_member, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            with lock:
                settled = len(seen) >= 40 and held == {0: PARTITIONS // 2, 1: PARTITIONS // 2}
            if settled:
                break
            assert time.monotonic() < deadline, f"kafka-python group: {len(seen)} seen, {held}"
            stop.wait(POLL_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S)
    assert sorted({int(v) for v in seen}) == list(range(40))


@pytest.mark.asyncio
async def test_aiokafka_group(tickwheel_broker: BackgroundBroker, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer  # noqa: PLC0415 - one client per test

    produce(tickwheel_broker.bootstrap_servers, topic, 30)
    member = AIOKafkaConsumer(
        topic,
        bootstrap_servers=tickwheel_broker.bootstrap_servers,
        group_id="group-aiokafka",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS * 3,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    await member.start()
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < 30:
            assert time.monotonic() < deadline, "aiokafka consumed too little"
            batches = await member.getmany(timeout_ms=100)
            seen += [r.value for records in batches.values() for r in records if r.value]
        await member.commit()
        assert sorted(int(v) for v in seen) == list(range(30))
        assert len(member.assignment()) == PARTITIONS
        total = 0
        for tp in member.assignment():
            total += await member.committed(tp) or 0
        assert total == 30
    finally:
        await member.stop()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by ./run")
def test_kcat_balanced_consumer(tickwheel_broker: BackgroundBroker, topic: str) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    produce(bootstrap, topic, 20)
    command = ["kcat", "-b", bootstrap, "-G", "group-kcat", "-o", "beginning", "-c", "20"]
    command += ["-X", f"session.timeout.ms={SESSION_TIMEOUT_MS * 3}", "-q", "-f", "%s\\n", topic]
    done = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_S, check=True)
    assert sorted(int(line) for line in done.stdout.split()) == list(range(20))
    # kcat committed what it consumed: the group's offsets add up to everything.
    checker = consumer(bootstrap, "group-kcat")
    try:
        committed = checker.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S
        )
        assert sum(tp.offset for tp in committed) == 20
    finally:
        checker.close()


def test_a_commit_to_an_unknown_partition_is_refused_per_partition(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist and
    commits the others; nothing is stored for the unknown one. (librdkafka raises the
    partition's error from a synchronous commit; kafka-python retries it as retriable,
    as it does against Kafka.)"""
    bootstrap = tickwheel_broker.bootstrap_servers
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": "commit-unknown"})
    try:
        with pytest.raises(KafkaException) as refused:
            member.commit(
                offsets=[
                    TopicPartition(topic, 0, 7),
                    TopicPartition(topic, PARTITIONS, 3),
                    TopicPartition("no-such-topic", 0, 5),
                ],
                asynchronous=False,
            )
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        stored = member.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, PARTITIONS)], timeout=DEADLINE_S
        )
        assert [(s.partition, s.offset) for s in stored] == [(0, 7), (PARTITIONS, NO_OFFSET)]
    finally:
        member.close()
