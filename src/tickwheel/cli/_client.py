"""Reaching a broker from the admin verbs: ``-b/--bootstrap-server``, clients, errors.

Every verb here speaks the Kafka protocol through confluent-kafka (librdkafka's
AdminClient, Producer and Consumer), never tickwheel's internals, so it works the same
against any Kafka-compatible broker.

Errors: what the broker or the client reports (a topic that exists, an unknown topic,
no answer in time) becomes a ``CommandError`` with one line of text; ``run`` prints it
on stderr after the command's name and returns exit status 1. librdkafka's own log
lines are switched off (``log_level`` 0), so the user sees only that line.

Pitfall: an AdminClient resolves its futures on its own background thread, and when the
client is garbage-collected before they resolve, librdkafka destroys them (the future
fails with ``_DESTROY``). ``wait`` therefore takes the client along with the future and
holds it until the result is in; never write ``AdminClient(...).create_topics(...)``.

Progress: ``wait`` and ``watermarks`` wait under ``progress`` (``_progress``), so any
admin verb shows a spinner on stderr once a wait passes a second; ``--progress`` and
``--no-progress`` come with ``-b`` and ``run`` applies them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tickwheel.cli._progress import configure, progress

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 10.0
"""How long a command waits for one answer from the broker before giving up."""

_WAITING = "waiting for the broker"
_QUIET = 0
"""librdkafka's ``log_level`` for the CLI's clients: its log lines off, errors via results."""

T = TypeVar("T")
Settings = dict[str, str | int | float | bool]
"""librdkafka configuration, as the confluent-kafka clients take it."""


class CommandError(Exception):
    """A command failed for a reason worth one line on stderr (exit status 1)."""


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: ``NAME=VALUE`` as a pair (a config, a header)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text!r}")
        return number

    return parse


def add_bootstrap_argument(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the options every admin verb shares: ``-b/--bootstrap-server
    HOST:PORT`` and ``--progress/--no-progress``."""
    parser.add_argument(
        "-b",
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"a broker to connect to (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a spinner on stderr while a wait passes a second (default: on a terminal)",
    )


def client_config(bootstrap: str, settings: Settings | None = None) -> Settings:
    """librdkafka settings for a CLI client of ``bootstrap`` plus ``settings``."""
    return {"bootstrap.servers": bootstrap, "log_level": _QUIET, **(settings or {})}


def admin_client(bootstrap: str) -> AdminClient:
    """An AdminClient of ``bootstrap`` (keep it referenced until its futures resolve)."""
    return AdminClient(client_config(bootstrap))


def offsets_consumer(bootstrap: str) -> Consumer:
    """A Consumer that only reads watermarks: it never subscribes or commits.

    librdkafka requires a ``group.id`` for every Consumer; this one never joins it.
    """
    return Consumer(
        client_config(bootstrap, {"group.id": "tickwheel-cli", "enable.auto.commit": False})
    )


def error_text(error: KafkaError | KafkaException | BaseException) -> str:
    """One line for ``error``: librdkafka's description of a KafkaError if it has one."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return str(error.str())
    return str(error) or type(error).__name__


def wait(admin: AdminClient, future: concurrent.futures.Future[T]) -> T:
    """The result of one of ``admin``'s futures, holding ``admin`` alive until then."""
    try:
        with progress(_WAITING):
            return future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise CommandError(error_text(exc)) from exc
    except concurrent.futures.TimeoutError as exc:
        raise CommandError(f"no answer from the broker within {TIMEOUT_S:g} s") from exc
    finally:
        del admin  # referenced until here on purpose: see the module docstring


def watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """The low and high watermark offsets of one partition."""
    try:
        with progress(_WAITING):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT_S
            )
    except KafkaException as exc:
        raise CommandError(error_text(exc)) from exc
    return int(low), int(high)


def run(prog: str, command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run ``command``; a ``CommandError`` or client error prints one line and returns 1.

    ``--progress`` / ``--no-progress``, where the verb has them, apply to its waits.
    """
    configure(getattr(args, "progress", None))
    try:
        return command(args)
    except (CommandError, KafkaException) as exc:
        print(f"{prog}: {error_text(exc)}", file=sys.stderr)
        return 1
