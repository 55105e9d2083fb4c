"""Consumer-protocol groups (KIP-848) with confluent-kafka's ``group.protocol=consumer``.

Real librdkafka consumers against a real broker on loopback: members splitting a topic
and a third one joining without a stop-the-world, a member process killed with SIGKILL,
committed offsets and the group across a broker restart, and ListGroups/DescribeGroups
through the AdminClient beside a classic group. Conditions are awaited by polling the
clients with a deadline, never by fixed sleeps; the broker's ``group.consumer.*``
timeouts are short so that the tests stay fast.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

PARTITIONS = 4
SESSION_TIMEOUT_MS = 2_000
HEARTBEAT_MS = 200
DEADLINE_S = 30.0
POLL_S = 0.05
BROKER_PROPERTIES = {
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": "100",
}


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return dict(BROKER_PROPERTIES)


def create_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"events-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(DEADLINE_S)
    return name


@pytest.fixture
def topic(tickwheel_broker: BackgroundBroker) -> str:
    return create_topic(tickwheel_broker.bootstrap_servers)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(start, start + count):
        producer.produce(topic, str(index).encode(), partition=index % PARTITIONS)
    assert producer.flush(DEADLINE_S) == 0


class Member:
    """A ``group.protocol=consumer`` consumer that records what it is given and sees."""

    def __init__(self, bootstrap: str, group_id: str, **extra: object) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **extra,
            }
        )
        self.owned: set[int] = set()
        self.history: list[frozenset[int]] = []
        self.seen: list[tuple[int, str]] = []

    def subscribe(self, topic: str) -> None:
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}
        self.history.append(frozenset(self.owned))

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned -= {tp.partition for tp in partitions}
        self.history.append(frozenset(self.owned))

    def poll(self) -> None:
        message: Message | None = self.consumer.poll(POLL_S)
        if message is None:
            return
        assert message.error() is None, message.error()
        value = message.value()
        assert value is not None
        self.seen.append((message.partition() or 0, value.decode()))
        self.consumer.commit(message=message, asynchronous=False)


class Members:
    """Members polled in turn from the test's thread."""

    def __init__(self) -> None:
        self.members: list[Member] = []

    def add(self, member: Member) -> Member:
        self.members.append(member)
        return member

    def poll_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            if time.monotonic() > deadline:
                owned = [sorted(m.owned) for m in self.members]
                raise AssertionError(f"timed out waiting for {what}; owned: {owned}")
            for member in self.members:
                member.poll()

    def split(self, *sizes: int) -> Callable[[], bool]:
        def check() -> bool:
            held = [m.owned for m in self.members]
            every = set().union(*held)
            disjoint = sum(len(h) for h in held) == len(every)
            return (
                every == set(range(PARTITIONS))
                and disjoint
                and sorted(len(h) for h in held) == sorted(sizes)
            )

        return check


@pytest.fixture
def members() -> Iterator[Members]:
    group = Members()
    yield group
    for member in group.members:
        member.consumer.close()


def test_members_split_the_topic_and_a_third_joins_without_stopping_the_others(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    first = members.add(Member(bootstrap, "kip848-split"))
    second = members.add(Member(bootstrap, "kip848-split"))
    first.subscribe(topic)
    second.subscribe(topic)
    members.poll_until(members.split(2, 2), "two members to split four partitions")
    produce(bootstrap, topic, 40)
    members.poll_until(lambda: len(first.seen) + len(second.seen) == 40, "the first batch")

    marks = {m: len(m.history) for m in (first, second)}
    third = members.add(Member(bootstrap, "kip848-split"))
    third.subscribe(topic)
    members.poll_until(members.split(1, 1, 2), "the third member's share")
    for member in (first, second):
        # Incremental: the member was only ever asked to give partitions up, and kept
        # at least one of them through the whole reconciliation.
        during = member.history[marks[member] - 1 :]
        assert all(later <= earlier for earlier, later in itertools.pairwise(during))
        assert frozenset.intersection(*during), f"{during} lost every partition"

    produce(bootstrap, topic, 40, start=40)
    members.poll_until(lambda: sum(len(m.seen) for m in members.members) == 80, "the second batch")
    values = sorted(int(v) for m in members.members for _p, v in m.seen)
    assert values == list(range(80))  # committed per message: nothing replayed or lost
    assert third.seen, "the newcomer consumed its partition"


CHILD_CONSUMER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({
        "bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
        "group.protocol": "consumer", "auto.offset.reset": "earliest",
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


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members, tmp_path: Path
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = "kip848-sigkill"
    survivor = members.add(Member(bootstrap, group_id))
    survivor.subscribe(topic)
    members.poll_until(lambda: len(survivor.owned) == PARTITIONS, "the survivor")
    script = tmp_path / "child_consumer.py"
    script.write_text(CHILD_CONSUMER)
    with subprocess.Popen(
        [sys.executable, str(script), bootstrap, group_id, topic],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            members.poll_until(lambda: len(survivor.owned) == PARTITIONS // 2, "a split")
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "assigned"
            child.send_signal(signal.SIGKILL)
            child.wait(DEADLINE_S)
            killed_at = time.monotonic()
            members.poll_until(lambda: len(survivor.owned) == PARTITIONS, "the fencing")
            # One session timeout after the child's last heartbeat (at most a heartbeat
            # interval before the kill), plus the survivor's next heartbeats.
            elapsed_s = time.monotonic() - killed_at
            earliest_s = (SESSION_TIMEOUT_MS - 2 * HEARTBEAT_MS) / 1000
            assert earliest_s <= elapsed_s <= SESSION_TIMEOUT_MS / 1000 + 5
        finally:
            if child.poll() is None:
                child.kill()


def _list_groups(admin: AdminClient, **filters: object) -> dict[str, tuple[object, object]]:
    listed = admin.list_consumer_groups(request_timeout=DEADLINE_S, **filters).result()
    return {g.group_id: (g.type, g.state) for g in listed.valid}


def test_offsets_and_the_group_survive_a_broker_restart() -> None:
    with tempfile.TemporaryDirectory(prefix="kip848-restart-") as log_dir:
        config = BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "offsets.topic.num.partitions": "1",
                "log.dirs": log_dir,
                **BROKER_PROPERTIES,
            }
        )
        with BackgroundBroker(config) as broker:
            bootstrap = broker.bootstrap_servers
            topic = create_topic(bootstrap)
            produce(bootstrap, topic, 40)
            group = Members()
            member = group.add(Member(bootstrap, "kip848-restart"))
            member.subscribe(topic)
            group.poll_until(lambda: len(member.seen) == 40, "the first 40 messages")
            member.consumer.close()

        with BackgroundBroker(config) as broker:
            bootstrap = broker.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            listed = _list_groups(admin)
            assert listed["kip848-restart"] == (
                ConsumerGroupType.CONSUMER,
                ConsumerGroupState.EMPTY,
            )
            produce(bootstrap, topic, 40, start=40)
            group = Members()
            rejoined = group.add(Member(bootstrap, "kip848-restart"))
            rejoined.subscribe(topic)
            try:
                group.poll_until(lambda: len(rejoined.seen) == 40, "the next 40 messages")
            finally:
                rejoined.consumer.close()
            assert sorted(int(v) for _p, v in rejoined.seen) == list(range(40, 80))


def test_list_and_describe_groups_show_both_group_types(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    modern = members.add(Member(bootstrap, "kip848-listed"))
    modern.subscribe(topic)
    classic = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "classic-listed", "session.timeout.ms": 6000}
    )
    try:
        classic.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        while not (modern.owned and classic.assignment()):
            assert time.monotonic() < deadline, "both groups to form"
            classic.poll(POLL_S)
            modern.poll()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = _list_groups(admin)
        assert listed["kip848-listed"] == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
        assert listed["classic-listed"] == (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE)
        only_consumer = _list_groups(admin, types={ConsumerGroupType.CONSUMER})
        assert "kip848-listed" in only_consumer
        assert "classic-listed" not in only_consumer
        only_classic = _list_groups(admin, types={ConsumerGroupType.CLASSIC})
        assert "classic-listed" in only_classic
        assert "kip848-listed" not in only_classic

        described = admin.describe_consumer_groups(["kip848-listed"])["kip848-listed"].result(
            DEADLINE_S
        )
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.state == ConsumerGroupState.STABLE
        (member,) = described.members
        assigned = {tp.partition for tp in member.assignment.topic_partitions}
        assert assigned == set(range(PARTITIONS))
        assert {tp.topic for tp in member.assignment.topic_partitions} == {topic}
    finally:
        classic.close()


def _classic(bootstrap: str, group_id: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def _consume_classic(consumer: Consumer, count: int) -> list[int]:
    seen: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < count:
        assert time.monotonic() < deadline, f"{count} messages through the classic consumer"
        message = consumer.poll(POLL_S)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen.append(int(message.value() or b""))
        consumer.commit(message=message, asynchronous=False)
    return seen


def test_an_empty_group_moves_between_the_protocols_with_its_offsets(
    tickwheel_broker: BackgroundBroker, topic: str
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group_id = "kip848-migrating"
    produce(bootstrap, topic, 20)
    classic = _classic(bootstrap, group_id)
    classic.subscribe([topic])
    try:
        first = _consume_classic(classic, 20)
    finally:
        classic.close()
    assert _list_groups(admin)[group_id][0] == ConsumerGroupType.CLASSIC

    # Upgrade: the empty classic group becomes a consumer group, offsets and all.
    produce(bootstrap, topic, 20, start=20)
    group = Members()
    modern = group.add(Member(bootstrap, group_id))
    modern.subscribe(topic)
    try:
        group.poll_until(lambda: len(modern.seen) == 20, "the upgraded group's messages")
        assert _list_groups(admin)[group_id][0] == ConsumerGroupType.CONSUMER
        # A classic member cannot join while the consumer group has members.
        refused = _classic(bootstrap, group_id)
        refused.subscribe([topic])
        message = None
        deadline = time.monotonic() + DEADLINE_S
        while message is None or message.error() is None:
            assert time.monotonic() < deadline, "the classic join to be refused"
            message = refused.poll(POLL_S)
        assert "INCONSISTENT_GROUP_PROTOCOL" in message.error().name()
        refused.close()
    finally:
        modern.consumer.close()

    # Downgrade: empty again, it becomes a classic group and keeps the offsets.
    produce(bootstrap, topic, 20, start=40)
    classic = _classic(bootstrap, group_id)
    classic.subscribe([topic])
    try:
        last = _consume_classic(classic, 20)
    finally:
        classic.close()
    assert sorted(first) == list(range(20))
    assert sorted(int(v) for _p, v in modern.seen) == list(range(20, 40))
    assert sorted(last) == list(range(40, 60))
    assert _list_groups(admin)[group_id][0] == ConsumerGroupType.CLASSIC


def test_a_regex_subscription_follows_new_topics(
    tickwheel_broker: BackgroundBroker, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    first = f"{prefix}-a"
    admin.create_topics([NewTopic(first, 2, 1)])[first].result(DEADLINE_S)
    member = members.add(
        Member(bootstrap, "kip848-regex", **{"topic.metadata.refresh.interval.ms": 500})
    )
    member.consumer.subscribe([f"^{prefix}-.*"], on_assign=member._assigned)
    members.poll_until(lambda: len(member.owned) == 2, "the first topic's partitions")
    second = f"{prefix}-b"
    admin.create_topics([NewTopic(second, 3, 1)])[second].result(DEADLINE_S)
    produce_to = Producer({"bootstrap.servers": bootstrap})
    produce_to.produce(second, b"x", partition=2)
    assert produce_to.flush(DEADLINE_S) == 0
    members.poll_until(lambda: (2, "x") in member.seen, "a message of the new topic")


def test_a_transactional_producer_commits_a_consumer_group_members_offsets(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    produce(bootstrap, topic, 8)
    member = members.add(Member(bootstrap, "kip848-eos"))
    member.subscribe(topic)
    consumer = member.consumer
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kip848-eos-tx"})
    producer.init_transactions(DEADLINE_S)
    read = 0
    deadline = time.monotonic() + DEADLINE_S
    while read < 8:
        assert time.monotonic() < deadline, "the consumer to read 8 messages"
        message = consumer.poll(POLL_S)
        if message is not None:
            assert message.error() is None, message.error()
            read += 1
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), DEADLINE_S
    )
    producer.commit_transaction(DEADLINE_S)
    committed = consumer.committed(
        [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S
    )
    assert sum(tp.offset for tp in committed) == 8


def test_a_restarted_static_member_gets_its_partitions_back(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = "kip848-static"
    static = members.add(Member(bootstrap, group_id, **{"group.instance.id": "static-a"}))
    dynamic = members.add(Member(bootstrap, group_id))
    static.subscribe(topic)
    dynamic.subscribe(topic)
    members.poll_until(members.split(2, 2), "the first split")
    held, kept = set(static.owned), set(dynamic.owned)
    mark = len(dynamic.history)
    static.consumer.close()  # a static member leaves with epoch -2: its partitions wait
    members.members.remove(static)

    restarted = members.add(Member(bootstrap, group_id, **{"group.instance.id": "static-a"}))
    restarted.subscribe(topic)
    members.poll_until(lambda: restarted.owned == held, "the same partitions back")
    assert dynamic.owned == kept
    assert dynamic.history[mark:] == [], "the dynamic member saw no reassignment"


def test_the_client_picks_the_server_side_assignor(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    group_id = "kip848-range"
    first = members.add(Member(bootstrap, group_id, **{"group.remote.assignor": "range"}))
    second = members.add(Member(bootstrap, group_id, **{"group.remote.assignor": "range"}))
    first.subscribe(topic)
    second.subscribe(topic)
    members.poll_until(members.split(2, 2), "a range split")
    assert sorted(sorted(m.owned) for m in members.members) == [[0, 1], [2, 3]]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group_id])[group_id].result(DEADLINE_S)
    assert described.partition_assignor == "range"


def test_new_partitions_are_assigned(
    tickwheel_broker: BackgroundBroker, topic: str, members: Members
) -> None:
    from confluent_kafka.admin import NewPartitions  # noqa: PLC0415 - only this test

    bootstrap = tickwheel_broker.bootstrap_servers
    member = members.add(
        Member(bootstrap, "kip848-grow", **{"topic.metadata.refresh.interval.ms": 500})
    )
    member.subscribe(topic)
    members.poll_until(lambda: len(member.owned) == PARTITIONS, "the first partitions")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, PARTITIONS + 2)])[topic].result(DEADLINE_S)
    members.poll_until(lambda: len(member.owned) == PARTITIONS + 2, "the new partitions")
