"""``tickwheel transaction list|describe|describe-producers``: look into transactions.

The verbs of ``kafka-transactions.sh``. No Python client has admin calls for these
requests, so they go over ``_wire``'s raw connections, as Kafka's admin client sends
them:

- ``list``: ListTransactions to every broker in the Metadata answer, since each
  broker lists only the transactional ids whose coordinator it hosts; ``--state`` and
  ``--producer-id`` are the request's filters (the broker applies them), repeatable,
  and ``--duration-filter`` too, which only v1 carries (a broker older than Kafka 3.8
  is told apart by its ApiVersions answer, not sent a filter it would ignore).
- ``describe ID``: FindCoordinator v4 (key type 1, transaction) for the id, then
  DescribeTransactions v0 to that coordinator. A start time of -1 (no transaction
  since the id's producer started) shows as none, and so does its duration.
- ``describe-producers TOPIC --partition N``: Metadata for the topic (never
  auto-creating it) to find the partition's leader, then DescribeProducers v0 to it:
  each producer with an idempotent or transactional batch in the partition's log, and
  the first offset of its open transaction, if any.

Errors in an answer are shown with Kafka's error names (``TRANSACTIONAL_ID_NOT_FOUND``),
one line, exit status 1. A retriable one (a coordinator loading its partition, a
leader that moved) is retried as Kafka's admin client does, every
``RETRY_BACKOFF_S`` from a fresh lookup, until ``TIMEOUT_S`` has passed.

Concurrency: one thread; each command opens its connections and closes them.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from tickwheel.cli._client import (
    TIMEOUT_S,
    CommandError,
    add_bootstrap_argument,
    at_least,
    run,
)
from tickwheel.cli._output import Row, add_format_argument, emit
from tickwheel.cli._wire import Api, Connection, connect_bootstrap
from tickwheel.protocol import ApiKey, CoordinatorType, VersionRange

T = TypeVar("T")

METADATA = Api(ApiKey.METADATA, "Metadata", VersionRange(4, 12))
FIND_COORDINATOR = Api(ApiKey.FIND_COORDINATOR, "FindCoordinator", VersionRange(4, 4))
DESCRIBE_PRODUCERS = Api(ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", VersionRange(0, 0))
DESCRIBE_TRANSACTIONS = Api(
    ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", VersionRange(0, 0)
)
LIST_TRANSACTIONS = Api(ApiKey.LIST_TRANSACTIONS, "ListTransactions", VersionRange(0, 1))
LIST_TRANSACTIONS_BY_DURATION = Api(
    ApiKey.LIST_TRANSACTIONS, "ListTransactions", VersionRange(1, 1)
)
"""With ``--duration-filter``: v1 (KIP-994, Kafka 3.8) is the first to carry it."""

STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
"""The transaction coordinator's state names, as ListTransactions filters them."""

RETRY_BACKOFF_S = 0.1
"""Kafka's ``retry.backoff.ms`` default: the pause before a retriable error's retry."""
# What Kafka's admin client retries for these calls: a coordinator or leader that is
# moving or loading. An unknown topic is final here (its Metadata answer), unlike
# kio's ``retriable`` flag.
_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
    }
)
_ALL_DURATIONS = -1  # ListTransactions v1's "no duration filter"
_NO_OFFSET = -1
_MS_PER_S = 1000


class _RetriableError(CommandError):
    """An answer with a retriable error code: worth asking again from a fresh lookup."""


def _check(error_code: int, subject: str) -> None:
    """Raise for a non-zero ``error_code``: ``subject: KAFKA_ERROR_NAME``."""
    if error_code == ErrorCode.none:
        return
    try:
        error = ErrorCode(error_code)
    except ValueError:
        raise CommandError(f"{subject}: error {error_code}") from None
    text = f"{subject}: {error.name.upper()}"
    raise _RetriableError(text) if error in _RETRIABLE else CommandError(text)


def _retrying(attempt: Callable[[], T]) -> T:
    """``attempt()``, repeated after a retriable error until ``TIMEOUT_S`` has passed."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return attempt()
        except _RetriableError:
            if time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)


class _Brokers(contextlib.ExitStack):
    """The command's connections, closed on exit: the bootstrap one and one per broker
    asked, by address."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__()
        self.bootstrap = self.enter_context(connect_bootstrap(bootstrap))
        self._by_address = {self.bootstrap.address: self.bootstrap}

    def at(self, host: str, port: int) -> Connection:
        """The connection to ``host:port``, opened on first use."""
        address = f"{host}:{port}"
        if address not in self._by_address:
            self._by_address[address] = self.enter_context(Connection(host, port))
        return self._by_address[address]

    def metadata(self, topics: Iterable[str]) -> Any:
        """The Metadata answer for ``topics`` (none: just the brokers); never creates one."""
        return self.bootstrap.request(
            METADATA,
            {
                "topics": [{"name": name, "topic_id": None} for name in topics],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )


def _list(args: argparse.Namespace) -> int:
    by_duration = _ALL_DURATIONS if args.duration_filter is None else args.duration_filter
    with _Brokers(args.bootstrap_server) as brokers:

        def list_all() -> list[Row]:
            rows: list[Row] = []
            for broker in sorted(brokers.metadata([]).brokers, key=lambda b: b.node_id):
                answer = brokers.at(broker.host, broker.port).request(
                    LIST_TRANSACTIONS if by_duration < 0 else LIST_TRANSACTIONS_BY_DURATION,
                    {
                        "state_filters": args.state,
                        "producer_id_filters": args.producer_id,
                        "duration_filter": by_duration,
                    },
                )
                _check(answer.error_code, f"broker {broker.node_id}")
                rows += [
                    {
                        "transactional_id": state.transactional_id,
                        "coordinator": int(broker.node_id),
                        "producer_id": int(state.producer_id),
                        "transaction_state": state.transaction_state,
                    }
                    for state in answer.transaction_states
                ]
            return sorted(rows, key=lambda row: str(row["transactional_id"]))

        rows = _retrying(list_all)
    emit(rows, args.format, tables=[("", rows)])
    return 0


def _coordinator(brokers: _Brokers, transactional_id: str) -> tuple[int, Connection]:
    """The id of the coordinator of ``transactional_id`` and a connection to it."""
    answer = brokers.bootstrap.request(
        FIND_COORDINATOR,
        {"key_type": CoordinatorType.TRANSACTION, "coordinator_keys": [transactional_id]},
    )
    (found,) = answer.coordinators
    _check(found.error_code, f"coordinator of transactional id {transactional_id!r}")
    return int(found.node_id), brokers.at(found.host, found.port)


def _millis(moment: datetime.datetime | None) -> int | None:
    """kio's aware datetime as milliseconds since the epoch (None, Kafka's -1, stays None)."""
    return None if moment is None else round(moment.timestamp() * _MS_PER_S)


def _describe(args: argparse.Namespace) -> int:
    with _Brokers(args.bootstrap_server) as brokers:

        def describe() -> tuple[int, Any]:
            coordinator_id, coordinator = _coordinator(brokers, args.transactional_id)
            answer = coordinator.request(
                DESCRIBE_TRANSACTIONS, {"transactional_ids": [args.transactional_id]}
            )
            (state,) = answer.transaction_states
            _check(state.error_code, f"transactional id {args.transactional_id!r}")
            return coordinator_id, state

        coordinator_id, state = _retrying(describe)
    start_ms = _millis(state.transaction_start_time)
    partitions: list[Row] = [
        {"topic": topic, "partition": index}
        for topic, index in sorted(
            (str(t.topic), int(index)) for t in state.topics for index in t.partitions
        )
    ]
    summary: Row = {
        "transactional_id": state.transactional_id,
        "coordinator": coordinator_id,
        "producer_id": int(state.producer_id),
        "producer_epoch": int(state.producer_epoch),
        "transaction_state": state.transaction_state,
        "timeout_ms": round(state.transaction_timeout.total_seconds() * _MS_PER_S),
        "start_time_ms": start_ms,
        "duration_ms": None
        if start_ms is None
        else max(round(time.time() * _MS_PER_S) - start_ms, 0),
    }
    emit(
        {**summary, "partitions": partitions},
        args.format,
        tables=[("TRANSACTION", [summary]), ("PARTITIONS", partitions)],
    )
    return 0


def _leader(brokers: _Brokers, topic: str, partition: int) -> Connection:
    """A connection to the leader of ``topic``'s ``partition``, found in Metadata."""
    answer = brokers.metadata([topic])
    (found,) = answer.topics
    _check(found.error_code, f"topic {topic!r}")
    by_index = {int(p.partition_index): p for p in found.partitions}
    if partition not in by_index:
        raise CommandError(f"topic {topic!r} has no partition {partition}")
    _check(by_index[partition].error_code, f"{topic}/{partition}")
    leader_id = int(by_index[partition].leader_id)
    endpoints = {int(b.node_id): b for b in answer.brokers}
    if leader_id not in endpoints:
        raise _RetriableError(f"{topic}/{partition}: LEADER_NOT_AVAILABLE")
    return brokers.at(endpoints[leader_id].host, endpoints[leader_id].port)


def _describe_producers(args: argparse.Namespace) -> int:
    with _Brokers(args.bootstrap_server) as brokers:

        def describe() -> Any:
            leader = _leader(brokers, args.topic, args.partition)
            answer = leader.request(
                DESCRIBE_PRODUCERS,
                {"topics": [{"name": args.topic, "partition_indexes": [args.partition]}]},
            )
            (topic,) = answer.topics
            (found,) = topic.partitions
            _check(found.error_code, f"{args.topic}/{args.partition}")
            return found.active_producers

        producers = _retrying(describe)
    rows: list[Row] = [
        {
            "producer_id": int(p.producer_id),
            "producer_epoch": int(p.producer_epoch),
            "last_sequence": int(p.last_sequence),
            "last_timestamp": int(p.last_timestamp),
            "coordinator_epoch": int(p.coordinator_epoch),
            "current_transaction_start_offset": (
                None
                if p.current_txn_start_offset == _NO_OFFSET
                else int(p.current_txn_start_offset)
            ),
        }
        for p in sorted(producers, key=lambda p: p.producer_id)
    ]
    emit(rows, args.format, tables=[("", rows)])
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel transaction`` parser, one subcommand per verb."""
    top = argparse.ArgumentParser(
        prog="tickwheel transaction",
        description="Inspect transactions and the producers of partitions.",
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")

    listing = verbs.add_parser(
        "list",
        help="list transactional ids, their coordinators, producer ids and states",
        description="List the transactional ids every broker coordinates.",
    )
    listing.add_argument(
        "--state",
        choices=STATES,
        action="append",
        default=[],
        help="only transactions in this state (repeatable)",
    )
    listing.add_argument(
        "--producer-id",
        type=at_least(0),
        action="append",
        default=[],
        metavar="ID",
        help="only the transactional id of this producer id (repeatable)",
    )
    listing.add_argument(
        "--duration-filter",
        type=at_least(0),
        metavar="MS",
        help="only transactions started more than MS ms ago (needs ListTransactions v1)",
    )
    add_format_argument(listing)
    listing.set_defaults(command=_list)

    describe = verbs.add_parser(
        "describe",
        help="show a transaction's state, producer, timeout, start time and partitions",
        description="Describe one transactional id at its coordinator.",
    )
    describe.add_argument("transactional_id", metavar="TRANSACTIONAL_ID")
    add_format_argument(describe)
    describe.set_defaults(command=_describe)

    producers = verbs.add_parser(
        "describe-producers",
        help="show a partition's active producers and their open transactions",
        description="Describe the active producers of one partition, at its leader.",
    )
    producers.add_argument("topic", metavar="TOPIC")
    producers.add_argument(
        "--partition", required=True, type=at_least(0), metavar="N", help="the partition"
    )
    add_format_argument(producers)
    producers.set_defaults(command=_describe_producers)

    for sub in (listing, describe, producers):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``transaction`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel transaction {args.verb}", args.command, args)
