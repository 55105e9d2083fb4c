"""``AclStore``: where this broker's ACLs are kept, and how a change reaches the authorizer.

On a single node the ACLs are a file in the first log directory, ``acls.json`` (one
Kafka ACL document per resource pattern, the same JSON ZooKeeper holds), replaced
atomically (temporary file, fsync, rename) on every change and read back at start-up,
so they survive restarts. The file is written first, on a worker thread, and the
authorizer takes the change only once the file holds it: a failed write changes
nothing, and no request is authorized under ACLs a restart would forget.

In a cluster they live in ZooKeeper under Kafka's ``/kafka-acl`` paths
(``ClusterNode.update_acls``): a change is written there with a notification, and every
broker -- this one included, before ``update`` returns -- applies it to its authorizer
when its watch fires (``ClusterNode.acl_listener``).

Concurrency: event-loop thread only, but for the file write, which runs on a worker
thread (``asyncio.to_thread``); a lock keeps one change at a time, so each write holds
every change before it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tickwheel.cluster import ClusterNode
from tickwheel.log import write_atomically
from tickwheel.security import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_to_json,
)

_log = logging.getLogger(__name__)

ACL_FILE = "acls.json"
_FILE_VERSION = 1
_UPDATE_TIMEOUT_MS = 30_000
"""How long a change waits for this broker to apply it (cluster)."""


class AclStore:
    """The ACLs of one broker's authorizer: loaded at start, changed through ``update``."""

    def __init__(
        self, authorizer: AclAuthorizer, log_dir: Path, cluster: ClusterNode | None
    ) -> None:
        self.authorizer = authorizer
        self._path = log_dir / ACL_FILE
        self._cluster = cluster
        self._file_lock = asyncio.Lock()

    def load(self) -> None:
        """Fill the authorizer: from the file on a single node; in a cluster, hook the
        node so that it hands over ZooKeeper's ACLs when it starts, then every change."""
        if self._cluster is not None:
            self._cluster.acl_listener = self.authorizer.set_acls
            return
        try:
            bindings = _bindings_from_file(json.loads(self._path.read_bytes()))
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AclError) as exc:
            raise AclError(f"cannot read the ACL file {self._path}: {exc}") from exc
        self.authorizer.replace_all(bindings)
        _log.info("loaded the ACLs of %s", self._path)

    async def update(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry],
        remove: Iterable[AccessControlEntry],
    ) -> None:
        """Add and remove entries of ``pattern``'s ACLs, durably, then apply them."""
        if self._cluster is not None:
            await self._cluster.update_acls(pattern, add, remove, timeout_ms=_UPDATE_TIMEOUT_MS)
            return
        async with self._file_lock:
            authorizer = self.authorizer
            current = authorizer.acls_of(pattern)
            new = (current | frozenset(add)) - frozenset(remove)
            if new == current:
                return
            grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
            for binding in authorizer.bindings():
                if binding.pattern != pattern:
                    grouped.setdefault(binding.pattern, []).append(binding.entry)
            if new:
                grouped[pattern] = list(new)
            await asyncio.to_thread(self._write, _file_document(grouped))
            authorizer.set_acls(pattern, new)

    def _write(self, document: dict[str, Any]) -> None:
        """Replace the file with ``document`` (on a worker thread)."""
        write_atomically(
            str(self._path.parent), self._path.name, json.dumps(document, indent=1).encode()
        )


def _file_document(grouped: dict[ResourcePattern, list[AccessControlEntry]]) -> dict[str, Any]:
    return {
        "version": _FILE_VERSION,
        "resources": [
            {
                "resourceType": pattern.resource_type.pascal_name,
                "patternType": pattern.pattern_type.name,
                "name": pattern.name,
                "acls": entries_to_json(entries),
            }
            for pattern, entries in sorted(grouped.items())
        ],
    }


def _bindings_from_file(document: Any) -> list[AclBinding]:
    if not isinstance(document, dict) or document.get("version") != _FILE_VERSION:
        raise AclError(f"not a version {_FILE_VERSION} ACL file")
    bindings: list[AclBinding] = []
    for resource in document.get("resources", []):
        try:
            pattern = ResourcePattern(
                ResourceType.from_name(str(resource["resourceType"])),
                str(resource["name"]),
                PatternType.from_name(str(resource["patternType"])),
            )
        except (KeyError, TypeError) as exc:
            raise AclError(f"malformed resource {resource!r}") from exc
        pattern.validate()
        bindings.extend(AclBinding(pattern, e) for e in entries_from_json(resource.get("acls")))
    return bindings
