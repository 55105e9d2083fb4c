"""``tickwheel bench startup``: how long until a fresh broker acknowledges its first write.

Three ways a test suite gets a broker, each measured ``--runs`` times (median and max):

- *in-process fixture*: ``BackgroundBroker`` (what ``tickwheel_broker`` runs) on a
  fresh log directory, from the constructor to the first produce acknowledged; and the
  first fixture of a session, which also pays for the imports: a fresh interpreter
  that imports ``tickwheel.server`` and confluent-kafka, starts one and produces once
  (the process's whole run, its interpreter start included);
- *``tickwheel serve`` process*: ``python -m tickwheel.cli serve`` on a free port, from
  the spawn (interpreter start and imports included) to the first produce acknowledged;
  once more with ``hypothesis`` made unimportable: kio imports it when it is installed
  (to register strategies for its types), which a development environment has and a
  deployment does not;
- *ZooKeeper + 3 brokers*: a ``LocalCluster`` (``tickwheel_cluster``), from the start of
  ZooKeeper to the first acks=all produce acknowledged by a topic with replication
  factor 3 and ``min.insync.replicas`` 2 (``--cluster-runs``, fewer: each costs seconds).

The clock stops when the delivery report of one acks=all confluent-kafka produce
arrives; the producer is created once the broker listens (as a fixture hands it over),
and the topic is created by that produce (auto-create) or, in the cluster, by the admin
client first. Log directories go under ``--log-parent`` (``/dev/shm`` when present).
Targets: in-process ≤ 100 ms, process ≤ 500 ms, cluster ≤ 6 s.
"""

from __future__ import annotations

import argparse
import functools
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.server import BackgroundBroker, BrokerConfig

_TMPFS = "/dev/shm"
_LOOPBACK = "127.0.0.1"
_TOPIC = "startup"
_CLIENT_TIMEOUT_S = 60.0
_CONNECT_POLL_S = 0.002
_PROCESS_STOP_TIMEOUT_S = 30.0
_TARGETS_S = {
    "in-process fixture": 0.1,
    "first in-process fixture": None,
    "tickwheel serve process": 0.5,
    "ZooKeeper + 3": 6.0,
}
_BROKER_PROPERTIES = {
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _first_ack(bootstrap: str) -> None:
    """Produce one record acks=all and wait for its delivery report."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "reconnect.backoff.ms": 1,
            "topic.metadata.refresh.fast.interval.ms": 10,
        }
    )
    producer.produce(_TOPIC, b"first", on_delivery=delivered)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0 or failures:
        raise RuntimeError(f"the first produce failed: {failures}")


def _in_process(log_parent: str | None) -> float:
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-startup-", dir=log_parent) as base:
        config = BrokerConfig.from_properties(
            {**_BROKER_PROPERTIES, "listeners": f"PLAINTEXT://{_LOOPBACK}:0", "log.dirs": base}
        )
        started_s = time.perf_counter()
        with BackgroundBroker(config) as broker:
            _first_ack(broker.bootstrap_servers)
            return time.perf_counter() - started_s


def _first_in_session(log_parent: str | None) -> float:
    code = (
        "import sys; from tickwheel.bench.startup import _in_process; "
        "_in_process(sys.argv[1] or None)"
    )
    started_s = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, log_parent or ""], check=True)
    return time.perf_counter() - started_s


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((_LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline_s = time.monotonic() + _CLIENT_TIMEOUT_S
    while True:
        try:
            socket.create_connection((_LOOPBACK, port), timeout=1.0).close()
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline_s:
                raise RuntimeError("tickwheel serve did not start listening") from None
            time.sleep(_CONNECT_POLL_S)
        else:
            return


_SERVE = [sys.executable, "-m", "tickwheel.cli", "serve"]
_SERVE_WITHOUT_HYPOTHESIS = [
    sys.executable,
    "-c",
    "import sys; sys.modules['hypothesis'] = None; "
    "from tickwheel.cli import main; sys.exit(main(sys.argv[1:]))",
    "serve",
]


def _process(log_parent: str | None, serve: list[str] = _SERVE) -> float:
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-startup-", dir=log_parent) as base:
        port = _free_port()
        overrides = {
            **_BROKER_PROPERTIES,
            "listeners": f"PLAINTEXT://{_LOOPBACK}:{port}",
            "log.dirs": base,
        }
        command = list(serve)
        for name, value in overrides.items():
            command += ["--override", f"{name}={value}"]
        started_s = time.perf_counter()
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        try:
            _wait_listening(port, process)
            _first_ack(f"{_LOOPBACK}:{port}")
            return time.perf_counter() - started_s
        finally:
            process.terminate()
            process.wait(_PROCESS_STOP_TIMEOUT_S)


def _cluster(log_parent: str | None) -> float:
    from tickwheel.cluster import LocalCluster  # noqa: PLC0415 - needs the cluster extra

    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-startup-", dir=log_parent) as base:
        started_s = time.perf_counter()
        with LocalCluster(base, 3, properties={"offsets.topic.replication.factor": "3"}) as cluster:
            while cluster.controller_id() is None:
                time.sleep(_CONNECT_POLL_S)
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
            topic = NewTopic(_TOPIC, 1, 3, config={"min.insync.replicas": "2"})
            admin.create_topics([topic])[_TOPIC].result(_CLIENT_TIMEOUT_S)
            _first_ack(cluster.bootstrap_servers)
            return time.perf_counter() - started_s


def _measure(what: Callable[[str | None], float], runs: int, log_parent: str | None) -> list[float]:
    return sorted(what(log_parent) for _ in range(runs))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tickwheel bench startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=11, help="runs of the single-broker cases")
    parser.add_argument("--cluster-runs", type=int, default=3, help="0 skips the cluster")
    parser.add_argument("--log-parent", default=_TMPFS, help="where the logs go")
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Measure the three start-ups and print a Markdown table of medians and maxima."""
    args = _parser().parse_args(argv)
    log_parent = args.log_parent if Path(args.log_parent).is_dir() else None
    cases: list[tuple[str, Callable[[str | None], float], int]] = [
        ("in-process fixture", _in_process, args.runs),
        ("first in-process fixture of a session, imports included", _first_in_session, args.runs),
        ("tickwheel serve process", _process, args.runs),
        (
            "tickwheel serve process, hypothesis not importable",
            functools.partial(_process, serve=_SERVE_WITHOUT_HYPOTHESIS),
            args.runs,
        ),
    ]
    if args.cluster_runs > 0:
        cases.append(("ZooKeeper + 3 brokers", _cluster, args.cluster_runs))
    print("## Start-up (to the first acks=all produce acknowledged)\n")
    print("| broker | median ms | max ms | runs | target ms |")
    print("|---|---:|---:|---:|---:|")
    values: dict[str, dict[str, float]] = {"median": {}, "target": {}}
    for name, what, runs in cases:
        samples = _measure(what, runs, log_parent)
        target_s = next(t for prefix, t in _TARGETS_S.items() if name.startswith(prefix))
        target = "" if target_s is None else f"{target_s * 1000:.0f}"
        print(
            f"| {name} | {statistics.median(samples) * 1000:.0f} | {samples[-1] * 1000:.0f} "
            f"| {runs} | {target} |",
            flush=True,
        )
        values["median"][name] = statistics.median(samples) * 1000
        if target_s is not None:
            values["target"][name] = target_s * 1000
    save_png(
        args.png,
        "tickwheel bench startup",
        [Bars(title="to the first produce acknowledged", unit="ms", values=values, log_scale=True)],
    )
    return 0
