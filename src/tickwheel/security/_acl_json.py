"""Kafka's JSON for the ACLs of one resource, as its ``AclEntry`` writes them::

    {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                             "operation": "Read", "host": "*"}]}

ZooKeeper holds one such document per resource pattern (``cluster/``), and a single
broker keeps the same documents in its log directory, so both read the same way.

Concurrency: pure functions, safe anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tickwheel.security._acl import (
    AccessControlEntry,
    AclError,
    AclOperation,
    AclPermissionType,
)

ACL_JSON_VERSION = 1


def entries_to_json(entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    """The JSON object holding ``entries`` (sorted, so equal sets write equal bytes)."""
    return {
        "version": ACL_JSON_VERSION,
        "acls": [
            {
                "principal": entry.principal,
                "permissionType": entry.permission.pascal_name,
                "operation": entry.operation.pascal_name,
                "host": entry.host,
            }
            for entry in sorted(entries)
        ],
    }


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """``entries_to_json`` as UTF-8 bytes."""
    return json.dumps(entries_to_json(entries), separators=(",", ":")).encode()


def entries_from_json(document: Any) -> frozenset[AccessControlEntry]:
    """The entries of a JSON object; ``AclError`` if it is not Kafka's ACL document."""
    if not isinstance(document, dict) or document.get("version") != ACL_JSON_VERSION:
        raise AclError(f"not a version {ACL_JSON_VERSION} ACL document: {document!r}")
    acls = document.get("acls")
    if not isinstance(acls, list):
        raise AclError("an ACL document without an acls list")
    entries = set()
    for item in acls:
        try:
            entry = AccessControlEntry(
                str(item["principal"]),
                str(item["host"]),
                AclOperation.from_name(str(item["operation"])),
                AclPermissionType.from_name(str(item["permissionType"])),
            )
        except (KeyError, TypeError) as exc:
            raise AclError(f"malformed ACL entry {item!r}") from exc
        entry.validate()
        entries.add(entry)
    return frozenset(entries)


def decode_entries(data: bytes) -> frozenset[AccessControlEntry]:
    """The entries of an encoded document (empty bytes: none)."""
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise AclError(f"an ACL document that is not JSON: {exc}") from exc
    return entries_from_json(document)
