"""``tickwheel produce TOPIC``: send one record per line of stdin.

As ``kcat -P`` and ``rpk topic produce``: each line (without its line ending) is a
record's value; with ``--key-separator SEP`` the text before the first SEP is its key
(a line without SEP has no key). ``--header K=V`` adds a header to every record,
``--partition N`` sends every record to one partition (otherwise the client's
partitioner chooses, by key), and ``--acks`` is the producer's ``acks``.

Every record is acknowledged (or failed) before the command returns: exit status 0
when all were written, 1 with the first error on stderr when any was not. A wait for
the acknowledgements that passes a second shows the admin verbs' spinner on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from confluent_kafka import KafkaError, Message, Producer

from tickwheel.cli._client import (
    TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    at_least,
    client_config,
    error_text,
    key_value,
    run,
)
from tickwheel.cli._progress import progress

ACKS = ("0", "1", "all", "-1")


def produce_lines(args: argparse.Namespace, lines: TextIO) -> int:
    """Send each of ``lines`` as a record; returns how many were acknowledged."""
    producer = Producer(client_config(args.bootstrap_server, {"acks": args.acks}))
    errors: list[KafkaError] = []
    acknowledged = 0

    def delivered(error: KafkaError | None, _message: Message) -> None:
        nonlocal acknowledged
        if error is None:
            acknowledged += 1
        else:
            errors.append(error)

    for line in lines:
        value = line.rstrip("\r\n")
        key: str | None = None
        if args.key_separator:
            before, sep, after = value.partition(args.key_separator)
            if sep:
                key, value = before, after
        extra = {} if args.partition is None else {"partition": args.partition}
        producer.produce(
            args.topic,
            value=value.encode(),
            key=None if key is None else key.encode(),
            headers=[(name, text.encode()) for name, text in args.header],
            on_delivery=delivered,
            **extra,
        )
        producer.poll(0)
    with progress("waiting for acknowledgements"):
        remaining = producer.flush(TIMEOUT_S)
    if errors:
        raise CommandError(error_text(errors[0]))
    if remaining:
        raise CommandError(f"{remaining} records not acknowledged within {TIMEOUT_S:g} s")
    return acknowledged


def _produce(args: argparse.Namespace) -> int:
    produce_lines(args, sys.stdin)
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel produce`` parser."""
    parser = argparse.ArgumentParser(
        prog="tickwheel produce", description="Send one record per line of stdin to TOPIC."
    )
    parser.add_argument("topic")
    parser.add_argument(
        "-k", "--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE"
    )
    parser.add_argument(
        "-H",
        "--header",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    parser.add_argument(
        "-p", "--partition", type=at_least(0), help="the partition (default: by key)"
    )
    parser.add_argument(
        "--acks", choices=ACKS, default="all", help="acknowledgements to wait for (default all)"
    )
    add_bootstrap_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Produce stdin to a topic; returns the exit status."""
    return run("tickwheel produce", _produce, parser().parse_args(argv))
