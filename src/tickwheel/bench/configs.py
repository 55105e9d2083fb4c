"""``tickwheel bench configs``: how long a live config change takes to be in force.

Two setups, each altering ``retention.ms`` of a topic ``--changes`` times (40) with
confluent-kafka's ``incremental_alter_configs``, a new value each time:

- one broker (``BackgroundBroker``): the answer comes once the registry file is
  rewritten (fsync) and every partition log has the new ``LogConfig``;
- a ``LocalCluster`` (ZooKeeper and three ``tickwheel serve`` processes, logs under
  ``--log-parent``, default ``/dev/shm``), the topic with three partitions of three
  replicas: the answer comes once ZooKeeper holds the config and its change
  notification and the answering broker has applied it; then each broker is asked
  (DescribeConfigs, straight to it) until all three report the new value.

Printed: p50 and max of the answer time in each setup, and in the cluster of the time
until every broker applies the change. No peer runs here: tansu keeps no live config
changes, and Kafka is not installable on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.cluster import BrokerChannel, BrokerEndpoint, LocalCluster
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

_TMPFS = "/dev/shm"
_BROKERS = 3
_TOPIC = "configs"
_CLIENT_TIMEOUT_S = 60.0
_PROPAGATION_TIMEOUT_S = 30.0
_DESCRIBE_CONFIGS = ApiKey.DESCRIBE_CONFIGS
_DESCRIBE_VERSION = 4
_TOPIC_RESOURCE = 2
_FIRST_RETENTION_MS = 3_600_000


def _alter(admin: AdminClient, retention_ms: int) -> float:
    """Set ``retention.ms`` of the topic; seconds until the broker answered."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        _TOPIC,
        incremental_configs=[
            ConfigEntry(
                "retention.ms", str(retention_ms), incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    started = time.monotonic()
    admin.incremental_alter_configs([resource])[resource].result(_CLIENT_TIMEOUT_S)
    return time.monotonic() - started


def _single_node(base: Path, changes: int) -> list[float]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(base / "single"),
            "offsets.topic.num.partitions": "1",
        }
    )
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(_TOPIC, _BROKERS, 1)])[_TOPIC].result(_CLIENT_TIMEOUT_S)
        return [_alter(admin, _FIRST_RETENTION_MS + n) for n in range(changes)]


async def _retention_on(channel: BrokerChannel) -> str | None:
    request = {
        "resources": [
            {
                "resource_type": _TOPIC_RESOURCE,
                "resource_name": _TOPIC,
                "configuration_keys": ["retention.ms"],
            }
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = await channel.request(_DESCRIBE_CONFIGS, _DESCRIBE_VERSION, request)
    configs = response.results[0].configs
    return str(configs[0].value) if configs else None


async def _everywhere(channels: list[BrokerChannel], value: str) -> None:
    """Return once every broker describes ``retention.ms`` as ``value``."""
    deadline = time.monotonic() + _PROPAGATION_TIMEOUT_S
    pending = list(channels)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"retention.ms={value} did not reach every broker")
        pending = [c for c in pending if await _retention_on(c) != value]


def _cluster(base: Path, changes: int) -> tuple[list[float], list[float]]:
    answers: list[float] = []
    applied: list[float] = []
    with LocalCluster(base / "cluster", _BROKERS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap_servers})
        topic = NewTopic(_TOPIC, _BROKERS, _BROKERS)
        admin.create_topics([topic])[_TOPIC].result(_CLIENT_TIMEOUT_S)

        async def run() -> None:
            channels = [
                BrokerChannel(
                    BrokerEndpoint(b.broker_id, "127.0.0.1", b.port),
                    client_id="bench-configs",
                    timeout_ms=int(_CLIENT_TIMEOUT_S * 1000),
                )
                for b in cluster.brokers
            ]
            try:
                for n in range(changes):
                    value = _FIRST_RETENTION_MS + n
                    started = time.monotonic()
                    answers.append(await asyncio.to_thread(_alter, admin, value))
                    await _everywhere(channels, str(value))
                    applied.append(time.monotonic() - started)
            finally:
                for channel in channels:
                    await channel.close()

        asyncio.run(run())
    return answers, applied


def _row(what: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    return (
        f"| {what} | {statistics.median(ordered) * 1000:.1f} | {ordered[-1] * 1000:.1f} "
        f"| {len(ordered)} |"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench configs", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("--changes", type=int, default=40, help="alterations per setup")
    parser.add_argument("--log-parent", default=_TMPFS, help="where the brokers' logs go")
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Alter a topic's config ``--changes`` times in each setup and print the times."""
    args = _parser().parse_args(argv)
    parent = args.log_parent if Path(args.log_parent).is_dir() else None
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-configs-", dir=parent) as base:
        single = _single_node(Path(base), args.changes)
        answers, applied = _cluster(Path(base), args.changes)
    print(f"## Live config changes ({args.changes} changes of retention.ms per setup)\n")
    print("| setup: from the call to | p50 ms | max ms | samples |")
    print("|---|---:|---:|---:|")
    print(_row("one broker: the answer", single))
    print(_row(f"{_BROKERS} brokers: the answer", answers))
    print(_row(f"{_BROKERS} brokers: every broker applied it", applied))
    ratio = statistics.median(applied) / statistics.median(single)
    print(f"\ncluster, every broker / one broker (p50): {ratio:.1f}x")
    setups = {
        "one broker: answer": single,
        f"{_BROKERS} brokers: answer": answers,
        f"{_BROKERS} brokers: all applied": applied,
    }
    values = {
        statistic: {name: pick(samples) * 1000 for name, samples in setups.items()}
        for statistic, pick in (("p50", statistics.median), ("max", max))
    }
    save_png(
        args.png,
        "tickwheel bench configs",
        [Bars(title="live config change", unit="ms", values=values, log_scale=True)],
    )
    return 0
