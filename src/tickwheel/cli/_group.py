"""``tickwheel group list|describe|delete|seek``: inspect, remove and rewind consumer groups.

The verbs of ``kafka-consumer-groups.sh`` and ``rpk group``, through confluent-kafka's
AdminClient: ListGroups, DescribeGroups, OffsetFetch and DeleteGroups requests, plus
ListOffsets (a Consumer's high watermark) for the lag ``describe`` shows. Lag is the
high watermark minus the committed offset, per partition; a partition with no commit
has no lag to show.

A group the coordinator does not know (never existed, or deleted) is reported as
Kafka's tool does, "does not exist", with exit status 1. Deleting a group that still
has members fails on the broker (NON_EMPTY_GROUP): stop its consumers first.

``seek`` is ``kafka-consumer-groups.sh --reset-offsets`` (``rpk group seek``): it moves
a group's committed offsets on one topic's partitions (all, or ``--partition``) to
``earliest``, ``latest``, an OFFSET, or a TIMESTAMP (ISO 8601, a time without a zone
being local time as in Kafka's ``--to-datetime``, or ``@MS`` since the epoch: the first
offset at or after it, the log end when there is none), through ListOffsets and an
AlterConsumerGroupOffsets (OffsetCommit) request. As in Kafka, an OFFSET outside the
partition's log is clamped to its start or end, and a group with active members is
refused (the members would overwrite the offsets at their next commit); a group
unknown to the coordinator is created empty. Unlike Kafka's tool, which only prints
the plan unless given ``--execute``, ``seek`` applies the plan (as ``rpk`` does) and
``--dry-run`` prints it without changing anything.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import dataclass

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from tickwheel.cli._client import (
    TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    admin_client,
    error_text,
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


_EARLIEST = "earliest"
_LATEST = "latest"
_MS_PER_S = 1000
# States in which a group has no members whose commits would undo a seek (Kafka's rule).
_SEEKABLE_STATES = frozenset({ConsumerGroupState.EMPTY.name, ConsumerGroupState.DEAD.name})


@dataclass(frozen=True, slots=True)
class SeekTarget:
    """Where ``seek --to`` moves offsets: exactly one of the fields is set."""

    spec: str | None = None
    """``earliest`` or ``latest``."""
    offset: int | None = None
    timestamp_ms: int | None = None


def seek_target(text: str) -> SeekTarget:
    """An argparse type: ``earliest``, ``latest``, an OFFSET, ``@MS`` or an ISO 8601 time."""
    if text in {_EARLIEST, _LATEST}:
        return SeekTarget(spec=text)
    if text.isdigit():
        return SeekTarget(offset=int(text))
    if text.startswith("@") and text[1:].isdigit():
        return SeekTarget(timestamp_ms=int(text[1:]))
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest, an offset, @MS or an ISO 8601 time, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's --to-datetime reads it
    return SeekTarget(timestamp_ms=round(moment.timestamp() * _MS_PER_S))


def _partitions(admin: AdminClient, args: argparse.Namespace) -> list[TopicPartition]:
    """The partitions ``seek`` moves: ``--partition`` ones, or all of ``--topic``.

    ``describe_topics`` (a Metadata request that never auto-creates) finds them.
    """
    described = admin.describe_topics(TopicCollection([args.topic]))[args.topic]
    try:
        known = {p.id for p in wait(admin, described).partitions}
    except CommandError as exc:
        raise CommandError(f"topic {args.topic!r}: {exc}") from exc
    chosen = sorted(set(args.partition)) if args.partition else sorted(known)
    missing = [index for index in chosen if index not in known]
    if missing:
        raise CommandError(f"topic {args.topic!r} has no partition {missing[0]}")
    return [TopicPartition(args.topic, index) for index in chosen]


def _listed(admin: AdminClient, specs: dict[TopicPartition, OffsetSpec]) -> dict[int, int]:
    """ListOffsets for ``specs``: the offset found, by partition (-1 when none is)."""
    futures = admin.list_offsets(specs, request_timeout=TIMEOUT_S)
    return {tp.partition: int(wait(admin, future).offset) for tp, future in futures.items()}


def _new_offsets(
    admin: AdminClient, partitions: list[TopicPartition], target: SeekTarget
) -> dict[int, int]:
    """Each partition's offset after the seek, by partition."""
    # confluent-kafka's OffsetSpec factories are untyped.
    earliest_spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    latest_spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    earliest = _listed(admin, dict.fromkeys(partitions, earliest_spec))
    latest = _listed(admin, dict.fromkeys(partitions, latest_spec))
    if target.spec == _EARLIEST:
        return earliest
    if target.spec == _LATEST:
        return latest
    if target.offset is not None:
        wanted = target.offset
        return {p: min(max(wanted, earliest[p]), latest[p]) for p in earliest}
    assert target.timestamp_ms is not None
    at = _listed(admin, {tp: OffsetSpec.for_timestamp(target.timestamp_ms) for tp in partitions})
    return {p: latest[p] if offset < 0 else offset for p, offset in at.items()}


def _seek(args: argparse.Namespace) -> int:
    admin = admin_client(args.bootstrap_server)
    group = wait(admin, admin.describe_consumer_groups([args.name])[args.name])
    state = _state_name(group.state)
    if state not in _SEEKABLE_STATES or group.members:
        raise CommandError(
            f"group {args.name!r} has active members (state {state}): stop its consumers first"
        )
    partitions = _partitions(admin, args)
    request = ConsumerGroupTopicPartitions(args.name, partitions)
    committed = wait(admin, admin.list_consumer_group_offsets([request])[args.name])
    current = {tp.partition: tp.offset for tp in committed.topic_partitions or []}
    new = _new_offsets(admin, partitions, args.to)
    rows: list[Row] = [
        {
            "topic": args.topic,
            "partition": p,
            "current_offset": current[p] if current.get(p, -1) >= 0 else None,
            "new_offset": new[p],
        }
        for p in sorted(new)
    ]
    if not args.dry_run:
        moved = [TopicPartition(args.topic, p, offset) for p, offset in sorted(new.items())]
        request = ConsumerGroupTopicPartitions(args.name, moved)
        result = wait(admin, admin.alter_consumer_group_offsets([request])[args.name])
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise CommandError(
                f"{failed[0].topic}/{failed[0].partition}: {error_text(failed[0].error)}"
            )
    emit(
        {"group": args.name, "dry_run": args.dry_run, "offsets": rows},
        args.format,
        tables=[("DRY RUN: NOTHING CHANGED" if args.dry_run else "", rows)],
    )
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

    seek = verbs.add_parser(
        "seek",
        help="move a group's committed offsets on a topic (Kafka's --reset-offsets)",
        description="Move the committed offsets of a group with no active members.",
    )
    seek.add_argument("name")
    seek.add_argument("--topic", required=True, help="the topic whose offsets move")
    seek.add_argument(
        "--partition",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="only this partition (repeatable; default: every partition of the topic)",
    )
    seek.add_argument(
        "--to",
        required=True,
        type=seek_target,
        metavar="earliest|latest|OFFSET|TIMESTAMP",
        help="TIMESTAMP: ISO 8601 (2026-11-25T10:00:00Z; no zone is local time) or @MS",
    )
    seek.add_argument(
        "--dry-run", action="store_true", help="print the new offsets without committing them"
    )
    add_format_argument(seek)
    seek.set_defaults(command=_seek)

    for sub in (listing, describe, delete, seek):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``group`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel group {args.verb}", args.command, args)
