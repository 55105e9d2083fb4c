"""``AclStore``: where this broker's ACLs are kept, and how a change reaches the authorizer.

On a single node the ACLs are a file in the first log directory, ``acls.json`` (one
Kafka ACL document per resource pattern, the same JSON ZooKeeper holds), replaced
atomically (temporary file, fsync, rename) on every change and read back at start-up,
so they survive restarts. The authorizer takes a change after the file holds it.

In a cluster they live in ZooKeeper under Kafka's ``/kafka-acl`` paths
(``ClusterNode.update_acls``): a change is written there with a notification, and every
broker -- this one included, before ``update`` returns -- applies it to its authorizer
when its watch fires (``ClusterNode.acl_listener``).

Concurrency: event-loop thread only; the file write blocks the loop briefly, as the
topic registry's does (ACL changes are rare administrative calls).
"""

from __future__ import annotations

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
)
from tickwheel.security._acl_json import entries_from_json, entries_to_json

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

    def load(self) -> None:
        """Fill the authorizer: from the file on a single node; in a cluster, hook the
        node so that it hands over ZooKeeper's ACLs when it starts, then every change."""
        if self._cluster is not None:
            self._cluster.acl_listener = self.authorizer.set_acls
            return
        try:
            document = json.loads(self._path.read_bytes())
        except FileNotFoundError:
            return
        except ValueError as exc:
            raise AclError(f"{self._path} is not JSON: {exc}") from exc
        self.authorizer.replace_all(_bindings_from_file(document, self._path))
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
        authorizer = self.authorizer
        current = authorizer.acls_of(pattern)
        new = (current | frozenset(add)) - frozenset(remove)
        if new == current:
            return
        authorizer.set_acls(pattern, new)
        try:
            self._write()
        except OSError:
            authorizer.set_acls(pattern, current)
            raise

    def _write(self) -> None:
        grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in self.authorizer.bindings():
            grouped.setdefault(binding.pattern, []).append(binding.entry)
        document = {
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
        write_atomically(
            str(self._path.parent), self._path.name, json.dumps(document, indent=1).encode()
        )


def _bindings_from_file(document: Any, path: Path) -> list[AclBinding]:
    if not isinstance(document, dict) or document.get("version") != _FILE_VERSION:
        raise AclError(f"{path} is not a version {_FILE_VERSION} ACL file")
    bindings: list[AclBinding] = []
    for resource in document.get("resources", []):
        try:
            pattern = ResourcePattern(
                ResourceType.from_name(str(resource["resourceType"])),
                str(resource["name"]),
                PatternType.from_name(str(resource["patternType"])),
            )
        except (KeyError, TypeError) as exc:
            raise AclError(f"{path}: malformed resource {resource!r}") from exc
        pattern.validate()
        bindings.extend(AclBinding(pattern, e) for e in entries_from_json(resource.get("acls")))
    return bindings
