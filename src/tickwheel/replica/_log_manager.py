"""``LogManager``: the partition logs under one ``log.dirs`` directory.

Kafka's layout: one directory per partition, named ``<topic>-<partition>``, each a
``Log`` (segments, indexes, and its own checkpoints, which the log layer writes). At
start-up every such directory is opened (``Log.open`` recovers it); a deleted
partition's directory is closed and removed.

Concurrency: owned by the ``ReplicaManager``; called on its event-loop thread only.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from tickwheel.log import Log, LogConfig
from tickwheel.replica._types import TopicPartition

_log = logging.getLogger(__name__)


def partition_dir_name(tp: TopicPartition) -> str:
    """Kafka's directory name for a partition's log."""
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a ``<topic>-<partition>`` directory holds, or None."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    """Opens, creates, deletes and closes the partition logs of one directory."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._logs: dict[TopicPartition, Log] = {}

    def existing_partitions(self) -> list[TopicPartition]:
        """Partitions with a log directory on disk, sorted."""
        if not self.log_dir.is_dir():
            return []
        found = (parse_partition_dir(p.name) for p in self.log_dir.iterdir() if p.is_dir())
        return sorted(tp for tp in found if tp is not None)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig) -> Log:
        """The open log of ``tp``, opened (and recovered) or created on first use."""
        log = self._logs.get(tp)
        if log is None:
            path = self.log_dir / partition_dir_name(tp)
            path.mkdir(parents=True, exist_ok=True)
            log = Log.open(str(path), config)
            self._logs[tp] = log
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        """Close ``tp``'s log and remove its directory."""
        log = self._logs.pop(tp, None)
        if log is not None:
            log.close()
        shutil.rmtree(self.log_dir / partition_dir_name(tp), ignore_errors=True)

    def flush_all(self) -> None:
        """Flush every open log to disk."""
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Flush and close every log (each writes its checkpoints as it closes)."""
        logs, self._logs = self._logs, {}
        for tp, log in logs.items():
            try:
                log.flush()
            finally:
                log.close()
            _log.debug("closed log %s", tp)
