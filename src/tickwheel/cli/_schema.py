"""``tickwheel schema``: register, get, list, check and delete schemas in a registry.

It speaks Confluent Schema Registry's REST API over HTTP with the standard library
(``urllib``), so it works against the registry a tickwheel broker serves
(``schema.registry.listeners``), Confluent's or Karapace's, at ``--url``
(``http://localhost:8081`` by default, Confluent's port). A refusal prints the
registry's error code and message on one line and exits 1, as does a registry that
does not answer; ``check`` exits 1 when the schema is incompatible.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from tickwheel._json_http import HttpStatusError, json_call
from tickwheel.cli._client import TIMEOUT_S, CommandError, run
from tickwheel.cli._output import add_format_argument, emit

DEFAULT_URL = "http://localhost:8081"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def _call(url: str, method: str, path: str, body: object = None) -> Any:
    """The JSON answer of ``method path``; a refusal raises ``CommandError``."""
    headers = {"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE}
    try:
        return json_call(url.rstrip("/") + path, method, body, headers=headers, timeout_s=TIMEOUT_S)
    except HttpStatusError as refusal:
        document = refusal.document
        if isinstance(document, dict) and {"error_code", "message"} <= document.keys():
            detail = f"error {document['error_code']}: {document['message']}"
        else:
            detail = f"HTTP {refusal.status}: {refusal.text.strip()}"
        raise CommandError(detail) from None
    except OSError as error:
        raise CommandError(f"no schema registry answered at {url}: {error}") from None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(args: argparse.Namespace) -> dict[str, object]:
    source = args.schema_file
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise CommandError(f"cannot read the schema file {source}: {exc}") from None
    body: dict[str, object] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    return body


def _register(args: argparse.Namespace) -> int:
    answer = _call(
        args.url, "POST", f"/subjects/{_quote(args.subject)}/versions", _schema_body(args)
    )
    emit(answer, args.format, tables=[("", [{"subject": args.subject, "id": answer["id"]}])])
    return 0


def _get(args: argparse.Namespace) -> int:
    if args.id is not None:
        answer = _call(args.url, "GET", f"/schemas/ids/{args.id}")
        row = {"id": args.id, "type": answer.get("schemaType", "AVRO")}
    elif args.subject is not None:
        answer = _call(args.url, "GET", f"/subjects/{_quote(args.subject)}/versions/{args.version}")
        row = {
            "subject": answer["subject"],
            "version": answer["version"],
            "id": answer["id"],
            "type": answer.get("schemaType", "AVRO"),
        }
    else:
        raise CommandError("give a SUBJECT or --id")
    if args.format == "json":
        emit(answer, "json")
    else:
        emit(None, "table", tables=[("", [row])])
        print(answer["schema"])
    return 0


def _list(args: argparse.Namespace) -> int:
    query = "?deleted=true" if args.deleted else ""
    if args.subject is None:
        subjects = _call(args.url, "GET", f"/subjects{query}")
        emit(subjects, args.format, tables=[("", [{"subject": s} for s in subjects])])
    else:
        versions = _call(args.url, "GET", f"/subjects/{_quote(args.subject)}/versions{query}")
        rows = [{"subject": args.subject, "version": v} for v in versions]
        emit(versions, args.format, tables=[("", rows)])
    return 0


def _check(args: argparse.Namespace) -> int:
    path = f"/compatibility/subjects/{_quote(args.subject)}/versions"
    if args.version is not None:
        path += f"/{args.version}"
    answer = _call(args.url, "POST", path + "?verbose=true", _schema_body(args))
    compatible = bool(answer["is_compatible"])
    rows = [{"compatible": compatible}] + [
        {"compatible": "", "reason": m} for m in answer.get("messages", [])
    ]
    emit(answer, args.format, tables=[("", rows)])
    return 0 if compatible else 1


def _delete(args: argparse.Namespace) -> int:
    path = f"/subjects/{_quote(args.subject)}"
    if args.version is not None:
        path += f"/versions/{args.version}"
    if args.permanent:
        path += "?permanent=true"
    deleted = _call(args.url, "DELETE", path)
    versions = deleted if isinstance(deleted, list) else [deleted]
    emit(
        deleted,
        args.format,
        tables=[("", [{"subject": args.subject, "version": v} for v in versions])],
    )
    return 0


def parser() -> argparse.ArgumentParser:
    """``tickwheel schema`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="tickwheel schema", description="Register, get, list, check and delete schemas."
    )
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the registry (default {DEFAULT_URL})")
    add_format_argument(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_schema(command: argparse.ArgumentParser) -> None:
        command.add_argument("subject")
        command.add_argument("schema_file", metavar="SCHEMA_FILE", help="the schema ('-': stdin)")
        command.add_argument("--type", choices=_SCHEMA_TYPES, default="AVRO", type=str.upper)

    register = commands.add_parser("register", help="register a schema under a subject")
    with_schema(register)
    register.set_defaults(run=_register)
    get = commands.add_parser("get", help="a subject's version (default latest), or --id")
    get.add_argument("subject", nargs="?")
    get.add_argument("--version", default="latest")
    get.add_argument("--id", type=int)
    get.set_defaults(run=_get)
    listing = commands.add_parser("list", help="the subjects, or a subject's versions")
    listing.add_argument("subject", nargs="?")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted ones too")
    listing.set_defaults(run=_list)
    check = commands.add_parser("check", help="is a schema compatible with a subject?")
    with_schema(check)
    check.add_argument("--version", help="against this version only (default: as the level says)")
    check.set_defaults(run=_check)
    delete = commands.add_parser("delete", help="delete a subject or one version of it")
    delete.add_argument("subject")
    delete.add_argument("--version")
    delete.add_argument("--permanent", action="store_true", help="hard delete (after a soft one)")
    delete.set_defaults(run=_delete)
    return parser


def main(argv: list[str]) -> int:
    """Run ``tickwheel schema``; returns the exit status."""
    args = parser().parse_args(argv)
    return run("tickwheel schema", args.run, args)
