"""``ZkAclStore``: the cluster's ACLs in ZooKeeper, in Kafka's ZooKeeper-mode layout.

==================================================  ======================================
``/kafka-acl/<ResourceType>/<name>``                a LITERAL pattern's ACLs (``Topic``,
                                                    ``Group``, ``Cluster``, ...), JSON
                                                    ``{"version":1,"acls":[...]}``
``/kafka-acl-extended/prefixed/<ResourceType>/<n>``  a PREFIXED pattern's ACLs
``/kafka-acl-changes/acl_changes_<seq>``            a LITERAL pattern changed:
                                                    ``TOPIC:orders``
``/kafka-acl-extended-changes/acl_changes_<seq>``   a PREFIXED one changed:
                                                    ``{"version":1,"resourceType":"TOPIC",
                                                    "name":..,"patternType":"PREFIXED"}``
==================================================  ======================================

``update`` changes one pattern's ACLs as Kafka's ``AclAuthorizer`` does: read the
znode and its version, add and remove entries, write conditionally on that version
(create when absent, delete when empty), and start again when another broker wrote
in between; then it writes a change notification. ``watch`` loads every ACL, hands
each pattern to the listener, and watches both notification paths: every
notification newer than the last seen makes the pattern it names be read again and
handed over, so a change reaches every broker's authorizer as soon as ZooKeeper tells
it. Notifications older than 15 minutes are deleted, as Kafka's
``ZkNodeChangeNotificationListener`` does.

Concurrency: blocking ZooKeeper calls, run in worker threads; the listener runs on
kazoo's callback thread and must hand its work to the event loop. ``_seen`` is only
touched by the watch callbacks, which kazoo runs one at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable

from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from tickwheel.cluster._zk import ZkClient
from tickwheel.security import (
    AccessControlEntry,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_resource_name,
    decode_entries,
    encode_entries,
)

_log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
PREFIXED_ACL_PATH = f"{EXTENDED_ACL_PATH}/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (LITERAL_ACL_PATH, PREFIXED_ACL_PATH, LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)
ACL_CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_CHANGE_EVENT_VERSION = 1
_RESOURCE_SEPARATOR = ":"

Entries = frozenset[AccessControlEntry]
AclListener = Callable[[ResourcePattern, Entries, str, int], None]
"""Told a pattern's ACLs with the notification path and sequence that announced them
(-1 at start-up)."""
_CONCRETE_TYPES = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]


def acl_path(pattern: ResourcePattern) -> str:
    """The znode holding ``pattern``'s ACLs; ``AclError`` for a name that cannot be one
    znode (``check_resource_name``: a ``/`` in it, or ``.``/``..``)."""
    check_resource_name(pattern.name)
    root = LITERAL_ACL_PATH if pattern.pattern_type == PatternType.LITERAL else PREFIXED_ACL_PATH
    return f"{root}/{pattern.resource_type.pascal_name}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The notification path prefix and data announcing a change of ``pattern``."""
    if pattern.pattern_type == PatternType.LITERAL:
        data = f"{pattern.resource_type.name}{_RESOURCE_SEPARATOR}{pattern.name}".encode()
        return f"{LITERAL_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", data
    event = {
        "version": _CHANGE_EVENT_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES_PATH}/{ACL_CHANGE_PREFIX}", json.dumps(event).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The pattern a notification under ``changes_path`` names; ``AclError`` if none."""
    text = data.decode("utf-8", errors="replace")
    if changes_path == LITERAL_CHANGES_PATH:
        type_name, sep, name = text.partition(_RESOURCE_SEPARATOR)
        if not sep:
            raise AclError(f"an ACL change that is not ResourceType:name: {text!r}")
        return ResourcePattern(ResourceType.from_name(type_name), name, PatternType.LITERAL)
    try:
        event = json.loads(text)
        return ResourcePattern(
            ResourceType.from_name(str(event["resourceType"])),
            str(event["name"]),
            PatternType.from_name(str(event["patternType"])),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise AclError(f"a malformed extended ACL change {text!r}") from exc


def _sequence(child: str) -> int | None:
    digits = child.removeprefix(ACL_CHANGE_PREFIX)
    return int(digits) if child.startswith(ACL_CHANGE_PREFIX) and digits.isdigit() else None


class ZkAclStore:
    """Reads, writes and watches the ACLs in ZooKeeper."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk
        self._seen: dict[str, int] = {}

    def _read(self, pattern: ResourcePattern) -> tuple[Entries, int | None]:
        found = self._zk.get(acl_path(pattern))
        if found is None:
            return frozenset(), None
        try:
            return decode_entries(found[0]), int(found[1].version)
        except AclError as exc:
            _log.warning("ignoring the ACLs of %s: %s", pattern, exc)
            return frozenset(), int(found[1].version)

    def read(self, pattern: ResourcePattern) -> Entries:
        """The ACLs of ``pattern`` as ZooKeeper holds them now."""
        return self._read(pattern)[0]

    def update(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry],
        remove: Iterable[AccessControlEntry],
    ) -> tuple[str, int] | None:
        """Add ``add`` to and remove ``remove`` from ``pattern``'s ACLs.

        Conditional on the znode version read, retried until no other writer raced it;
        every broker is then notified. The notification's path and sequence, or None
        when nothing changed.
        """
        path = acl_path(pattern)
        added, removed = frozenset(add), frozenset(remove)
        while True:
            current, version = self._read(pattern)
            new = (current | added) - removed
            if new == current:
                return None
            try:
                if version is None:
                    self._zk.create_node(path, encode_entries(new), makepath=True)
                elif new:
                    self._zk.set_node(path, encode_entries(new), version)
                else:
                    self._zk.delete_node(path, version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            prefix, data = encode_change(pattern)
            created = self._zk.create_node(prefix, data, sequence=True)
            changes_path, _, child = created.rpartition("/")
            sequence = _sequence(child)
            assert sequence is not None
            return changes_path, sequence

    def load_all(self) -> dict[ResourcePattern, Entries]:
        """Every pattern's ACLs."""
        loaded: dict[ResourcePattern, Entries] = {}
        for root, pattern_type in (
            (LITERAL_ACL_PATH, PatternType.LITERAL),
            (PREFIXED_ACL_PATH, PatternType.PREFIXED),
        ):
            for resource_type in _CONCRETE_TYPES:
                for name in self._zk.children(f"{root}/{resource_type.pascal_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read(pattern)
                    if entries:
                        loaded[pattern] = entries
        return loaded

    def watch(self, listener: AclListener) -> None:
        """Hand every pattern's ACLs to ``listener`` now, then each changed one."""
        for path in ACL_PATHS:
            self._zk.ensure_path(path)
        for changes_path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self._seen[changes_path] = max(
                (s for c in self._zk.children(changes_path) if (s := _sequence(c)) is not None),
                default=-1,
            )
        for pattern, entries in self.load_all().items():
            listener(pattern, entries, "", -1)
        for changes_path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self._zk.watch_children(changes_path, self._on_changes(changes_path, listener))

    def _on_changes(
        self, changes_path: str, listener: AclListener
    ) -> Callable[[list[str]], bool | None]:
        def on_changes(children: list[str]) -> bool | None:
            for seq, child in sorted((s, c) for c in children if (s := _sequence(c)) is not None):
                if seq <= self._seen[changes_path]:
                    continue
                self._seen[changes_path] = seq
                found = self._zk.get(f"{changes_path}/{child}")
                if found is None:
                    continue
                try:
                    pattern = decode_change(changes_path, found[0])
                    entries = self.read(pattern)
                except AclError as exc:
                    _log.warning("ignoring ACL change %s: %s", child, exc)
                    continue
                listener(pattern, entries, changes_path, seq)
            self._purge(changes_path, children)
            return None

        return on_changes

    def _purge(self, changes_path: str, children: list[str]) -> None:
        now_ms = int(time.time() * 1000)
        for child in children:
            found = self._zk.get(f"{changes_path}/{child}")
            if found is not None and now_ms - int(found[1].ctime) > ACL_CHANGE_EXPIRATION_MS:
                with contextlib.suppress(NoNodeError):
                    self._zk.delete_node(f"{changes_path}/{child}", -1)
