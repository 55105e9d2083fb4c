"""``tickwheel group seek``: Kafka's reset-offsets through a real broker and confluent-kafka.

A group commits through a confluent-kafka Consumer and leaves; ``seek`` moves its
offsets and ``list_consumer_group_offsets`` (another client) reads what was committed.
The ``--to`` parser is tested on its own, in the fast tier.
"""

from __future__ import annotations

import argparse
import datetime
import json

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.cli import main
from tickwheel.cli._group import SeekTarget, seek_target
from tickwheel.server import BackgroundBroker

TIMEOUT_S = 30
TOPIC = "events"
GROUP = "readers"
BASE_MS = 1_700_000_000_000
STEP_MS = 1000
RECORDS = 5  # per partition, timestamps BASE_MS + i * STEP_MS


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _committed(bootstrap: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP]
    result = future.result(timeout=TIMEOUT_S)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


@pytest.fixture
def committed_group(tickwheel_broker: BackgroundBroker) -> str:
    """Two partitions of RECORDS records each (one batch per record, known timestamps),
    and a group that committed offset 3 on both and left."""
    bootstrap = tickwheel_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in (0, 1):
        for index in range(RECORDS):
            timestamp_ms = BASE_MS + index * STEP_MS
            producer.produce(TOPIC, b"v", partition=partition, timestamp=timestamp_ms)
            assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    consumer.commit(
        offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 3)], asynchronous=False
    )
    consumer.close()
    assert _committed(bootstrap) == {0: 3, 1: 3}
    return bootstrap


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("earliest", SeekTarget(spec="earliest")),
        ("latest", SeekTarget(spec="latest")),
        ("42", SeekTarget(offset=42)),
        ("@1700000000000", SeekTarget(timestamp_ms=1_700_000_000_000)),
        ("2023-11-14T22:13:20Z", SeekTarget(timestamp_ms=1_700_000_000_000)),
        ("2023-11-14T23:13:20.5+01:00", SeekTarget(timestamp_ms=1_700_000_000_500)),
    ],
)
def test_seek_target_reads_every_form(text: str, target: SeekTarget) -> None:
    assert seek_target(text) == target


def test_a_time_without_a_zone_is_local_time() -> None:
    local = datetime.datetime(2026, 1, 2, 3, 4, 5).astimezone()
    assert seek_target("2026-01-02T03:04:05") == SeekTarget(
        timestamp_ms=round(local.timestamp() * 1000)
    )


@pytest.mark.parametrize("text", ["-1", "soon", "@", "@x", ""])
def test_seek_target_refuses_anything_else(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        seek_target(text)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("to", "expected"),
    [
        ("earliest", {0: 0, 1: 0}),
        ("latest", {0: RECORDS, 1: RECORDS}),
        ("1", {0: 1, 1: 1}),
        ("99", {0: RECORDS, 1: RECORDS}),  # clamped to the log end, as Kafka does
        (f"@{BASE_MS + 2 * STEP_MS}", {0: 2, 1: 2}),  # the first record at that time
        (f"@{BASE_MS + 2 * STEP_MS - 1}", {0: 2, 1: 2}),  # ... or after it
        (f"@{BASE_MS + 60 * STEP_MS}", {0: RECORDS, 1: RECORDS}),  # none: the log end
    ],
)
def test_seek_moves_committed_offsets(
    committed_group: str, capsys: pytest.CaptureFixture[str], to: str, expected: dict[int, int]
) -> None:
    status, out, err = _cli(
        capsys, "group", "seek", GROUP, "--topic", TOPIC, "--to", to, "--format", "json",
        "-b", committed_group,
    )  # fmt: skip
    assert (status, err) == (0, "")
    plan = json.loads(out)
    assert plan["dry_run"] is False
    moves = [
        (row["partition"], row["current_offset"], row["new_offset"]) for row in plan["offsets"]
    ]
    assert moves == [(0, 3, expected[0]), (1, 3, expected[1])]
    assert _committed(committed_group) == expected


@pytest.mark.integration
def test_seek_one_partition_with_dry_run_then_for_real(
    committed_group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("group", "seek", GROUP, "--topic", TOPIC, "--partition", "1", "--to", "earliest")
    status, out, _ = _cli(capsys, *argv, "--dry-run", "-b", committed_group)
    assert status == 0
    assert out.splitlines() == [
        "DRY RUN: NOTHING CHANGED",
        "TOPIC   PARTITION  CURRENT-OFFSET  NEW-OFFSET",
        "events  1          3               0",
    ]
    assert _committed(committed_group) == {0: 3, 1: 3}

    assert _cli(capsys, *argv, "-b", committed_group)[0] == 0
    assert _committed(committed_group) == {0: 3, 1: 0}


@pytest.mark.integration
def test_seek_a_new_group_commits_for_it(
    tickwheel_broker: BackgroundBroker, committed_group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _cli(
        capsys, "group", "seek", "newcomers", "--topic", TOPIC, "--to", "latest",
        "-b", committed_group,
    )  # fmt: skip
    assert status == 0
    assert "-               5" in out  # nothing was committed before
    status, out, _ = _cli(
        capsys, "group", "describe", "newcomers", "--format", "json", "-b", committed_group
    )
    assert status == 0
    assert [row["committed_offset"] for row in json.loads(out)["offsets"]] == [RECORDS, RECORDS]


@pytest.mark.integration
def test_seek_refuses_a_group_with_active_members(
    committed_group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer = Consumer(
        {"bootstrap.servers": committed_group, "group.id": GROUP, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    try:
        assert consumer.poll(TIMEOUT_S) is not None  # joined: the group is STABLE
        status, out, err = _cli(
            capsys, "group", "seek", GROUP, "--topic", TOPIC, "--to", "earliest",
            "-b", committed_group,
        )  # fmt: skip
    finally:
        consumer.close()
    assert (status, out) == (1, "")
    assert err == (
        f"tickwheel group seek: group {GROUP!r} has active members (state STABLE): "
        "stop its consumers first\n"
    )


@pytest.mark.integration
def test_seek_names_an_unknown_topic_or_partition(
    committed_group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", committed_group)
    status, _, err = _cli(capsys, "group", "seek", GROUP, "--topic", "nope", "--to", "0", *b)
    assert status == 1
    assert err.startswith("tickwheel group seek: topic 'nope': ")
    status, _, err = _cli(
        capsys, "group", "seek", GROUP, "--topic", TOPIC, "--partition", "7", "--to", "0", *b
    )
    assert (status, err) == (1, "tickwheel group seek: topic 'events' has no partition 7\n")


def test_a_bad_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["group", "seek", GROUP, "--topic", TOPIC, "--to", "yesterday"])
    assert exited.value.code == 2
    assert "expected earliest, latest, an offset" in capsys.readouterr().err
