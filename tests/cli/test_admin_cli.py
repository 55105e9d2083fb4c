"""The admin verbs end to end: ``tickwheel topic|group|produce|consume`` against a broker.

Each test runs the CLI's ``main(argv)`` in-process against the ``tickwheel_broker``
fixture and asserts what it prints and its exit status; ``--version`` and a bad
``serve --log-level`` run as ``python -m tickwheel`` processes.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Message

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker
from tickwheel.timer import BUILD

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``tickwheel ARGV`` in-process; returns (exit status, stdout, stderr)."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _produce(
    monkeypatch: pytest.MonkeyPatch, broker: BackgroundBroker, topic: str, text: str, *flags: str
) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return main(["produce", topic, "-b", broker.bootstrap_servers, *flags])


def test_version_names_the_package_version_and_build() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwheel", "--version"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("tickwheel ")
    assert f"({BUILD})" in done.stdout


def test_a_bad_log_level_is_refused_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwheel", "serve", "--log-level", "verbose"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice: 'VERBOSE'" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["topic", "craete", "t"])
    assert exited.value.code == 2
    assert "invalid choice: 'craete'" in capsys.readouterr().err


def test_topic_create_list_describe_add_partitions_delete(
    tickwheel_broker: BackgroundBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    b = ("-b", tickwheel_broker.bootstrap_servers)
    create = ("topic", "create", "orders", "--partitions", "2", "--config", "retention.ms=60000")
    assert _cli(capsys, *create, *b) == (0, "created topic orders\n", "")

    status, out, err = _cli(capsys, *create, *b)
    assert status == 1
    assert out == ""
    assert err.startswith("tickwheel topic create: ")
    assert "already exists" in err
    assert err.count("\n") == 1

    status, out, _ = _cli(capsys, "topic", "list", *b)
    assert status == 0
    assert out.splitlines()[0].split() == ["NAME", "PARTITIONS"]
    assert ["orders", "2"] in [line.split() for line in out.splitlines()]

    status, out, _ = _cli(capsys, "topic", "describe", "orders", "--format", "json", *b)
    assert status == 0
    described = json.loads(out)
    assert described["name"] == "orders"
    assert [p["partition"] for p in described["partition_details"]] == [0, 1]
    for partition in described["partition_details"]:
        assert partition["replicas"] == [partition["leader"]]
        assert partition["isr"] == [partition["leader"]]
        assert (partition["low_offset"], partition["high_offset"]) == (0, 0)
    configs = {entry["name"]: entry["value"] for entry in described["configs"]}
    assert configs["retention.ms"] == "60000"

    status, out, _ = _cli(capsys, "topic", "describe", "orders", *b)
    assert status == 0
    assert "PARTITIONS\nPARTITION  LEADER  REPLICAS  ISR  LOW-OFFSET  HIGH-OFFSET\n" in out
    assert "retention.ms" in out

    assert _cli(capsys, "topic", "add-partitions", "orders", "--partitions", "3", *b)[0] == 0
    status, out, _ = _cli(capsys, "topic", "list", "--format", "json", *b)
    assert {"name": "orders", "partitions": 3} in json.loads(out)

    assert _cli(capsys, "topic", "delete", "orders", *b) == (0, "deleted topic orders\n", "")
    status, out, err = _cli(capsys, "topic", "describe", "orders", *b)
    assert (status, out) == (1, "")
    assert err.startswith("tickwheel topic describe: ")
    assert "nknown topic" in err


def test_produce_lines_with_keys_and_headers_then_consume_them(
    tickwheel_broker: BackgroundBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = ("-b", tickwheel_broker.bootstrap_servers)
    assert _cli(capsys, "topic", "create", "lines", "--partitions", "1", *b)[0] == 0
    flags = ("--key-separator", ":", "--header", "source=cli", "--partition", "0", "--acks", "1")
    assert _produce(monkeypatch, tickwheel_broker, "lines", "a:one\nb:two\nthree\n", *flags) == 0
    capsys.readouterr()

    status, out, err = _cli(
        capsys,
        *("consume", "lines", "--from-beginning", "--num", "3"),
        *("--format", r"%t/%p@%o %k=%s [%h]\n"),
        *b,
    )
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "lines/0@0 a=one [source=cli]",
        "lines/0@1 b=two [source=cli]",
        "lines/0@2 =three [source=cli]",
    ]

    status, out, _ = _cli(capsys, "consume", "lines", "--from-beginning", "--exit-at-end", *b)
    assert (status, out) == (0, "one\ntwo\nthree\n")


def test_group_describe_shows_members_offsets_and_lag_then_delete(
    tickwheel_broker: BackgroundBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = ("-b", tickwheel_broker.bootstrap_servers)
    assert _cli(capsys, "topic", "create", "events", "--partitions", "1", *b)[0] == 0
    assert _produce(monkeypatch, tickwheel_broker, "events", "1\n2\n3\n") == 0

    # A member that consumes and commits, still in the group while it is described.
    consumer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["events"])
        seen: list[Message] = []
        while len(seen) < 2:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message)
        consumer.commit(message=seen[-1], asynchronous=False)

        status, out, _ = _cli(capsys, "group", "list", "--format", "json", *b)
        assert status == 0
        assert {"group": "readers", "state": "STABLE"} in json.loads(out)

        status, out, _ = _cli(capsys, "group", "describe", "readers", "--format", "json", *b)
        assert status == 0
        group = json.loads(out)
        assert (group["state"], group["members"], group["total_lag"]) == ("STABLE", 1, 1)
        assert group["member_details"][0]["assignment"] == ["events/0"]
        assert group["offsets"] == [
            {
                "topic": "events",
                "partition": 0,
                "committed_offset": 2,
                "high_offset": 3,
                "lag": 1,
            }
        ]
        status, out, _ = _cli(capsys, "group", "describe", "readers", *b)
        assert "OFFSETS\nTOPIC   PARTITION  COMMITTED-OFFSET  HIGH-OFFSET  LAG\n" in out
        assert out.rstrip().endswith("events  0          2                 3            1")

        status, _, err = _cli(capsys, "group", "delete", "readers", *b)
        assert status == 1
        assert err.startswith("tickwheel group delete: ")
    finally:
        consumer.close()

    assert _cli(capsys, "group", "delete", "readers", *b) == (0, "deleted group readers\n", "")
    status, _, err = _cli(capsys, "group", "describe", "readers", *b)
    assert status == 1
    assert "does not exist" in err


def test_consume_as_a_group_commits_what_it_printed(
    tickwheel_broker: BackgroundBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    b = ("-b", tickwheel_broker.bootstrap_servers)
    assert _cli(capsys, "topic", "create", "clicks", "--partitions", "2", *b)[0] == 0
    assert _produce(monkeypatch, tickwheel_broker, "clicks", "x\ny\nz\n") == 0
    capsys.readouterr()

    status, out, _ = _cli(
        capsys, "consume", "clicks", "--group", "g", "--from-beginning", "--exit-at-end", *b
    )
    assert status == 0
    assert sorted(out.splitlines()) == ["x", "y", "z"]

    status, out, _ = _cli(capsys, "group", "describe", "g", "--format", "json", *b)
    group = json.loads(out)
    assert (group["state"], group["members"], group["total_lag"]) == ("EMPTY", 0, 0)
    assert sum(row["committed_offset"] for row in group["offsets"]) == 3
