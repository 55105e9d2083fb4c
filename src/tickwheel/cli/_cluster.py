"""``tickwheel cluster``: ZooKeeper and N brokers on loopback, until Ctrl-C.

(``tickwheel cluster health`` checks a running cluster instead: see ``_health``.)

Starts a ``LocalCluster`` (Debian's ZooKeeper standalone, then ``--brokers`` broker
processes, each with its own log directory under ``--dir`` and its own port from
``--base-port`` on), prints the bootstrap servers and the ``zookeeper.connect`` a
further broker would use, and on SIGINT or SIGTERM stops every broker cleanly, then
ZooKeeper. ``--override NAME=VALUE`` sets a broker property on every broker. With fewer
than three brokers, ``offsets.topic.replication.factor`` (Kafka's cluster default 3)
becomes the broker count unless overridden, or consumer groups could never start.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from types import FrameType

from tickwheel.cli import _health as health
from tickwheel.cluster import LocalCluster, ZooKeeperError
from tickwheel.coordinator.group import CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR
from tickwheel.server import parse_overrides

_DEFAULT_BROKERS = 3
_DEFAULT_BASE_PORT = 9092
_DEFAULT_ZOOKEEPER_PORT = 2181
_OFFSETS_REPLICATION = "offsets.topic.replication.factor"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel cluster",
        description="Run ZooKeeper and several tickwheel brokers on 127.0.0.1.",
    )
    parser.add_argument(
        "--brokers", type=int, default=_DEFAULT_BROKERS, help="number of brokers (default 3)"
    )
    parser.add_argument(
        "--dir", help="directory for ZooKeeper's data and the brokers' logs (default: a new one)"
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=_DEFAULT_BASE_PORT,
        help="broker N listens on base-port + N (default 9092; 0: free ports)",
    )
    parser.add_argument(
        "--zookeeper-port",
        type=int,
        default=_DEFAULT_ZOOKEEPER_PORT,
        help="ZooKeeper's client port (default 2181; 0: a free port)",
    )
    parser.add_argument("--chroot", default="", help="ZooKeeper chroot, e.g. /tickwheel")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker property for every broker (repeatable)",
    )
    return parser


def main(argv: list[str]) -> int:
    """Run the cluster until a signal (or check one: ``health``); returns the exit status."""
    if argv[:1] == ["health"]:
        return health.main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        properties = parse_overrides(args.override)
    except ValueError as exc:
        print(f"tickwheel cluster: {exc}", file=sys.stderr)
        return 2
    if args.chroot and not args.chroot.startswith("/"):
        print("tickwheel cluster: --chroot must start with /", file=sys.stderr)
        return 2
    if args.brokers < CLUSTER_OFFSETS_TOPIC_REPLICATION_FACTOR:
        properties.setdefault(_OFFSETS_REPLICATION, str(max(args.brokers, 1)))
    base_dir = args.dir or tempfile.mkdtemp(prefix="tickwheel-cluster-")
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    cluster = LocalCluster(
        base_dir,
        args.brokers,
        properties=properties,
        zookeeper_port=args.zookeeper_port,
        base_port=args.base_port,
        chroot=args.chroot,
    )
    try:
        cluster.start()
    except (ZooKeeperError, RuntimeError, TimeoutError, OSError) as exc:
        print(f"tickwheel cluster: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"zookeeper.connect={cluster.zookeeper_connect}")
        for broker in cluster.brokers:
            print(f"broker {broker.broker_id}: {broker.bootstrap_servers} (logs {broker.log_dir})")
        print(f"bootstrap.servers={cluster.bootstrap_servers}")
        print("Ctrl-C stops every broker, then ZooKeeper.", flush=True)
        stop.wait()
    finally:
        cluster.stop()
    print("cluster stopped")
    return 0
