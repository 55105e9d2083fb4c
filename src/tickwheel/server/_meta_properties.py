"""``meta.properties``: which broker and which cluster a log directory belongs to.

Kafka writes this file into every ``log.dirs`` entry (ZooKeeper mode, ``version=0``)::

    version=0
    broker.id=1
    cluster.id=Zo5Xn2JtQhe2pCy1DmMRNw

and checks it at every start, so a directory is never served by another broker or
joined to another cluster: different ids in two directories, a ``broker.id`` other
than the configured one, or (in a cluster) a ``cluster.id`` other than ZooKeeper's
``/cluster/id`` stop the start-up with an error naming the file. A directory without
the file (new, or emptied) gets one.

The cluster id is Kafka's shape: 16 random bytes as URL-safe base64 without padding,
22 characters (``Uuid.randomUuid().toString()``), never starting with ``-`` so that a
command line does not take it for an option. A single broker makes one on its first
start and keeps it; in a cluster, the first broker to start proposes its own (or the
one its directories already hold) and ZooKeeper keeps the first proposal. A configured
``cluster.id`` must have the same shape.

Concurrency: plain functions, called once at broker start-up.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tickwheel.log import write_atomically
from tickwheel.replica import LogDirError
from tickwheel.server.config._properties import format_properties, parse_properties

META_PROPERTIES: Final = "meta.properties"
_ZK_MODE_VERSION: Final = "0"
_UUID_BYTES: Final = 16
_ID_CHARS: Final = 22


class MetaPropertiesError(LogDirError):
    """A ``meta.properties`` that does not fit this broker, or cannot be read."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The ids a log directory is bound to."""

    broker_id: int
    cluster_id: str


def new_cluster_id() -> str:
    """A fresh cluster id in Kafka's shape (22 URL-safe base64 characters)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def cluster_id_error(cluster_id: str) -> str | None:
    """Why ``cluster_id`` is not a Kafka cluster id, or None if it is one."""
    if len(cluster_id) != _ID_CHARS:
        return f"a cluster id has {_ID_CHARS} characters, {cluster_id!r} has {len(cluster_id)}"
    try:
        decoded = base64.urlsafe_b64decode(cluster_id + "==")
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != _UUID_BYTES or "+" in cluster_id or "/" in cluster_id:
        return f"{cluster_id!r} is not 16 bytes in URL-safe base64"
    return None


def read_meta_properties(log_dirs: Sequence[Path], broker_id: int) -> MetaProperties | None:
    """The ids the directories hold (None if none holds a file); error if they differ
    from each other or from ``broker_id``."""
    found: dict[Path, MetaProperties] = {}
    for log_dir in log_dirs:
        path = log_dir / META_PROPERTIES
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise MetaPropertiesError(f"cannot read {path}: {exc}") from exc
        found[path] = _parse(path, text)
    if not found:
        return None
    distinct = set(found.values())
    if len({meta.cluster_id for meta in distinct}) > 1:
        listed = ", ".join(f"{path}: {meta.cluster_id}" for path, meta in found.items())
        raise MetaPropertiesError(f"the log directories belong to different clusters ({listed})")
    for path, meta in found.items():
        if meta.broker_id != broker_id:
            raise MetaPropertiesError(
                f"configured broker.id {broker_id} does not match broker.id {meta.broker_id} "
                f"stored in {path}; set broker.id={meta.broker_id} or use another log.dirs"
            )
    return next(iter(distinct))


def _parse(path: Path, text: str) -> MetaProperties:
    properties = parse_properties(text)
    try:
        version = properties["version"]
        broker_id = int(properties["broker.id"])
        cluster_id = properties["cluster.id"]
    except (KeyError, ValueError) as exc:
        raise MetaPropertiesError(f"{path} lacks a valid {exc} entry") from exc
    if version != _ZK_MODE_VERSION:
        raise MetaPropertiesError(f"{path} has version {version}; this broker reads version 0")
    return MetaProperties(broker_id, cluster_id)


def choose_cluster_id(stored: MetaProperties | None, configured: str) -> str:
    """The id the directories hold, else ``configured`` (``cluster.id``), else a new one.

    A configured id other than the stored one is refused: the directories belong to
    another cluster.
    """
    if stored is None:
        return configured or new_cluster_id()
    if configured and configured != stored.cluster_id:
        raise MetaPropertiesError(
            f"cluster.id={configured} does not match the cluster id {stored.cluster_id} "
            f"stored in meta.properties: this broker's log.dirs belong to another cluster"
        )
    return stored.cluster_id


def write_meta_properties(log_dirs: Sequence[Path], meta: MetaProperties) -> None:
    """Write ``meta.properties`` into each directory that lacks it."""
    text = format_properties(
        {
            "version": _ZK_MODE_VERSION,
            "broker.id": str(meta.broker_id),
            "cluster.id": meta.cluster_id,
        }
    )
    for log_dir in log_dirs:
        if not (log_dir / META_PROPERTIES).exists():
            write_atomically(os.fspath(log_dir), META_PROPERTIES, text.encode("utf-8"))
