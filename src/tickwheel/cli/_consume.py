"""``tickwheel consume TOPIC``: print a topic's records, as ``kcat -C`` does.

Without ``--group`` the command reads every partition of the topic by assignment (it
joins no group and commits nothing), from the end, or from the start with
``--from-beginning``. With ``--group G`` it subscribes as a member of G, starts at
G's committed offsets (``--from-beginning`` then applies only where G has none, as
Kafka's ``auto.offset.reset``), and commits what it printed before it exits.

Each record is printed with ``--format``, kcat's ``-f`` placeholders: ``%t`` topic,
``%p`` partition, ``%o`` offset, ``%k`` key, ``%s`` value, ``%T`` timestamp (ms since
the epoch), ``%h`` headers (``k=v`` joined by commas), ``%K``/``%S`` key/value length
in bytes, ``%%`` a percent sign; ``\\n``, ``\\t``, ``\\r`` and ``\\\\`` are escapes. As in
kcat, the format is printed as given: end it with ``\\n`` for one line per record.
A missing key prints as nothing. The default is ``%s\\n``, the value alone.

The command stops with exit status 0 after ``--num N`` records, or with
``--exit-at-end`` once every partition it reads has been read to its end (librdkafka's
partition EOF); otherwise it runs until interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Message,
    TopicCollection,
    TopicPartition,
)

from tickwheel.cli._client import (
    CommandError,
    add_bootstrap_argument,
    admin_client,
    at_least,
    client_config,
    error_text,
    run,
    wait,
)

DEFAULT_FORMAT = "%s\\n"
POLL_S = 0.5
"""How long one poll waits for a record before the loop checks its exit conditions."""

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}

Piece = Callable[[Message], str]


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _size(data: bytes | str | None) -> str:
    return "0" if data is None else str(len(data))


def _headers(message: Message) -> str:
    headers = message.headers() or []
    pairs = headers.items() if isinstance(headers, dict) else headers
    return ",".join(f"{name}={_text(value)}" for name, value in pairs)


_PLACEHOLDERS: dict[str, Piece] = {
    "t": lambda m: str(m.topic()),
    "p": lambda m: str(m.partition()),
    "o": lambda m: str(m.offset()),
    "k": lambda m: _text(m.key()),
    "s": lambda m: _text(m.value()),
    "T": lambda m: str(m.timestamp()[1]),
    "h": _headers,
    "K": lambda m: _size(m.key()),
    "S": lambda m: _size(m.value()),
}


def _literal(text: str) -> Piece:
    return lambda _message: text


def parse_format(spec: str) -> list[Piece]:
    """Compile a kcat-style format into pieces; an unknown ``%x`` or ``\\x`` is an error."""
    pieces: list[Piece] = []
    literal: list[str] = []
    index = 0
    while index < len(spec):
        char = spec[index]
        following = spec[index + 1] if index + 1 < len(spec) else ""
        if char == "%" and following in _PLACEHOLDERS:
            if literal:
                pieces.append(_literal("".join(literal)))
                literal = []
            pieces.append(_PLACEHOLDERS[following])
        elif char == "%" and following == "%":
            literal.append("%")
        elif char == "\\" and following in _ESCAPES:
            literal.append(_ESCAPES[following])
        elif char in "%\\":
            known = " ".join(f"%{name}" for name in _PLACEHOLDERS)
            raise argparse.ArgumentTypeError(
                f"unknown {char}{following} in {spec!r}; placeholders: {known} %%"
            )
        else:
            literal.append(char)
            index += 1
            continue
        index += 2
    if literal:
        pieces.append(_literal("".join(literal)))
    return pieces


def _render(pieces: list[Piece], message: Message) -> str:
    return "".join(piece(message) for piece in pieces)


def _consumer(args: argparse.Namespace) -> Consumer:
    """A consumer of ``args.topic``: a group member with ``--group``, else by assignment."""
    settings = client_config(args.bootstrap_server, {"enable.partition.eof": True})
    if args.group is not None:
        settings |= {
            "group.id": args.group,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            "enable.auto.commit": False,
        }
        consumer = Consumer(settings)
        consumer.subscribe([args.topic])
        return consumer
    admin = admin_client(args.bootstrap_server)
    topic = wait(admin, admin.describe_topics(TopicCollection([args.topic]))[args.topic])
    # librdkafka requires a group.id even for a consumer that never joins the group.
    consumer = Consumer(settings | {"group.id": "tickwheel-cli", "enable.auto.commit": False})
    start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    consumer.assign([TopicPartition(args.topic, p.id, start) for p in topic.partitions])
    return consumer


def consume(args: argparse.Namespace, out: TextIO) -> int:
    """Print records of ``args.topic`` to ``out`` until an exit condition; returns the count."""
    consumer = _consumer(args)
    printed = 0
    at_end: set[tuple[str, int]] = set()
    try:
        while args.num is None or printed < args.num:
            message = consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add((str(message.topic()), int(message.partition() or 0)))
                assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                if args.exit_at_end and assigned and assigned <= at_end:
                    break
                continue
            if error is not None:
                if error.retriable():
                    continue
                raise CommandError(error_text(error))
            at_end.discard((str(message.topic()), int(message.partition() or 0)))
            out.write(_render(args.format, message))
            out.flush()
            printed += 1
        if args.group is not None and printed:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return printed


def _consume(args: argparse.Namespace) -> int:
    try:
        consume(args, sys.stdout)
    except KeyboardInterrupt:
        return 130  # interrupted, as a shell reports SIGINT
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel consume`` parser."""
    parser = argparse.ArgumentParser(
        prog="tickwheel consume", description="Print records of TOPIC (kcat -C)."
    )
    parser.add_argument("topic")
    parser.add_argument(
        "--from-beginning", action="store_true", help="start at the oldest record, not the end"
    )
    parser.add_argument("-n", "--num", type=at_least(0), metavar="N", help="exit after N records")
    parser.add_argument("-g", "--group", metavar="G", help="consume and commit as group G")
    parser.add_argument(
        "-e", "--exit-at-end", action="store_true", help="exit at the end of every partition"
    )
    parser.add_argument(
        "-f",
        "--format",
        type=parse_format,
        default=parse_format(DEFAULT_FORMAT),
        metavar="FMT",
        help="kcat placeholders %%t %%p %%o %%k %%s %%T %%h %%K %%S (default: %%s\\n)",
    )
    add_bootstrap_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Consume a topic; returns the exit status."""
    return run("tickwheel consume", _consume, parser().parse_args(argv))
