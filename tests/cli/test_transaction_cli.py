"""``tickwheel transaction list|describe|describe-producers`` against a broker.

Two confluent-kafka transactional producers set the scene: one with a transaction
left open on partition 0 of a topic, one whose transaction is committed there. Each
test runs the CLI's ``main(argv)`` in-process and asserts what it prints and its exit
status.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cli import main
from tickwheel.cli._client import CommandError
from tickwheel.cli._wire import Api, Connection, split_address
from tickwheel.protocol import VersionRange
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

CLIENT_TIMEOUT_S = 30.0
RECORDS = 3


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "3"}


@dataclass(frozen=True)
class Scene:
    """A topic with an open and a committed transaction on its partition 0."""

    bootstrap: str
    topic: str
    open_id: str
    committed_id: str
    open_first_offset: int


def _transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    return producer


def _send(producer: Producer, topic: str) -> list[int]:
    """Send ``RECORDS`` records to partition 0 and wait for them; their offsets."""
    offsets: list[int] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        offsets.append(int(message.offset() or 0))

    for index in range(RECORDS):
        producer.produce(topic, value=b"v%d" % index, partition=0, on_delivery=delivered)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    return offsets


@pytest.fixture
def scene(tickwheel_broker: BackgroundBroker) -> Iterator[Scene]:
    bootstrap = tickwheel_broker.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic = f"txn-cli-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(CLIENT_TIMEOUT_S)
    committed = _transactional_producer(bootstrap, f"committed-{suffix}")
    _send(committed, topic)
    committed.commit_transaction(CLIENT_TIMEOUT_S)
    still_open = _transactional_producer(bootstrap, f"open-{suffix}")
    offsets = _send(still_open, topic)
    yield Scene(bootstrap, topic, f"open-{suffix}", f"committed-{suffix}", min(offsets))
    still_open.abort_transaction(CLIENT_TIMEOUT_S)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``tickwheel ARGV`` in-process; returns (exit status, stdout, stderr)."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status, out, err = _cli(capsys, *argv, "--format", "json")
    assert (status, err) == (0, "")
    return json.loads(out)


def test_list_shows_open_and_committed_transactions(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", scene.bootstrap)
    status, out, err = _cli(capsys, "transaction", "list", *b)
    assert (status, err) == (0, "")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE"]
    states = {line[0]: line[3] for line in lines[1:]}
    assert states == {scene.open_id: "Ongoing", scene.committed_id: "CompleteCommit"}

    listed = _json(capsys, "transaction", "list", *b)
    by_id = {row["transactional_id"]: row for row in listed}
    committed_pid = by_id[scene.committed_id]["producer_id"]
    # The broker is the coordinator of every id (it is the only one).
    assert {row["coordinator"] for row in listed} == {0}

    ongoing = _json(capsys, "transaction", "list", "--state", "Ongoing", *b)
    assert [row["transactional_id"] for row in ongoing] == [scene.open_id]
    by_pid = _json(capsys, "transaction", "list", "--producer-id", str(committed_pid), *b)
    assert [row["transactional_id"] for row in by_pid] == [scene.committed_id]
    nothing = ("transaction", "list", "--state", "PrepareAbort", *b)
    assert _cli(capsys, *nothing) == (0, "(none)\n", "")

    # Started more than an hour ago: none; more than 0 ms ago and still open: the open one.
    old_ones = ("transaction", "list", "--duration-filter", "3600000", *b)
    assert _cli(capsys, *old_ones) == (0, "(none)\n", "")
    running = _json(
        capsys, "transaction", "list", "--duration-filter", "0", "--state", "Ongoing", *b
    )
    assert [row["transactional_id"] for row in running] == [scene.open_id]


def test_describe_shows_the_open_transactions_partitions(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", scene.bootstrap)
    described = _json(capsys, "transaction", "describe", scene.open_id, *b)
    assert described["transaction_state"] == "Ongoing"
    assert described["partitions"] == [{"topic": scene.topic, "partition": 0}]
    assert described["producer_epoch"] >= 0
    assert described["timeout_ms"] == 60_000  # librdkafka's transaction.timeout.ms
    assert described["start_time_ms"] > 0
    assert described["duration_ms"] >= 0

    status, out, err = _cli(capsys, "transaction", "describe", scene.committed_id, *b)
    assert (status, err) == (0, "")
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["TRANSACTION"]
    assert lines[1][:5] == [
        "TRANSACTIONAL-ID",
        "COORDINATOR",
        "PRODUCER-ID",
        "PRODUCER-EPOCH",
        "TRANSACTION-STATE",
    ]
    assert lines[2][0] == scene.committed_id
    assert lines[2][4] == "CompleteCommit"
    assert out.endswith("PARTITIONS\n(none)\n")

    # An id whose producer has begun no transaction: Kafka's start time -1 is none.
    idle_id = f"idle-{scene.topic}"
    idle = Producer({"bootstrap.servers": scene.bootstrap, "transactional.id": idle_id})
    idle.init_transactions(CLIENT_TIMEOUT_S)
    described = _json(capsys, "transaction", "describe", idle_id, *b)
    assert described["transaction_state"] == "Empty"
    assert (described["start_time_ms"], described["duration_ms"]) == (None, None)
    status, out, _ = _cli(capsys, "transaction", "describe", idle_id, *b)
    assert status == 0
    assert out.splitlines()[2].split()[-2:] == ["-", "-"]


def test_describe_producers_shows_the_open_transactions_first_offset(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", scene.bootstrap)
    open_pid = _json(capsys, "transaction", "describe", scene.open_id, *b)["producer_id"]
    producers = _json(
        capsys, "transaction", "describe-producers", scene.topic, "--partition", "0", *b
    )
    assert len(producers) == 2
    by_pid = {row["producer_id"]: row for row in producers}
    still_open = by_pid.pop(open_pid)
    assert still_open["current_transaction_start_offset"] == scene.open_first_offset
    assert still_open["last_sequence"] == RECORDS - 1
    (committed,) = by_pid.values()
    assert committed["current_transaction_start_offset"] is None

    status, out, _ = _cli(
        capsys, "transaction", "describe-producers", scene.topic, "--partition", "1", *b
    )
    assert (status, out) == (0, "(none)\n")


def test_unknown_ids_topics_and_partitions_are_one_line_errors(
    scene: Scene, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", scene.bootstrap)
    cases = [
        (("describe", "no-such-id"), "TRANSACTIONAL_ID_NOT_FOUND"),
        (("describe-producers", "no-such-topic", "--partition", "0"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (("describe-producers", scene.topic, "--partition", "7"), "has no partition 7"),
    ]
    for argv, reason in cases:
        status, out, err = _cli(capsys, "transaction", *argv, *b)
        assert (status, out) == (1, "")
        assert err.startswith(f"tickwheel transaction {argv[0]}: ")
        assert reason in err
        assert err.count("\n") == 1


def test_a_version_the_broker_does_not_serve_is_named(
    tickwheel_broker: BackgroundBroker,
) -> None:
    beyond = Api(66, "ListTransactions", VersionRange(90, 91))
    address = split_address(tickwheel_broker.bootstrap_servers)
    expected = r"serves ListTransactions v0-1, this command speaks v90-91"
    with Connection(*address) as connection, pytest.raises(CommandError, match=expected):
        connection.request(beyond, {})


def test_no_broker_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _cli(capsys, "transaction", "list", "-b", "127.0.0.1:1")
    assert (status, out) == (1, "")
    assert err.startswith("tickwheel transaction list: cannot reach 127.0.0.1:1")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ("transaction", "--help"),
        ("transaction", "list", "--help"),
        ("transaction", "describe", "--help"),
        ("transaction", "describe-producers", "--help"),
    ],
)
def test_help_at_every_level(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: tickwheel transaction")


def test_a_state_kafka_does_not_know_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["transaction", "list", "--state", "Open"])
    assert exited.value.code == 2
    assert "invalid choice: 'Open'" in capsys.readouterr().err
