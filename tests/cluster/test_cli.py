"""``tickwheel cluster``: starts ZooKeeper and N brokers, and stops them all on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from .helpers import WAIT_S

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

BROKERS = 2


def test_cluster_command_starts_and_stops_every_process(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tickwheel.cli", "cluster", "--brokers", str(BROKERS)]
    command += ["--dir", str(tmp_path), "--base-port", "0", "--zookeeper-port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            printed = {}
            for line in process.stdout:
                name, sep, value = line.strip().partition("=")
                if sep:
                    printed[name] = value
                if line.startswith("Ctrl-C"):
                    break
            admin = AdminClient({"bootstrap.servers": printed["bootstrap.servers"]})
            assert sorted(admin.list_topics(timeout=WAIT_S).brokers) == list(range(BROKERS))
            assert printed["zookeeper.connect"].startswith("127.0.0.1:")
            process.send_signal(signal.SIGINT)
            assert process.wait(WAIT_S) == 0
        finally:
            if process.poll() is None:
                process.kill()
    for broker_id in range(BROKERS):
        log = (tmp_path / f"broker-{broker_id}.log").read_text(encoding="utf-8")
        assert f"tickwheel broker {broker_id} stopped" in log
    assert (tmp_path / "zookeeper" / "zoo.cfg").exists()
