"""``tickwheel reassign list|execute|cancel``: move partitions' replicas between brokers.

The verbs of ``kafka-reassign-partitions.sh``, over ``_wire``'s raw connection (of the
Python clients only kafka-python's admin client speaks these APIs):

- ``list``: ListPartitionReassignments: every partition being moved, its full replica
  set and the replicas being added and removed.
- ``execute --reassignment-json-file FILE``: AlterPartitionReassignments with each
  partition's target replicas, from a plan in the tool's format::

      {"version": 1, "partitions": [{"topic": "orders", "partition": 0,
                                     "replicas": [2, 1], "log_dirs": ["any", "any"]}]}

  (``log_dirs`` may be left out; anything but ``any`` is refused: a replica's log
  directory on its new broker is that broker's choice).
- ``cancel --reassignment-json-file FILE``: AlterPartitionReassignments with null
  replicas for each partition of the plan: each goes back to its original replicas.

Both go to the controller (the broker the bootstrap broker's Metadata names), as Kafka's
admin client sends them. A partition the controller refuses is one line naming it and
Kafka's error, exit status 1; a plan that is not what the format says is one line
naming the field.

Concurrency: one thread; each command opens its connections and closes them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kio.schema.errors import ErrorCode

from tickwheel.cli._client import CommandError, add_bootstrap_argument, run
from tickwheel.cli._output import Row, add_format_argument, emit
from tickwheel.cli._wire import Api, Connection, connect_bootstrap
from tickwheel.protocol import ApiKey, VersionRange

METADATA: Final = Api(ApiKey.METADATA, "Metadata", VersionRange(1, 12))
ALTER: Final = Api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", VersionRange(0, 1)
)
LIST: Final = Api(
    ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", VersionRange(0, 0)
)
_REQUEST_TIMEOUT_MS = 30_000
_NO_CONTROLLER = -1
_ANY_LOG_DIR = "any"


@dataclass(frozen=True, slots=True)
class _Move:
    """One partition of a plan and its target replicas."""

    topic: str
    partition: int
    replicas: tuple[int, ...]


def _field(entry: dict[str, Any], name: str, kind: type, index: int) -> Any:
    value = entry.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CommandError(
            f"--reassignment-json-file: partitions[{index}].{name} must be a {kind.__name__}"
        )
    return value


def read_plan(path: Path) -> list[_Move]:
    """The moves of a kafka-reassign-partitions plan; CommandError naming what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"--reassignment-json-file: cannot read {path}: {exc.strerror}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"--reassignment-json-file: {path} is not JSON: {exc}") from exc
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CommandError("--reassignment-json-file: needs a non-empty 'partitions' list")
    moves = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise CommandError(f"--reassignment-json-file: partitions[{index}] is not an object")
        replicas = _field(entry, "replicas", list, index)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise CommandError(
                f"--reassignment-json-file: partitions[{index}].replicas must be broker ids"
            )
        log_dirs = entry.get("log_dirs", [])
        if not isinstance(log_dirs, list) or any(d != _ANY_LOG_DIR for d in log_dirs):
            raise CommandError(
                f"--reassignment-json-file: partitions[{index}].log_dirs: only "
                f"{_ANY_LOG_DIR!r} is supported"
            )
        moves.append(
            _Move(
                _field(entry, "topic", str, index),
                _field(entry, "partition", int, index),
                tuple(replicas),
            )
        )
    return moves


def _controller(bootstrap: str) -> Connection:
    """A connection to the controller the bootstrap broker names."""
    with connect_bootstrap(bootstrap) as connection:
        metadata = connection.request(
            METADATA,
            {
                "topics": [],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    controller_id = int(metadata.controller_id)
    brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in metadata.brokers}
    if controller_id == _NO_CONTROLLER or controller_id not in brokers:
        raise CommandError(f"the broker at {bootstrap} knows no live controller")
    return Connection(*brokers[controller_id])


def _list(args: argparse.Namespace) -> int:
    with _controller(args.bootstrap_server) as connection:
        answer = connection.request(LIST, {"timeout": _REQUEST_TIMEOUT_MS, "topics": None})
    if answer.error_code != ErrorCode.none:
        raise CommandError(
            f"ListPartitionReassignments: {ErrorCode(answer.error_code).name.upper()}"
        )
    rows: list[Row] = [
        {
            "topic": str(topic.name),
            "partition": int(p.partition_index),
            "replicas": [int(r) for r in p.replicas],
            "adding": [int(r) for r in p.adding_replicas],
            "removing": [int(r) for r in p.removing_replicas],
        }
        for topic in answer.topics
        for p in topic.partitions
    ]
    emit(rows, args.format, tables=[("", rows)])
    return 0


def _alter(args: argparse.Namespace) -> int:
    moves = read_plan(args.reassignment_json_file)
    cancel = args.verb == "cancel"
    topics: dict[str, list[dict[str, Any]]] = {}
    for move in moves:
        topics.setdefault(move.topic, []).append(
            {
                "partition_index": move.partition,
                "replicas": None if cancel else list(move.replicas),
            }
        )
    with _controller(args.bootstrap_server) as connection:
        answer = connection.request(
            ALTER,
            {
                "timeout": _REQUEST_TIMEOUT_MS,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            },
        )
    if answer.error_code != ErrorCode.none:
        name = ErrorCode(answer.error_code).name.upper()
        raise CommandError(f"{name}: {answer.error_message}" if answer.error_message else name)
    failed = [
        f"{topic.name}-{p.partition_index}: {ErrorCode(p.error_code).name.upper()}"
        + (f" ({p.error_message})" if p.error_message else "")
        for topic in answer.responses
        for p in topic.partitions
        if p.error_code != ErrorCode.none
    ]
    if failed:
        raise CommandError("; ".join(failed))
    done = ",".join(f"{m.topic}-{m.partition}" for m in moves)
    if cancel:
        print(f"Successfully cancelled partition reassignments for: {done}")
    else:
        print(f"Successfully started partition reassignments for {done}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel reassign`` parser, one subcommand per verb."""
    top = argparse.ArgumentParser(
        prog="tickwheel reassign",
        description="List, start or cancel the moves of partitions' replicas.",
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = verbs.add_parser(
        "list",
        help="show the partitions being moved",
        description="List the reassignments in progress, as the controller knows them.",
    )
    add_format_argument(listing)
    listing.set_defaults(command=_list)
    execute = verbs.add_parser(
        "execute",
        help="move partitions as a kafka-reassign-partitions plan says",
        description="Start the reassignment of every partition of the plan.",
    )
    cancel = verbs.add_parser(
        "cancel",
        help="cancel the moves of a plan's partitions",
        description="Cancel the reassignment of every partition of the plan.",
    )
    for sub in (execute, cancel):
        sub.add_argument(
            "--reassignment-json-file",
            type=Path,
            required=True,
            metavar="FILE",
            help='the plan: {"version": 1, "partitions": [{"topic", "partition", "replicas"}]}',
        )
        sub.set_defaults(command=_alter)
    for sub in (listing, execute, cancel):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``reassign`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel reassign {args.verb}", args.command, args)
