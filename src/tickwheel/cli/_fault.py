"""``tickwheel fault``: add, list, remove or clear a broker's fault rules over HTTP.

Speaks to the broker's fault endpoint beside ``/metrics`` (``tickwheel.faults.endpoint
.enable=true``; loopback only), so it drives any tickwheel broker a test started, from
any language's test run. ``add`` takes a rule's fields as options (``--api Produce
--error NOT_LEADER_OR_FOLLOWER --count 3``) and prints the rule with its id; ``remove
ID`` and ``clear`` take rules out. Under an authorizer, ``--user`` names a super user
with SCRAM credentials on the broker, and its password comes from the
``TICKWHEEL_FAULTS_PASSWORD`` environment variable (never a command-line argument, which
other users of the machine can read). A refused rule prints the broker's reason, which
names the field, and exits 1; so does a broker that does not answer.

Needs no client library: ``FaultEndpointClient``, the standard library's HTTP client.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Final

from tickwheel.cli._output import Row, add_format_argument, emit
from tickwheel.faults import FaultEndpointClient, FaultEndpointError

PASSWORD_VARIABLE: Final = "TICKWHEEL_FAULTS_PASSWORD"
_RULE_OPTIONS: Final = (
    ("api", str, "the API the rule hits (Produce, Fetch, JoinGroup, 0, ...)"),
    ("kind", str, "error, delay, close, drop or throttle (error when --error is given)"),
    ("error", str, "the Kafka error to answer (NOT_LEADER_OR_FOLLOWER, 6, ...)"),
    ("delay-ms", int, "how long a delay or throttle lasts, on the broker's clock"),
    ("phase", str, "close or drop: before or after handling the request"),
    ("count", int, "how many matching requests the rule hits (default: all)"),
    ("version", int, "only requests of this API version"),
    ("topic", str, "only this topic's partitions"),
    ("partition", int, "only this partition"),
    ("group-id", str, "only requests of this group"),
    ("client-id", str, "only requests of this client id"),
    ("principal", str, "only requests of this principal (User:alice)"),
    ("listener", str, "only requests on this listener"),
)


def parser() -> argparse.ArgumentParser:
    """``tickwheel fault`` and its subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        required=True,
        help="the broker's metrics endpoint, http://127.0.0.1:PORT (tickwheel.metrics.port)",
    )
    common.add_argument("--user", help=f"a super user's name (password in ${PASSWORD_VARIABLE})")
    add_format_argument(common)
    parser = argparse.ArgumentParser(
        prog="tickwheel fault", description="Drive a broker's fault rules over its HTTP endpoint."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a rule", parents=[common])
    for name, kind, help_text in _RULE_OPTIONS:
        add.add_argument(f"--{name}", type=kind, help=help_text, required=name == "api")
    commands.add_parser("list", help="list the rules and their hits", parents=[common])
    remove = commands.add_parser("remove", help="take one rule out", parents=[common])
    remove.add_argument("rule_id", type=int, metavar="ID")
    commands.add_parser("clear", help="take every rule out", parents=[common])
    return parser


def _rule(args: argparse.Namespace) -> dict[str, object]:
    names = [name.replace("-", "_") for name, _, _ in _RULE_OPTIONS]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def _command(args: argparse.Namespace) -> object:
    password = os.environ.get(PASSWORD_VARIABLE, "")
    client = FaultEndpointClient(args.url, user=args.user, password=password)
    if args.command == "add":
        return client.add(**_rule(args))
    if args.command == "remove":
        return client.remove(args.rule_id)
    if args.command == "clear":
        client.clear()
        return []
    return client.rules()


def main(argv: list[str]) -> int:
    """Run ``tickwheel fault``; exit status 0, 1 when refused or unreachable, 2 on usage."""
    args = parser().parse_args(argv)
    try:
        answer = _command(args)
    except FaultEndpointError as exc:
        print(f"tickwheel fault {args.command}: {exc}", file=sys.stderr)
        return 1
    rows: list[Row] = [
        row for row in (answer if isinstance(answer, list) else [answer]) if isinstance(row, dict)
    ]
    emit(answer, args.format, tables=[("", rows)])
    return 0
