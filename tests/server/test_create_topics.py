"""CreateTopics and CreatePartitions under a low RLIMIT_NOFILE: all or nothing; and
the soft limit raised to the hard one at start.

Each test runs ``tickwheel serve`` in a child process whose descriptor limits are
lowered there (the hard one too, so that the broker cannot raise the soft one past
it), so this process keeps its own limits.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey

from .wire import WireClient, create_topic_result

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
LISTENING = re.compile(r"listening on (\S+):(\d+)")
CHILD_NOFILE = 256
TOO_MANY_PARTITIONS = 400
"""More partitions than ``CHILD_NOFILE`` descriptors can hold (one file per log)."""
FEW_PARTITIONS = 4
METADATA = ApiKey.METADATA
CREATE_PARTITIONS = ApiKey.CREATE_PARTITIONS
_CHILD = """
import resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {hard_limit}))
if {without_budget}:
    # Let the request reach the logs, to exercise the rollback on a real EMFILE.
    import tickwheel.server.apis._create_topics as create_topics
    import tickwheel.server.apis._create_partitions as create_partitions
    create_topics.partitions_that_fit = lambda: None
    create_partitions.validate_descriptor_budget = lambda context, new_partitions: None
    create_topics.validate_descriptor_budget = lambda context, new_partitions: None
from tickwheel.cli._serve import main
sys.exit(main(sys.argv[1:]))
"""


@contextlib.contextmanager
def _child(
    log_dir: Path, *, without_budget: bool, hard_limit: str
) -> Iterator[tuple[int, str, list[str]]]:
    """``tickwheel serve`` under the lowered limits: (pid, bootstrap, what it said until
    it listened); stopped by SIGTERM, which it must survive cleanly."""
    script = _CHILD.format(
        nofile=CHILD_NOFILE, without_budget=without_budget, hard_limit=hard_limit
    )
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={log_dir}",
            "--override",
            "offsets.topic.num.partitions=1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        said = []
        for line in process.stderr:
            said.append(line)
            found = LISTENING.search(line)
            if found:
                break
        assert found, "the broker never said where it listens"
        try:
            yield process.pid, f"{found[1]}:{found[2]}", said
        finally:
            process.send_signal(signal.SIGTERM)
            rest = process.stderr.read()
            assert process.wait(TIMEOUT_S) == 0, rest
            assert "Traceback" not in rest, rest


def _serve(log_dir: Path, *, without_budget: bool) -> Iterator[tuple[WireClient, str]]:
    with _child(log_dir, without_budget=without_budget, hard_limit=str(CHILD_NOFILE)) as (
        _,
        bootstrap,
        _,
    ):
        client = WireClient(bootstrap)
        try:
            yield client, bootstrap
        finally:
            client.close()


@pytest.fixture
def budgeted(tmp_path: Path) -> Iterator[tuple[WireClient, str]]:
    yield from _serve(tmp_path, without_budget=False)


@pytest.fixture
def unbudgeted(tmp_path: Path) -> Iterator[tuple[WireClient, str]]:
    yield from _serve(tmp_path, without_budget=True)


def _grow(client: WireClient, name: str, count: int) -> Any:
    body = client.call(
        CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": name, "count": count, "assignments": None}],
            "timeout": 1000,
            "validate_only": False,
        },
    )
    return body.results[0]


def _partitions(bootstrap: str, name: str) -> list[Any] | None:
    """The topic's partitions as a new connection sees them; None if unknown."""
    client = WireClient(bootstrap)
    try:
        body = client.call(
            METADATA, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False}
        )
    finally:
        client.close()
    topic = body.topics[0]
    if topic.error_code == ErrorCode.unknown_topic_or_partition:
        return None
    return list(topic.partitions)


def _dirs(log_dir: Path, name: str) -> list[Path]:
    return sorted(log_dir.glob(f"{name}-*"))


def test_a_topic_over_the_descriptor_budget_is_refused_before_anything_is_made(
    budgeted: tuple[WireClient, str], tmp_path: Path
) -> None:
    client, bootstrap = budgeted
    result = create_topic_result(client, "many", TOO_MANY_PARTITIONS)
    assert result.error_code == ErrorCode.policy_violation
    assert "RLIMIT_NOFILE" in result.error_message
    assert _dirs(tmp_path, "many") == []
    assert _partitions(bootstrap, "many") is None
    assert create_topic_result(client, "few", FEW_PARTITIONS).error_code == ErrorCode.none
    grown = _grow(client, "few", TOO_MANY_PARTITIONS)
    assert grown.error_code == ErrorCode.policy_violation
    assert len(_partitions(bootstrap, "few") or []) == FEW_PARTITIONS


def test_running_out_of_descriptors_rolls_the_topic_back(
    unbudgeted: tuple[WireClient, str], tmp_path: Path
) -> None:
    client, bootstrap = unbudgeted
    result = create_topic_result(client, "many", TOO_MANY_PARTITIONS)
    assert result.error_code == ErrorCode.kafka_storage_error
    assert _dirs(tmp_path, "many") == []
    # The same connection is answered and new ones are accepted: the descriptors are back.
    assert _partitions(bootstrap, "many") is None
    assert create_topic_result(client, "few", FEW_PARTITIONS).error_code == ErrorCode.none
    grown = _grow(client, "few", TOO_MANY_PARTITIONS)
    assert grown.error_code == ErrorCode.kafka_storage_error
    assert len(_partitions(bootstrap, "few") or []) == FEW_PARTITIONS
    assert len(_dirs(tmp_path, "few")) == FEW_PARTITIONS


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one_at_start(tmp_path: Path) -> None:
    with _child(tmp_path, without_budget=False, hard_limit="hard") as (pid, _, said):
        limits = Path(f"/proc/{pid}/limits").read_text()
    (line,) = [line for line in limits.splitlines() if line.startswith("Max open files")]
    soft, hard = line.split()[3:5]
    assert soft == hard
    assert int(soft) > CHILD_NOFILE
    logged = [line for line in said if "RLIMIT_NOFILE" in line]
    assert logged, "".join(said)
    assert f"soft limit {soft} (was {CHILD_NOFILE}), hard limit {hard}" in logged[0]
