"""Checkpoint files, written atomically, in Kafka's offset-checkpoint text format.

Kafka keeps ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` once per log directory, one line per partition::

    0                      <- format version
    1                      <- number of entries
    my-topic 3 1234        <- topic, partition, offset

``Log.open`` is handed a single partition directory, so each log keeps its own files of
the same names and format holding its one entry (topic and partition come from the
directory name ``<topic>-<partition>``).

A checkpoint is replaced atomically: write ``<name>.tmp``, fsync it, rename it over the
old file, fsync the directory. A crash leaves either the old or the new file, never a
torn one; a leftover ``.tmp`` is deleted on the next open.

Concurrency: functions with no shared state; the log calls them under its lock.
"""

from __future__ import annotations

import os
from typing import Final

CHECKPOINT_VERSION: Final = 0
TEMP_SUFFIX: Final = ".tmp"
_UNKNOWN_PARTITION: Final = -1
_VERSION_LINE: Final = str(CHECKPOINT_VERSION).encode()
_ONE_ENTRY_LINE: Final = b"1"
# Version, entry count, the entry.
_CHECKPOINT_LINES: Final = 3
# Topic, partition, offset; counted from the end, since a topic taken from an odd
# directory name may hold spaces.
_ENTRY_FIELDS: Final = 3


def topic_partition_of(dir_path: str) -> tuple[str, int]:
    """Topic and partition from a ``<topic>-<partition>`` directory name."""
    name = os.path.basename(os.path.normpath(dir_path))
    topic, _, partition = name.rpartition("-")
    if topic and partition.isdigit():
        return topic, int(partition)
    return name, _UNKNOWN_PARTITION


def write_checkpoints(dir_path: str, topic: str, partition: int, offsets: dict[str, int]) -> None:
    """Atomically replace each named checkpoint file with a one-entry checkpoint.

    Every file is written and fsynced under a temporary name, then all are renamed
    and the directory is fsynced once.
    """
    for name, offset in offsets.items():
        text = f"{CHECKPOINT_VERSION}\n1\n{topic} {partition} {offset}\n"
        _write_temp(dir_path, name, text.encode())
    for name in offsets:
        os.replace(os.path.join(dir_path, name + TEMP_SUFFIX), os.path.join(dir_path, name))
    fsync_dir(dir_path)


def write_atomically(dir_path: str, name: str, data: bytes) -> None:
    """Replace ``dir_path/name`` with ``data``: write and fsync a temporary file, rename
    it over the old one, fsync the directory."""
    _write_temp(dir_path, name, data)
    os.replace(os.path.join(dir_path, name + TEMP_SUFFIX), os.path.join(dir_path, name))
    fsync_dir(dir_path)


def _write_temp(dir_path: str, name: str, data: bytes) -> None:
    fd = os.open(
        os.path.join(dir_path, name + TEMP_SUFFIX),
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
        0o644,
    )
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_checkpoint(path: str) -> int | None:
    """The offset in a one-entry checkpoint, or None if the file is absent or malformed.

    Malformed is anything but the exact format ``write_checkpoints`` writes: a version
    line, an entry count of 1, one ``<topic> <partition> <offset>`` line with a
    non-negative decimal offset, each line ended by a newline (so a file cut short is
    never read as a smaller offset).
    """
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    if not data.endswith(b"\n"):
        return None
    lines = data[:-1].split(b"\n")
    if len(lines) != _CHECKPOINT_LINES or lines[:2] != [_VERSION_LINE, _ONE_ENTRY_LINE]:
        return None
    fields = lines[2].split(b" ")
    # bytes.isdigit accepts ASCII digits only, where int() would also take signs,
    # spaces and underscores.
    if len(fields) < _ENTRY_FIELDS or not fields[-2].removeprefix(b"-").isdigit():
        return None
    offset = fields[-1]
    return int(offset) if offset.isdigit() else None


def fsync_dir(dir_path: str) -> None:
    """fsync a directory, making the creations, renames and unlinks in it durable."""
    fd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
