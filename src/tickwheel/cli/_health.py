"""``tickwheel cluster health``: is every broker up, a controller known, every partition led
and fully replicated?

One Metadata request through confluent-kafka's AdminClient, so it checks any
Kafka-compatible cluster: the live brokers (at least ``--expect-brokers``, if given),
the controller (Metadata names one), offline partitions (no leader) and
under-replicated ones (fewer in-sync replicas than replicas), as Kafka's
``OfflinePartitionsCount`` and ``UnderReplicatedPartitions`` count them. Exit status 0
when healthy, 1 when not (or when no broker answers), 2 on a usage error.
"""

from __future__ import annotations

import argparse

from tickwheel.cli._client import TIMEOUT_S, CommandError, add_bootstrap_argument, admin_client, run
from tickwheel.cli._output import Row, add_format_argument, emit

_NO_CONTROLLER = -1
_NO_LEADER = -1


def parser() -> argparse.ArgumentParser:
    """``tickwheel cluster health`` and its options."""
    parser = argparse.ArgumentParser(
        prog="tickwheel cluster health",
        description="Check that every broker is up and every partition is led and in sync.",
    )
    add_bootstrap_argument(parser)
    parser.add_argument(
        "--expect-brokers", type=int, default=0, metavar="N", help="unhealthy below N brokers"
    )
    add_format_argument(parser)
    return parser


def _check(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    try:
        metadata = admin.list_topics(timeout=TIMEOUT_S)
    except Exception as exc:  # librdkafka raises KafkaException for no broker
        raise CommandError(f"no broker answered at {args.bootstrap_server}: {exc}") from exc
    offline: list[Row] = []
    under_replicated: list[Row] = []
    for name, topic in sorted(metadata.topics.items()):
        for index, partition in sorted(topic.partitions.items()):
            row = {
                "topic": name,
                "partition": index,
                "leader": partition.leader,
                "replicas": list(partition.replicas),
                "isr": list(partition.isrs),
            }
            if partition.leader == _NO_LEADER:
                offline.append(row)
            elif len(partition.isrs) < len(partition.replicas):
                under_replicated.append(row)
    brokers = sorted(metadata.brokers)
    problems = []
    if len(brokers) < args.expect_brokers:
        problems.append(f"{len(brokers)} of {args.expect_brokers} brokers are up")
    if metadata.controller_id == _NO_CONTROLLER:
        problems.append("no controller")
    if offline:
        problems.append(f"{len(offline)} offline partitions")
    if under_replicated:
        problems.append(f"{len(under_replicated)} under-replicated partitions")
    summary = {
        "healthy": not problems,
        "problems": problems,
        "brokers": brokers,
        "controller": metadata.controller_id,
        "offline_partitions": offline,
        "under_replicated_partitions": under_replicated,
    }
    status: Row = {
        "status": "healthy" if not problems else "UNHEALTHY: " + "; ".join(problems),
        "brokers": brokers,
        "controller": metadata.controller_id,
    }
    emit(
        summary,
        args.format,
        tables=[
            ("", [status]),
            ("offline partitions", offline),
            ("under-replicated partitions", under_replicated),
        ],
    )
    return 0 if not problems else 1


def main(argv: list[str]) -> int:
    """Check the cluster's health; returns the exit status."""
    args = parser().parse_args(argv)
    return run("tickwheel cluster health", _check, args)
