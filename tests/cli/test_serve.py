"""``tickwheel serve``: a broker process that logs where it listens and stops on a signal."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from replica.records import batch
from server.wire import WireClient
from tickwheel.server import BrokerConfig

pytestmark = pytest.mark.integration

TIMEOUT_S = 30
LISTENING = re.compile(r"listening on (\S+):(\d+)")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_until_a_signal_then_stop_cleanly(tmp_path: Path, signum: int) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"log.dirs={tmp_path / 'logs'}\nnum.partitions=2\n")
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tickwheel.cli",
            "serve",
            str(properties),
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            "offsets.topic.num.partitions=1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            found = LISTENING.search(line)
            if found:
                break
        assert found, "the broker never said where it listens"
        client = WireClient(f"{found[1]}:{found[2]}")
        try:
            body = client.call(
                3, 4, {"topics": [{"name": "cli"}], "allow_auto_topic_creation": True}
            )
            produced = client.call(
                0,
                9,
                {
                    "acks": 1,
                    "timeout": 1000,
                    "topic_data": [
                        {"name": "cli", "partition_data": [{"index": 0, "records": batch(b"x")}]}
                    ],
                },
            )
        finally:
            client.close()
        assert len(body.topics[0].partitions) == 2
        assert produced.responses[0].partition_responses[0].base_offset == 0
        process.send_signal(signum)
        rest = process.stderr.read()
        assert process.wait(TIMEOUT_S) == 0
    assert "stopped" in rest
    # A clean stop checkpoints the recovery points: the log directory's file names both.
    checkpoint = (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_text()
    assert checkpoint.splitlines()[1:] == ["2", "cli 0 1", "cli 1 0"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num.partitions=lots", "num.partitions"),
        (
            "controlled.shutdown.max.retries=-1",
            "controlled.shutdown.max.retries must not be negative",
        ),
    ],
)
def test_a_bad_override_is_refused(override: str, message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tickwheel.cli", "serve", "--override", override],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_busy_port_is_reported_without_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tickwheel.cli",
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={tmp_path / 'logs'}",
                "--override",
                "offsets.topic.num.partitions=1",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 2
    assert f"tickwheel serve: cannot listen on PLAINTEXT://127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_shipped_server_properties_are_all_known(caplog: pytest.LogCaptureFixture) -> None:
    shipped = Path(__file__).parents[2] / "config" / "server.properties"
    with caplog.at_level("WARNING"):
        config = BrokerConfig.from_file(shipped)
    assert not [r for r in caplog.records if "unknown" in r.getMessage()]
    assert config.listeners == "PLAINTEXT://127.0.0.1:9092"
    assert config.log_retention_ms == 168 * 3_600_000


def test_an_unusable_log_dir_is_refused_at_start_up(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    unusable = blocker / "logs"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwheel.cli",
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path / 'fine'},{unusable}",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert f"tickwheel serve: log.dirs entry '{unusable}' is not a usable directory" in done.stderr
    assert "Traceback" not in done.stderr
    assert "listening" not in done.stderr


@pytest.mark.parametrize(
    ("file_name", "overrides"),
    [
        ("acls.json", ["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"]),
        ("tickwheel-users.json", []),
    ],
)
def test_a_corrupt_security_file_is_refused_at_start_up(
    tmp_path: Path, file_name: str, overrides: list[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    corrupt = logs / file_name
    corrupt.write_text("{not json")
    arguments = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={logs}", *overrides]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwheel.cli",
            "serve",
            *(part for override in arguments for part in ("--override", override)),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert "tickwheel serve: cannot read the " in done.stderr
    assert str(corrupt) in done.stderr
    assert "Traceback" not in done.stderr
    assert "listening" not in done.stderr
