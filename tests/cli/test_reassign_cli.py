"""``tickwheel reassign list|execute|cancel`` against a broker, in-process: the controller
of a cluster of one moves nothing, names what it refuses, and a bad plan is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

TIMEOUT_S = 10.0
BROKER_ID = 0


def run(
    capsys: pytest.CaptureFixture[str], broker: BackgroundBroker, *argv: str
) -> tuple[int, str, str]:
    status = main(["reassign", *argv, "-b", broker.bootstrap_servers])
    out, err = capsys.readouterr()
    return status, out, err


def plan(tmp_path: Path, document: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def moves(*entries: tuple[str, int, list[int]]) -> dict[str, object]:
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
            for t, p, r in entries
        ],
    }


@pytest.fixture
def topic(tickwheel_broker: BackgroundBroker) -> str:
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    admin.create_topics([NewTopic("moved", 1, 1)])["moved"].result(TIMEOUT_S)
    return "moved"


def test_execute_list_and_cancel(
    capsys: pytest.CaptureFixture[str],
    tickwheel_broker: BackgroundBroker,
    tmp_path: Path,
    topic: str,
) -> None:
    own = plan(tmp_path, moves((topic, 0, [BROKER_ID])))
    assert run(capsys, tickwheel_broker, "execute", "--reassignment-json-file", own) == (
        0,
        f"Successfully started partition reassignments for {topic}-0\n",
        "",
    )
    assert run(capsys, tickwheel_broker, "list", "--format", "json") == (0, "[]\n", "")
    status, out, err = run(capsys, tickwheel_broker, "cancel", "--reassignment-json-file", own)
    assert (status, out) == (1, "")
    assert err == f"tickwheel reassign cancel: {topic}-0: NO_REASSIGNMENT_IN_PROGRESS\n"


def test_a_refused_move_names_the_partition_and_kafkas_error(
    capsys: pytest.CaptureFixture[str],
    tickwheel_broker: BackgroundBroker,
    tmp_path: Path,
    topic: str,
) -> None:
    elsewhere = plan(tmp_path, moves((topic, 0, [BROKER_ID, 7])))
    status, out, err = run(
        capsys, tickwheel_broker, "execute", "--reassignment-json-file", elsewhere
    )
    assert (status, out) == (1, "")
    assert err.startswith(f"tickwheel reassign execute: {topic}-0: INVALID_REPLICA_ASSIGNMENT (")
    assert "not alive" in err


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": 1}, "needs a non-empty 'partitions' list"),
        ({"partitions": [{"topic": "t", "partition": "0", "replicas": [0]}]}, "partition must"),
        ({"partitions": [{"topic": "t", "partition": 0, "replicas": ["a"]}]}, "broker ids"),
        (
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [0], "log_dirs": ["/d"]}]},
            "log_dirs: only 'any' is supported",
        ),
    ],
)
def test_a_malformed_plan_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    tickwheel_broker: BackgroundBroker,
    tmp_path: Path,
    document: object,
    message: str,
) -> None:
    path = plan(tmp_path, document)
    status, out, err = run(capsys, tickwheel_broker, "execute", "--reassignment-json-file", path)
    assert (status, out) == (1, "")
    assert err.startswith("tickwheel reassign execute: --reassignment-json-file: ")
    assert message in err
    assert len(err.splitlines()) == 1
