"""``tickwheel cluster``: starts ZooKeeper and N brokers, and stops them all on Ctrl-C;
``tickwheel cluster health`` tells a healthy cluster from one that lost a broker."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tickwheel.cluster import LocalCluster

from .helpers import WAIT_S, create_topic, isr, wait_for

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


def _health(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tickwheel", "cluster", "health"]
    return subprocess.run(
        [*command, "-b", cluster.bootstrap_servers, *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def test_cluster_health_reports_a_dead_broker_and_its_partitions(cluster: LocalCluster) -> None:
    create_topic(cluster, "watched", [[0, 1, 2]])
    healthy = _health(cluster, "--expect-brokers", "3", "--format", "json")
    assert healthy.returncode == 0, healthy.stderr
    assert json.loads(healthy.stdout)["healthy"] is True
    cluster.brokers[2].kill()
    # Its session expires, and it is out of the ISR (by its leader or the controller).
    wait_for(lambda: not cluster.is_registered(2), "broker 2's session to expire")
    wait_for(lambda: 2 not in isr(cluster, "watched"), "broker 2 to leave the ISR")
    sick = _health(cluster, "--expect-brokers", "3")
    assert sick.returncode == 1
    assert "UNHEALTHY: 2 of 3 brokers are up; 1 under-replicated partitions" in sick.stdout
    assert "watched" in sick.stdout
