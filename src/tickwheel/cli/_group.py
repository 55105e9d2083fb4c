"""``tickwheel group list|describe|delete``: inspect and remove consumer groups.

The verbs of ``kafka-consumer-groups.sh`` and ``rpk group``, through confluent-kafka's
AdminClient: ListGroups, DescribeGroups, OffsetFetch and DeleteGroups requests, plus
ListOffsets (a Consumer's high watermark) for the lag ``describe`` shows. Lag is the
high watermark minus the committed offset, per partition; a partition with no commit
has no lag to show.

A group the coordinator does not know (never existed, or deleted) is reported as
Kafka's tool does, "does not exist", with exit status 1. Deleting a group that still
has members fails on the broker (NON_EMPTY_GROUP): stop its consumers first.
"""

from __future__ import annotations

import argparse

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from tickwheel.cli._client import (
    CommandError,
    add_bootstrap_argument,
    admin_client,
    offsets_consumer,
    run,
    wait,
    watermarks,
)
from tickwheel.cli._output import Row, add_format_argument, emit


def _state_name(state: ConsumerGroupState | None) -> str:
    return "UNKNOWN" if state is None else state.name


def _list(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    result = wait(admin, admin.list_consumer_groups())
    rows: list[Row] = [
        {"group": listing.group_id, "state": _state_name(listing.state)}
        for listing in sorted(result.valid, key=lambda listing: listing.group_id)
    ]
    emit(rows, args.format, tables=[("", rows)])
    return 0


def _offsets(admin: AdminClient, args: argparse.Namespace) -> list[Row]:
    """Committed offset, high watermark and lag of each partition the group committed."""
    request = ConsumerGroupTopicPartitions(args.name)
    committed = wait(admin, admin.list_consumer_group_offsets([request])[args.name])
    consumer = offsets_consumer(args.bootstrap_server)
    rows: list[Row] = []
    try:
        for tp in sorted(committed.topic_partitions or [], key=lambda p: (p.topic, p.partition)):
            if tp.offset < 0:
                continue
            _, high = watermarks(consumer, tp.topic, tp.partition)
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed_offset": tp.offset,
                    "high_offset": high,
                    "lag": max(high - tp.offset, 0),
                }
            )
    finally:
        consumer.close()
    return rows


def _describe(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    group = wait(admin, admin.describe_consumer_groups([args.name])[args.name])
    offsets = _offsets(admin, args)
    state = _state_name(group.state)
    if state == ConsumerGroupState.DEAD.name and not group.members and not offsets:
        raise CommandError(f"group {args.name!r} does not exist")
    members: list[Row] = [
        {
            "member_id": member.member_id,
            "client_id": member.client_id,
            "host": member.host,
            "assignment": [
                f"{tp.topic}/{tp.partition}"
                for tp in (member.assignment.topic_partitions if member.assignment else [])
            ],
        }
        for member in sorted(group.members, key=lambda member: member.member_id)
    ]
    summary: list[Row] = [
        {
            "group": group.group_id,
            "state": state,
            "assignor": group.partition_assignor or None,
            "members": len(members),
            "total_lag": sum(lag for row in offsets if isinstance(lag := row["lag"], int)),
        }
    ]
    data = {**summary[0], "member_details": members, "offsets": offsets}
    emit(
        data,
        args.format,
        tables=[("SUMMARY", summary), ("MEMBERS", members), ("OFFSETS", offsets)],
    )
    return 0


def _delete(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    wait(admin, admin.delete_consumer_groups([args.name])[args.name])
    print(f"deleted group {args.name}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel group`` parser, one subcommand per verb."""
    top = argparse.ArgumentParser(prog="tickwheel group", description="Manage consumer groups.")
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    listing = verbs.add_parser("list", help="list consumer groups and their states")
    add_format_argument(listing)
    listing.set_defaults(command=_list)

    describe = verbs.add_parser(
        "describe", help="show state, members, assignment, committed offsets and lag"
    )
    describe.add_argument("name")
    add_format_argument(describe)
    describe.set_defaults(command=_describe)

    delete = verbs.add_parser("delete", help="delete a group that has no members")
    delete.add_argument("name")
    delete.set_defaults(command=_delete)

    for sub in (listing, describe, delete):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``group`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel group {args.verb}", args.command, args)
