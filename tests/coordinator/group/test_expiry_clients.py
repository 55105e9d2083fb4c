"""Group expiry, OffsetDelete and group.max.size with real clients against a real broker.

The broker runs the cleanup every ``offsets.retention.check.interval.ms`` = 200 ms. Kafka
gives the retention in whole minutes (``offsets.retention.minutes``); to see offsets
expire within seconds, ``short_retention`` builds the broker's coordinator with a
``GroupConfig`` whose retention (held in milliseconds) is a few seconds. The periodic
cleanup is awaited by polling what clients see, with a deadline.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.coordinator.group import OFFSETS_TOPIC, GroupConfig
from tickwheel.coordinator.group._records import GroupKey, OffsetKey, decode_key
from tickwheel.server import BackgroundBroker, BrokerConfig

from .librdkafka import LIBRDKAFKA, delete_consumer_group_offsets

pytestmark = pytest.mark.integration

CHECK_INTERVAL_MS = 200
RETENTION_MS = 3_000
SESSION_TIMEOUT_MS = 2_000
HEARTBEAT_MS = 200
DEADLINE_S = 30.0
POLL_S = 0.05
TOPIC = "consumed"
OTHER = "once-consumed"
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed
GROUP_SUBSCRIBED_TO_TOPIC = 86
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def short_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers started in this test expire offsets ``RETENTION_MS`` after they may."""

    class ShortRetentionConfig:
        @staticmethod
        def from_properties(properties: Mapping[str, str]) -> GroupConfig:
            config = GroupConfig.from_properties(properties)
            return dataclasses.replace(config, offsets_retention_ms=RETENTION_MS)

    monkeypatch.setattr("tickwheel.server.apis._groups.GroupConfig", ShortRetentionConfig)


def broker_config(log_dir: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "500",
            "offsets.retention.check.interval.ms": str(CHECK_INTERVAL_MS),
            **extra,
        }
    )


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, future in admin.create_topics([NewTopic(n, 2, 1) for n in names]).items():
        future.result(DEADLINE_S)
        assert name in names


def subscriber(bootstrap: str, group_id: str, topic: str = TOPIC) -> Consumer:
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
        }
    )
    member.subscribe([topic])
    return member


def wait_until(
    condition: Callable[[], bool], what: str, *, polling: Sequence[Consumer] = ()
) -> None:
    """Poll ``condition`` (and the consumers in ``polling``, to keep them alive)."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in polling:
            member.poll(0)
        time.sleep(POLL_S)


def assigned(*members: Consumer) -> None:
    """Poll ``members`` until each has its partitions."""

    def everyone_assigned() -> bool:
        for member in members:
            member.poll(POLL_S)
        return all(member.assignment() for member in members)

    wait_until(everyone_assigned, "the assignments")


def listed_groups(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {g.group_id for g in admin.list_consumer_groups().result(DEADLINE_S).valid}


def committed_offsets(bootstrap: str, group_id: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as the AdminClient lists them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group_id)
    (future,) = admin.list_consumer_group_offsets([request]).values()
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in future.result(DEADLINE_S).topic_partitions
        if tp.offset != NO_OFFSET
    }


def latest_in_offsets_topic(bootstrap: str) -> dict[OffsetKey | GroupKey, bool]:
    """Each key's last record in ``__consumer_offsets`` (True: a value, False: a
    tombstone), read by a consumer: what the next coordinator of the partition loads."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "offsets-reader", "enable.auto.commit": False}
    )
    latest: dict[OffsetKey | GroupKey, bool] = {}
    try:
        _, end = reader.get_watermark_offsets(TopicPartition(OFFSETS_TOPIC, 0), DEADLINE_S)
        reader.assign([TopicPartition(OFFSETS_TOPIC, 0, 0)])
        position = 0
        deadline = time.monotonic() + DEADLINE_S
        while position < end:
            assert time.monotonic() < deadline, "could not read __consumer_offsets"
            message = reader.poll(POLL_S)
            if message is None:
                continue
            assert message.error() is None, message.error()
            key = message.key()
            assert key is not None
            latest[decode_key(key)] = message.value() is not None
            position = message.offset() + 1
    finally:
        reader.close()
    return latest


def test_one_shot_groups_are_gone_after_the_cleanup_and_stay_gone_after_a_restart(
    tmp_path: Path,
) -> None:
    one_shot = [f"one-shot-{index}-{uuid.uuid4().hex[:6]}" for index in range(8)]
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPIC)
        members = [subscriber(bootstrap, group_id) for group_id in one_shot]
        try:
            assigned(*members)
            # Stable groups stay, however often the cleanup runs.
            wait_until(
                lambda: set(one_shot) <= listed_groups(bootstrap),
                "the groups to be listed",
                polling=members,
            )
        finally:
            for member in members:
                member.close()
        wait_until(lambda: not set(one_shot) & listed_groups(bootstrap), "the groups to go")
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        assert not set(one_shot) & listed_groups(broker.bootstrap_servers)
        latest = latest_in_offsets_topic(broker.bootstrap_servers)
        assert all(latest[GroupKey(group_id)] is False for group_id in one_shot)


@pytest.mark.slow
@pytest.mark.usefixtures("short_retention")
def test_offsets_stay_while_members_consume_and_expire_a_retention_after_the_last_leaves(
    tmp_path: Path,
) -> None:
    group_id = f"expiring-{uuid.uuid4().hex[:6]}"
    expected = {(TOPIC, 0): 3, (TOPIC, 1): 5}
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPIC)
        member = subscriber(bootstrap, group_id)
        try:
            assigned(member)
            member.commit(
                offsets=[TopicPartition(t, p, offset) for (t, p), offset in expected.items()],
                asynchronous=False,
            )
            past_retention = time.monotonic() + 1.5 * RETENTION_MS / 1000
            wait_until(
                lambda: time.monotonic() > past_retention,
                "the retention to pass",
                polling=[member],
            )
            assert committed_offsets(bootstrap, group_id) == expected
            assert group_id in listed_groups(bootstrap)
        finally:
            member.close()
        emptied = time.monotonic()
        wait_until(lambda: not committed_offsets(bootstrap, group_id), "the offsets to expire")
        # Not before a retention had passed since the group emptied.
        assert time.monotonic() - emptied >= RETENTION_MS / 1000 - CHECK_INTERVAL_MS / 1000
        wait_until(lambda: group_id not in listed_groups(bootstrap), "the group to go")
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        assert committed_offsets(bootstrap, group_id) == {}
        assert group_id not in listed_groups(bootstrap)
        latest = latest_in_offsets_topic(bootstrap)
        assert latest[GroupKey(group_id)] is False
        assert all(latest[OffsetKey(group_id, t, p)] is False for t, p in expected)


def test_offset_delete_through_kafka_python(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient  # noqa: PLC0415 - one client per test
    from kafka import TopicPartition as KafkaTopicPartition  # noqa: PLC0415
    from kafka.errors import (  # noqa: PLC0415
        GroupIdNotFoundError,
        GroupSubscribedToTopicError,
        NoError,
        UnknownTopicOrPartitionError,
    )

    group_id = f"deleting-{uuid.uuid4().hex[:6]}"
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPIC, OTHER)
        member = subscriber(bootstrap, group_id)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assigned(member)
            member.commit(
                offsets=[TopicPartition(TOPIC, 0, 1), TopicPartition(OTHER, 0, 2)],
                asynchronous=False,
            )
            results = admin.delete_group_offsets(
                group_id,
                [
                    KafkaTopicPartition(TOPIC, 0),
                    KafkaTopicPartition(OTHER, 0),
                    KafkaTopicPartition("no-such-topic", 0),
                ],
            )
            assert results == {
                KafkaTopicPartition(TOPIC, 0): GroupSubscribedToTopicError,
                KafkaTopicPartition(OTHER, 0): NoError,
                KafkaTopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
            }
            assert committed_offsets(bootstrap, group_id) == {(TOPIC, 0): 1}
            with pytest.raises(GroupIdNotFoundError):
                admin.delete_group_offsets("no-such-group", [KafkaTopicPartition(TOPIC, 0)])
        finally:
            member.close()
            admin.close()


@pytest.mark.skipif(LIBRDKAFKA is None, reason="the confluent-kafka wheel ships librdkafka")
def test_offset_delete_through_librdkafka(tmp_path: Path) -> None:
    group_id = f"deleting-{uuid.uuid4().hex[:6]}"
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPIC, OTHER)
        member = subscriber(bootstrap, group_id)
        try:
            assigned(member)
            member.commit(
                offsets=[TopicPartition(TOPIC, 0, 1), TopicPartition(OTHER, 0, 2)],
                asynchronous=False,
            )
            timeout_ms = int(DEADLINE_S * 1000)
            assert delete_consumer_group_offsets(
                bootstrap, group_id, [(TOPIC, 0), (OTHER, 0), (OTHER, 9)], timeout_ms
            ) == (
                0,
                {
                    (TOPIC, 0): GROUP_SUBSCRIBED_TO_TOPIC,
                    (OTHER, 0): 0,
                    (OTHER, 9): UNKNOWN_TOPIC_OR_PARTITION,
                },
            )
            assert committed_offsets(bootstrap, group_id) == {(TOPIC, 0): 1}
            assert delete_consumer_group_offsets(
                bootstrap, "no-such-group", [(TOPIC, 0)], timeout_ms
            ) == (GROUP_ID_NOT_FOUND, {})
        finally:
            member.close()
        # Once the group is Empty, its last offset can go, and the group with it.
        assert delete_consumer_group_offsets(bootstrap, group_id, [(TOPIC, 0)], timeout_ms) == (
            0,
            {(TOPIC, 0): 0},
        )
        assert group_id not in listed_groups(bootstrap)


def test_a_consumer_beyond_group_max_size_is_told_so(tmp_path: Path) -> None:
    group_id = f"bounded-{uuid.uuid4().hex[:6]}"
    with BackgroundBroker(broker_config(tmp_path, **{"group.max.size": "1"})) as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPIC)
        first = subscriber(bootstrap, group_id)
        try:
            assigned(first)
            second = subscriber(bootstrap, group_id)
            try:
                errors: list[KafkaError] = []

                def second_refused() -> bool:
                    first.poll(0)
                    message = second.poll(POLL_S)
                    if message is not None and message.error() is not None:
                        errors.append(message.error())
                    return bool(errors)

                wait_until(second_refused, "the second consumer's error")
                assert errors[0].code() == KafkaError.GROUP_MAX_SIZE_REACHED
                assert first.assignment()
                assert not second.assignment()
            finally:
                second.close()
        finally:
            first.close()
