"""``tickwheel bench failover``: how long a dead leader's partitions stop taking writes.

A ``LocalCluster`` (ZooKeeper and three ``tickwheel serve`` processes, logs under
``--log-parent``, default ``/dev/shm``) with ``zookeeper.session.timeout.ms`` at
``--session-timeout-ms`` (6000) holds a topic of three partitions, replication factor
3, ``min.insync.replicas`` 2, one partition led by each broker. An idempotent acks=all
confluent-kafka producer writes to every partition throughout. ``--kills`` times
(10), the leader of the next partition is SIGKILLed; for each partition it led, the
failover time is from the kill to the first write acknowledged after it. The killed
broker is then restarted, the ISRs fill up again and a preferred election
(``AdminClient.elect_leaders``) puts every leadership back before the next kill.

Printed: p50 and max of the failover times, and how much of it is detection (the
session expiring: from the kill to the new leader in ZooKeeper) against the rest
(the new leader serving and the producer finding it). Target: p50 ≤ 8 s,
max ≤ 10 s at a 6 s session timeout. No peer runs here: tansu has no replication to
fail over, and Kafka itself is not installable on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import ElectionType, KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.cluster import LocalCluster
from tickwheel.replica import NO_LEADER

_TMPFS = "/dev/shm"
_BROKERS = 3
_TOPIC = "failover"
_ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}
_CLIENT_TIMEOUT_S = 60.0
_POLL_S = 0.01
_MAX_QUEUED = 1000
_ELECT_ATTEMPTS = 20
_RETRY_S = 0.5
_P50_TARGET_S = 8.0
_MAX_TARGET_S = 10.0


class _Writer:
    """Writes to every partition until stopped; remembers each partition's last ack."""

    def __init__(self, bootstrap: str) -> None:
        self.last_ack_s: dict[int, float] = {}
        self.failures = 0
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 1,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        partition = message.partition()
        if error is None and partition is not None:
            self.last_ack_s[partition] = time.monotonic()
        elif error is not None:
            self.failures += 1

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            if len(self._producer) < _MAX_QUEUED:
                partition = number % len(_ASSIGNMENT)
                self._producer.produce(
                    _TOPIC, b"x", partition=partition, on_delivery=self._delivered
                )
                number += 1
            self._producer.poll(0.001)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(_CLIENT_TIMEOUT_S)


def _leader(cluster: LocalCluster, partition: int) -> int:
    state = cluster.partition_state(_TOPIC, partition)
    return NO_LEADER if state is None else state.leader


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = _CLIENT_TIMEOUT_S) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(_POLL_S)
    return time.monotonic()


def _elect_preferred(cluster: LocalCluster) -> None:
    """ElectLeaders(PREFERRED) for every partition, sent to the controller.

    A new client each try: one that learnt of a controller before it died may ask a
    broker that is not the controller any more, which answers NOT_CONTROLLER.
    """
    for _ in range(_ELECT_ATTEMPTS):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        results = admin.elect_leaders(ElectionType.PREFERRED, None).result(_CLIENT_TIMEOUT_S)
        refused = [
            error
            for error in results.values()
            if isinstance(error, KafkaError) and error.code() == KafkaError.NOT_CONTROLLER
        ]
        if not refused:
            return
        time.sleep(_RETRY_S)
    raise TimeoutError("no controller answered ElectLeaders")


def _kill_once(cluster: LocalCluster, writer: _Writer, partition: int) -> list[tuple[float, float]]:
    """Kill ``partition``'s leader; (detection s, failover s) per partition it led."""
    victim = _leader(cluster, partition)
    led = [p for p in _ASSIGNMENT if _leader(cluster, p) == victim]
    cluster.brokers[victim].kill()
    killed_s = time.monotonic()
    samples = []
    for p in led:

        def elected(p: int = p) -> bool:
            return _leader(cluster, p) not in (victim, NO_LEADER)

        def acked(p: int = p) -> bool:
            return writer.last_ack_s.get(p, 0.0) > killed_s

        elected_s = _wait(elected, "a leader")
        acked_s = _wait(acked, "an ack")
        samples.append((elected_s - killed_s, acked_s - killed_s))
    cluster.brokers[victim].start()
    cluster.wait_registered(victim)
    _wait(
        lambda: all(
            len(state.isr) == _BROKERS
            for p in _ASSIGNMENT
            if (state := cluster.partition_state(_TOPIC, p)) is not None
        ),
        "full ISRs",
    )
    _rebalance(cluster)
    return samples


def _rebalance(cluster: LocalCluster) -> None:
    """Preferred elections until every partition is led by its first replica again."""

    def balanced() -> bool:
        return all(_leader(cluster, p) == replicas[0] for p, replicas in _ASSIGNMENT.items())

    for _ in range(_ELECT_ATTEMPTS):
        _elect_preferred(cluster)
        try:
            _wait(balanced, "balance", timeout_s=_RETRY_S * 10)
        except TimeoutError:
            continue
        return
    raise TimeoutError("leadership never went back to the preferred replicas")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tickwheel bench failover", description=__doc__)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--log-parent", default=_TMPFS, help="where the brokers' logs go")
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Kill leaders ``--kills`` times under a steady producer and print the failover times."""
    args = _parser().parse_args(argv)
    parent = args.log_parent if Path(args.log_parent).is_dir() else None
    properties = {
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "offsets.topic.replication.factor": "3",
    }
    samples: list[tuple[float, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="tickwheel-bench-failover-", dir=parent) as base,
        LocalCluster(base, _BROKERS, properties=properties) as cluster,
    ):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(
            _TOPIC,
            num_partitions=len(_ASSIGNMENT),
            replica_assignment=[_ASSIGNMENT[p] for p in sorted(_ASSIGNMENT)],
            config={"min.insync.replicas": "2"},
        )
        admin.create_topics([topic])[_TOPIC].result(_CLIENT_TIMEOUT_S)
        writer = _Writer(cluster.bootstrap_servers)
        writer.start()
        try:
            _wait(lambda: len(writer.last_ack_s) == len(_ASSIGNMENT), "first acks")
            for kill in range(args.kills):
                samples += _kill_once(cluster, writer, kill % len(_ASSIGNMENT))
        finally:
            writer.stop()
    detection = sorted(d for d, _ in samples)
    failover = sorted(f for _, f in samples)
    p50, worst = statistics.median(failover), failover[-1]
    print(
        f"## Failover ({_BROKERS} brokers, RF 3, min.insync.replicas 2, "
        f"zookeeper.session.timeout.ms={args.session_timeout_ms}, {args.kills} leader kills)\n"
    )
    print("| from SIGKILL to | p50 s | max s | samples |")
    print("|---|---:|---:|---:|")
    print(
        f"| new leader in ZooKeeper | {statistics.median(detection):.2f} "
        f"| {detection[-1]:.2f} | {len(detection)} |"
    )
    print(f"| first acknowledged write | {p50:.2f} | {worst:.2f} | {len(failover)} |")
    after = sorted(f - d for d, f in samples)
    print(
        f"| (after the election) | {statistics.median(after):.2f} | {after[-1]:.2f} "
        f"| {len(after)} |"
    )
    met = "met" if p50 <= _P50_TARGET_S and worst <= _MAX_TARGET_S else "MISSED"
    print(
        f"\np50 {p50:.2f} s, max {worst:.2f} s (target p50 ≤ {_P50_TARGET_S:.0f} s, "
        f"max ≤ {_MAX_TARGET_S:.0f} s: {met}); failed deliveries: {writer.failures}"
    )
    save_png(
        args.png,
        f"tickwheel bench failover - {args.kills} leader kills, "
        f"zookeeper.session.timeout.ms={args.session_timeout_ms}",
        [
            Bars(
                title="from SIGKILL of a leader to",
                unit="s",
                values={
                    "p50": {
                        "new leader in ZooKeeper": statistics.median(detection),
                        "first acknowledged write": p50,
                    },
                    "max": {
                        "new leader in ZooKeeper": detection[-1],
                        "first acknowledged write": worst,
                    },
                },
            )
        ],
    )
    return 0
