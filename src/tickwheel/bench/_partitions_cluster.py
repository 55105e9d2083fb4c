"""The cluster case of ``tickwheel bench partitions``: a leader broker's SIGKILL with
many partitions.

A ``LocalCluster`` (ZooKeeper and three ``tickwheel serve`` processes) gets topics of
10 partitions at replication factor 3 totalling the count asked for, leaders spread
by the default assignment. Once every partition is led, the broker leading the most
partitions that is not the controller is SIGKILLed, and the clock runs until
ZooKeeper names a live leader for every partition (read from the partition state
znodes). The controller's own account of the round comes from its log
(``broker change: wrote N of M partition states in T ms, W ms of it in ZooKeeper
writes``): how many states it wrote, how long the round took and how much of it was
the writes, one fenced transaction per partition in turn.

Detection is the ZooKeeper session timeout (``zookeeper.session.timeout.ms``, 6 s
here as in ``bench failover``): the dead broker's registration lasts that long, and
nothing moves before it goes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient  # type: ignore[import-untyped]

from tickwheel.cluster import LocalCluster, decode_partition_state, partition_state_path
from tickwheel.replica import NO_LEADER

_BROKERS = 3
_REPLICATION = 3
_PER_TOPIC = 10
_SESSION_TIMEOUT_MS = 6000
_CLIENT_TIMEOUT_S = 600.0
_POLL_S = 0.2
_ROUND = re.compile(
    r"broker change: wrote (\d+) of (\d+) partition states in (\d+) ms, (\d+) ms of it"
)


@dataclass(frozen=True)
class ClusterFigures:
    """The cluster case's figures."""

    partitions: int
    create_s: float
    led_again_s: float
    states_written: int
    controller_round_ms: float
    zookeeper_write_ms: float


def _leaders(zk: KazooClient, chroot: str, partitions: list[tuple[str, int]]) -> list[int]:
    """Every partition's leader as ZooKeeper holds it, read in one pipelined pass."""
    pending = [
        zk.get_async(chroot + partition_state_path(topic, index)) for topic, index in partitions
    ]
    leaders = []
    for (topic, index), result in zip(partitions, pending, strict=True):
        data, stat = result.get(timeout=_CLIENT_TIMEOUT_S)
        path = partition_state_path(topic, index)
        leaders.append(decode_partition_state(path, data, int(stat.version)).leader)
    return leaders


def _wait_led(
    zk: KazooClient, chroot: str, partitions: list[tuple[str, int]], dead: set[int]
) -> list[int]:
    deadline = time.monotonic() + _CLIENT_TIMEOUT_S
    while True:
        try:
            leaders = _leaders(zk, chroot, partitions)
        except Exception:  # A state znode not written yet: look again.
            leaders = [NO_LEADER]
        if all(leader != NO_LEADER and leader not in dead for leader in leaders):
            return leaders
        if time.monotonic() > deadline:
            raise TimeoutError("partitions were not all led in time")
        time.sleep(_POLL_S)


def measure_cluster(base: Path, partitions: int) -> ClusterFigures:
    """Create ``partitions`` at RF 3 on three brokers, SIGKILL a leader, time the return."""
    properties = {
        "zookeeper.session.timeout.ms": str(_SESSION_TIMEOUT_MS),
        "offsets.topic.replication.factor": str(_REPLICATION),
        "offsets.topic.num.partitions": "1",
        "auto.leader.rebalance.enable": "false",
    }
    topics = [f"c{index:05d}" for index in range(partitions // _PER_TOPIC)]
    every = [(topic, index) for topic in topics for index in range(_PER_TOPIC)]
    with LocalCluster(base, _BROKERS, properties=properties) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        started = time.perf_counter()
        futures = admin.create_topics(
            [NewTopic(name, _PER_TOPIC, _REPLICATION) for name in topics],
            request_timeout=_CLIENT_TIMEOUT_S,
        )
        for future in futures.values():
            future.result(_CLIENT_TIMEOUT_S)
        zk = KazooClient(hosts=cluster.zookeeper.connect)
        zk.start()
        try:
            leaders = _wait_led(zk, cluster.chroot, every, set())
            create_s = time.perf_counter() - started
            controller = cluster.controller_id()
            if controller is None:
                raise RuntimeError("the cluster has no controller")
            victim = max(
                (broker for broker in range(_BROKERS) if broker != controller),
                key=leaders.count,
            )
            cluster.brokers[victim].kill()
            killed = time.perf_counter()
            _wait_led(zk, cluster.chroot, every, {victim})
            led_again_s = time.perf_counter() - killed
        finally:
            zk.stop()
            zk.close()
        written, _, round_ms, write_ms = _controller_round(cluster.brokers[controller].output)
    return ClusterFigures(partitions, create_s, led_again_s, written, round_ms, write_ms)


def _controller_round(output: Path) -> tuple[int, ...]:
    """The numbers of the controller's last broker-change round, from its log; the
    line comes once its writes are all answered, a moment after ZooKeeper shows them."""
    deadline = time.monotonic() + _CLIENT_TIMEOUT_S
    while True:
        rounds = _ROUND.findall(output.read_text(errors="replace"))
        if rounds:
            return tuple(int(value) for value in rounds[-1])
        if time.monotonic() > deadline:
            raise TimeoutError(f"the controller logged no broker-change round in {output}")
        time.sleep(_POLL_S)


def report_cluster(figures: ClusterFigures) -> str:
    """The cluster case as a Markdown table."""
    return "\n".join(
        [
            f"## {figures.partitions:,} partitions, 3 brokers, replication factor 3\n",
            "| figure | value |",
            "|---|---:|",
            f"| CreateTopics until every partition is led (s) | {figures.create_s:.1f} |",
            f"| leader broker SIGKILL → every partition led again (s) | "
            f"{figures.led_again_s:.1f} |",
            f"| of which the ZooKeeper session timeout (s) | {_SESSION_TIMEOUT_MS / 1000:.1f} |",
            f"| partition states the controller wrote | {figures.states_written:,} |",
            f"| controller round (ms) | {figures.controller_round_ms:,.0f} |",
            f"| of which ZooKeeper writes (ms) | {figures.zookeeper_write_ms:,.0f} |",
        ]
    )
