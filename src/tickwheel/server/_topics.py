"""``TopicRegistry``: the topics this broker knows, their configs, and producer ids.

Kafka keeps this in its metadata log (KRaft) or ZooKeeper; a single-node broker needs
only a small file in its log directory, ``tickwheel-metadata.json``, rewritten
atomically (temporary file, fsync, rename) whenever a topic is created, grows, is
deleted or has its configs changed, whenever the broker's dynamic configs, a group's
configs, the finalized features (``_features``) or a client-quota entity's quotas change
(kept by entity path, as Kafka's ZooKeeper keeps them: ``users/<user>/clients/<client-id>``),
or a new block of producer ids is taken. Producer ids are handed out from
blocks, as Kafka's controller does, so that after a restart no id is ever reused:
a reused id would collide with the old producer's sequence numbers kept by the log.

Every topic has a topic id, a random UUID fixed when it is created (Kafka's
``TopicIdPartition``): clients of the Kafka 4 group protocols name partitions by it, and
a topic deleted and created again under its name gets a new one. The file keeps it in
Kafka's URL-safe base64 form; a file from before topic ids gets one per topic, derived
from the name (``legacy_topic_id``) so that every broker of a cluster agrees on it.

Topic names follow Kafka's rules (at most 249 characters of ``[a-zA-Z0-9._-]``, not
``.`` or ``..``).

Concurrency: owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tickwheel.protocol import decode_topic_id, encode_topic_id
from tickwheel.server._features import FinalizedFeatures, initial_features

V = TypeVar("V", str, float)

METADATA_FILE = "tickwheel-metadata.json"
_FORMAT_VERSION = 1
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids reserved per write of the metadata file (Kafka's block size)."""


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in {".", ".."}:
        return "topic name cannot be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return "topic name may only contain ASCII alphanumerics, '.', '_' and '-'"
    return None


_TOPIC_ID_NAMESPACE = uuid.UUID("7f3c1a52-9c1e-4f0b-8a43-5d1f2e6b9c07")


def legacy_topic_id(name: str) -> uuid.UUID:
    """The id of a topic recorded before topic ids: the same on every broker."""
    return uuid.uuid5(_TOPIC_ID_NAMESPACE, name)


@dataclass(slots=True)
class TopicInfo:
    """A topic: its partition count, its config overrides (topic config names) and id."""

    name: str
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


class TopicRegistry:
    """Topics and the producer-id counter, persisted in the log directory."""

    def __init__(self, log_dir: Path) -> None:
        self._path = log_dir / METADATA_FILE
        self.topics: dict[str, TopicInfo] = {}
        self._names_by_id: dict[uuid.UUID, str] = {}
        # Dynamic broker configs by entity (``<default>`` or a broker id), as Kafka's
        # metadata log keeps them.
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Group config overrides by group id (KIP-848/KIP-932 group configs).
        self.group_configs: dict[str, dict[str, str]] = {}
        # The finalized feature levels (a file written before features: the defaults).
        self.finalized_features = initial_features()
        # Client quotas by entity path (``tickwheel.server.quotas.entity_path``).
        self.client_quotas: dict[str, dict[str, float]] = {}
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        # Inside ``saves_deferred``: changes wait for one write at its end.
        self._deferring = False
        self._unsaved = False

    @contextlib.contextmanager
    def saves_deferred(self) -> Iterator[None]:
        """Keep changes made inside in memory and write the file once at the end (a
        request creating many topics writes it once, not once per topic)."""
        if self._deferring:
            yield
            return
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
            if self._unsaved:
                self._save()

    def load(self) -> None:
        """Read the metadata file if there is one."""
        if not self._path.exists():
            return
        data = json.loads(self._path.read_text(encoding="utf-8"))
        self.topics = {
            name: TopicInfo(
                name,
                int(t["partitions"]),
                dict(t["configs"]),
                decode_topic_id(str(t.get("topic_id", ""))) or legacy_topic_id(name),
            )
            for name, t in data["topics"].items()
        }
        self._names_by_id = {info.topic_id: name for name, info in self.topics.items()}
        self.broker_configs = {
            entity: dict(configs) for entity, configs in data.get("broker_configs", {}).items()
        }
        self.group_configs = {
            group: dict(configs) for group, configs in data.get("group_configs", {}).items()
        }
        features = data.get("finalized_features")
        if features is not None:
            self.finalized_features = FinalizedFeatures(
                int(features["epoch"]),
                {name: int(level) for name, level in features["levels"].items()},
            )
        self.client_quotas = {
            path: {str(key): float(value) for key, value in quotas.items()}
            for path, quotas in data.get("client_quotas", {}).items()
        }
        # Ids below the persisted block end may have been handed out before a crash.
        self._next_producer_id = self._producer_id_block_end = int(data["producer_id_block_end"])

    def adopt(self, topic: str, num_partitions: int) -> None:
        """Record a topic found on disk but missing from the file (or grown beyond it)."""
        info = self.topics.get(topic)
        if info is None:
            self._add(TopicInfo(topic, num_partitions, topic_id=legacy_topic_id(topic)))
        elif info.num_partitions < num_partitions:
            info.num_partitions = num_partitions
        else:
            return
        self._save()

    def create(
        self,
        name: str,
        num_partitions: int,
        configs: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        """Add a topic (replacing one of that name), with ``topic_id`` or a new one."""
        info = TopicInfo(name, num_partitions, dict(configs))
        if topic_id is not None:
            info.topic_id = topic_id
        self._add(info)
        self._save()
        return info

    def _add(self, info: TopicInfo) -> None:
        old = self.topics.get(info.name)
        if old is not None:
            self._names_by_id.pop(old.topic_id, None)
        self.topics[info.name] = info
        self._names_by_id[info.topic_id] = info.name

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id ``topic_id``, or None if there is none."""
        name = self._names_by_id.get(topic_id)
        info = self.topics.get(name) if name is not None else None
        return name if info is not None and info.topic_id == topic_id else None

    def set_partitions(self, name: str, num_partitions: int) -> None:
        """Grow a topic to ``num_partitions``."""
        self.topics[name].num_partitions = num_partitions
        self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides; kept as they were if the file cannot be
        written (the ``OSError`` is raised)."""
        info = self.topics[name]
        before, info.configs = info.configs, dict(configs)
        try:
            self._save()
        except OSError:
            info.configs = before
            raise

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic broker configs of ``entity`` (none: remove it); kept as
        they were if the file cannot be written (the ``OSError`` is raised)."""
        self._replace_entry(self.broker_configs, entity, configs)

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the config overrides of ``group_id`` (none: remove it); kept as they
        were if the file cannot be written (the ``OSError`` is raised)."""
        self._replace_entry(self.group_configs, group_id, configs)

    def set_client_quotas(self, path: str, quotas: dict[str, float]) -> None:
        """Replace the quotas of the entity at ``path`` (none: remove it); kept as they
        were if the file cannot be written (the ``OSError`` is raised)."""
        self._replace_entry(self.client_quotas, path, quotas)

    def _replace_entry(self, table: dict[str, dict[str, V]], key: str, value: dict[str, V]) -> None:
        """Set ``table[key]`` (empty: remove it) and save; put back as it was if the file
        cannot be written."""
        before = table.get(key)
        if value:
            table[key] = dict(value)
        else:
            table.pop(key, None)
        try:
            self._save()
        except OSError:
            if before is None:
                table.pop(key, None)
            else:
                table[key] = before
            raise

    def set_finalized_features(self, features: FinalizedFeatures) -> None:
        """Replace the finalized features; kept as they were if the file cannot be
        written (the ``OSError`` is raised)."""
        before = self.finalized_features
        self.finalized_features = features
        try:
            self._save()
        except OSError:
            self.finalized_features = before
            raise

    def delete(self, name: str) -> TopicInfo:
        """Remove a topic; returns what it was."""
        info = self.topics.pop(name)
        self._names_by_id.pop(info.topic_id, None)
        self._save()
        return info

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, by this broker or a previous run."""
        if self._next_producer_id >= self._producer_id_block_end:
            self._producer_id_block_end = self._next_producer_id + PRODUCER_ID_BLOCK_SIZE
            self._save()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    def _save(self) -> None:
        if self._deferring:
            self._unsaved = True
            return
        self._unsaved = False
        data = {
            "version": _FORMAT_VERSION,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": {
                name: {
                    "partitions": t.num_partitions,
                    "configs": t.configs,
                    "topic_id": encode_topic_id(t.topic_id),
                }
                for name, t in sorted(self.topics.items())
            },
            "broker_configs": self.broker_configs,
            "group_configs": self.group_configs,
            "finalized_features": {
                "epoch": self.finalized_features.epoch,
                "levels": dict(self.finalized_features.levels),
            },
            "client_quotas": self.client_quotas,
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as out:
            json.dump(data, out, indent=1)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(self._path)
