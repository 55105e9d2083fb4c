"""``tickwheel topic create|list|describe|delete|add-partitions|alter-config``: manage topics.

The verbs of ``kafka-topics.sh``, ``kafka-configs.sh`` and ``rpk topic``, through
confluent-kafka's AdminClient: CreateTopics, Metadata, DescribeConfigs, DeleteTopics,
CreatePartitions and IncrementalAlterConfigs requests, plus ListOffsets (a Consumer's
watermarks) for the offsets ``describe`` shows. ``alter-config`` changes the named
configs only (``--set``, ``--delete``, ``--append``/``--subtract`` for list configs
such as ``cleanup.policy``) and then shows each named config as the broker now
describes it; ``--validate-only`` asks the broker to check the change and apply nothing.

``describe`` asks for the topic with ``describe_topics``, whose
Metadata request does not let the broker auto-create it; ``list_topics(topic=...)``
would create a mistyped topic on a broker with ``auto.create.topics.enable``.

Unset ``--partitions`` and ``--replication-factor`` send -1: the broker's
``num.partitions`` and ``default.replication.factor`` apply.
"""

from __future__ import annotations

import argparse

from confluent_kafka import TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tickwheel.cli._client import (
    TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    admin_client,
    at_least,
    key_value,
    offsets_consumer,
    run,
    wait,
    watermarks,
)
from tickwheel.cli._output import Row, add_format_argument, emit

USE_BROKER_DEFAULT = -1
"""CreateTopics' "the broker decides" for a partition count or replication factor."""


def _source_name(source: ConfigSource | int) -> str:
    """``DEFAULT_CONFIG``, ``DYNAMIC_TOPIC_CONFIG``...: confluent-kafka hands an int here."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _create(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    topic = NewTopic(
        args.name,
        num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        config=dict(args.config),
    )
    wait(admin, admin.create_topics([topic], request_timeout=TIMEOUT_S)[args.name])
    print(f"created topic {args.name}")
    return 0


def _list(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    rows: list[Row] = [
        {"name": name, "partitions": len(topic.partitions)}
        for name, topic in sorted(metadata.topics.items())
        if not name.startswith("__") or args.internal
    ]
    emit(rows, args.format, tables=[("", rows)])
    return 0


def _describe(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    description = wait(admin, admin.describe_topics(TopicCollection([args.name]))[args.name])
    resource = ConfigResource(ResourceType.TOPIC, args.name)
    entries = wait(admin, admin.describe_configs([resource])[resource])
    consumer = offsets_consumer(args.bootstrap_server)
    try:
        partitions: list[Row] = []
        for partition in sorted(description.partitions, key=lambda p: p.id):
            low, high = watermarks(consumer, args.name, partition.id)
            partitions.append(
                {
                    "partition": partition.id,
                    "leader": None if partition.leader is None else partition.leader.id,
                    "replicas": [node.id for node in partition.replicas],
                    "isr": [node.id for node in partition.isr],
                    "low_offset": low,
                    "high_offset": high,
                }
            )
    finally:
        consumer.close()
    configs: list[Row] = [
        {"name": name, "value": entry.value, "source": _source_name(entry.source)}
        for name, entry in sorted(entries.items())
    ]
    summary: list[Row] = [
        {"name": args.name, "partitions": len(partitions), "internal": description.is_internal}
    ]
    data = {**summary[0], "partition_details": partitions, "configs": configs}
    emit(
        data,
        args.format,
        tables=[("SUMMARY", summary), ("PARTITIONS", partitions), ("CONFIGS", configs)],
    )
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    wait(admin, admin.delete_topics([args.name], request_timeout=TIMEOUT_S)[args.name])
    print(f"deleted topic {args.name}")
    return 0


def _add_partitions(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    request = NewPartitions(args.name, args.partitions)
    wait(admin, admin.create_partitions([request], request_timeout=TIMEOUT_S)[args.name])
    print(f"topic {args.name} now has {args.partitions} partitions")
    return 0


def _alter_config(args: argparse.Namespace) -> int:
    changes = [
        *((name, AlterConfigOpType.SET, value) for name, value in args.set),
        *((name, AlterConfigOpType.DELETE, None) for name in args.delete),
        *((name, AlterConfigOpType.APPEND, value) for name, value in args.append),
        *((name, AlterConfigOpType.SUBTRACT, value) for name, value in args.subtract),
    ]
    if not changes:
        raise CommandError("nothing to change: give --set, --delete, --append or --subtract")
    admin = admin_client(args.bootstrap_server)
    resource = ConfigResource(
        ResourceType.TOPIC,
        args.name,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op) for name, op, value in changes
        ],
    )
    futures = admin.incremental_alter_configs(
        [resource], validate_only=args.validate_only, request_timeout=TIMEOUT_S
    )
    wait(admin, futures[resource])
    described = ConfigResource(ResourceType.TOPIC, args.name)
    entries = wait(admin, admin.describe_configs([described])[described])
    names = list(dict.fromkeys(name for name, _, _ in changes))
    configs: list[Row] = [
        {
            "name": name,
            "value": entries[name].value if name in entries else None,
            "source": _source_name(entries[name].source) if name in entries else None,
        }
        for name in names
    ]
    data = {"name": args.name, "validate_only": args.validate_only, "configs": configs}
    if args.format == "table":
        verb = "validated (nothing applied)" if args.validate_only else "altered"
        print(f"{verb} configs of topic {args.name}")
    emit(data, args.format, tables=[("", configs)])
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel topic`` parser, one subcommand per verb."""
    top = argparse.ArgumentParser(prog="tickwheel topic", description="Manage topics.")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    create = verbs.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument(
        "-p",
        "--partitions",
        type=at_least(1),
        default=USE_BROKER_DEFAULT,
        help="partition count (default: the broker's num.partitions)",
    )
    create.add_argument(
        "-r",
        "--replication-factor",
        type=at_least(1),
        default=USE_BROKER_DEFAULT,
        help="replicas per partition (default: the broker's default.replication.factor)",
    )
    create.add_argument(
        "-c",
        "--config",
        type=key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config (repeatable)",
    )
    create.set_defaults(command=_create)

    listing = verbs.add_parser("list", help="list topics")
    listing.add_argument(
        "-i", "--internal", action="store_true", help="include internal topics (__*)"
    )
    add_format_argument(listing)
    listing.set_defaults(command=_list)

    describe = verbs.add_parser(
        "describe", help="show partitions (leader, replicas, ISR, offsets) and configs"
    )
    describe.add_argument("name")
    add_format_argument(describe)
    describe.set_defaults(command=_describe)

    delete = verbs.add_parser("delete", help="delete a topic")
    delete.add_argument("name")
    delete.set_defaults(command=_delete)

    add_partitions = verbs.add_parser(
        "add-partitions", help="raise a topic's partition count to --partitions"
    )
    add_partitions.add_argument("name")
    add_partitions.add_argument(
        "-p", "--partitions", type=at_least(1), required=True, help="the new total count"
    )
    add_partitions.set_defaults(command=_add_partitions)

    alter = verbs.add_parser(
        "alter-config", help="change topic configs while the topic runs (IncrementalAlterConfigs)"
    )
    alter.add_argument("name")
    alter.add_argument(
        "--set",
        type=key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a config (repeatable)",
    )
    alter.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="NAME",
        help="remove an override: the broker default applies again (repeatable)",
    )
    alter.add_argument(
        "--append",
        type=key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="add an item to a list config such as cleanup.policy (repeatable)",
    )
    alter.add_argument(
        "--subtract",
        type=key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="remove an item from a list config (repeatable)",
    )
    alter.add_argument(
        "--validate-only", action="store_true", help="let the broker check it; apply nothing"
    )
    add_format_argument(alter)
    alter.set_defaults(command=_alter_config)

    for sub in (create, listing, describe, delete, add_partitions, alter):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``topic`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel topic {args.verb}", args.command, args)
