"""Checkpoint files, written atomically, in Kafka's offset-checkpoint text format.

Kafka's ``OffsetCheckpointFile``: a version line, an entry count, then one
``topic partition offset`` line per entry::

    0                      <- format version
    2                      <- number of entries
    my-topic 3 1234        <- topic, partition, offset
    my-topic 4 88

The three offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``) are kept one file
per directory by ``_offset_checkpoints``; ``cleaner-offset-checkpoint`` is a one-entry
file in the partition directory (``write_checkpoint``, ``read_checkpoint``).

A checkpoint is replaced atomically: write ``<name>.tmp``, fsync it, rename it over the
old file, fsync the directory. A crash leaves either the old or the new file, never a
torn one; a leftover ``.tmp`` is deleted on the next open.

Parsing is strict: anything but what ``format_checkpoint`` writes (each line ended by a
newline, the count agreeing with the lines, ASCII decimal numbers, no negative offset)
raises ``CheckpointFormatError``, so a file cut short is never read as fewer entries or
a smaller offset.

Concurrency: functions with no shared state; callers serialise writes to one file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

CHECKPOINT_VERSION: Final = 0
TEMP_SUFFIX: Final = ".tmp"
RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT: Final = "replication-offset-checkpoint"
CLEANER_CHECKPOINT: Final = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINTS: Final = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    HIGH_WATERMARK_CHECKPOINT,
)
_UNKNOWN_PARTITION: Final = -1
_VERSION_LINE: Final = str(CHECKPOINT_VERSION).encode()
# Version and entry count.
_HEADER_LINES: Final = 2
# Topic, partition, offset; split from the end, since a topic taken from an odd
# directory name may hold spaces.
_ENTRY_FIELDS: Final = 3

TopicPartitionKey = tuple[str, int]


class CheckpointFormatError(ValueError):
    """A checkpoint file that is not in Kafka's format; the message says why."""


def topic_partition_of(dir_path: str) -> TopicPartitionKey:
    """Topic and partition from a ``<topic>-<partition>`` directory name."""
    name = os.path.basename(os.path.normpath(dir_path))
    topic, _, partition = name.rpartition("-")
    if topic and partition.isdigit():
        return topic, int(partition)
    return name, _UNKNOWN_PARTITION


def format_checkpoint(entries: Mapping[TopicPartitionKey, int]) -> bytes:
    """The bytes of a checkpoint file holding ``entries``."""
    lines = [f"{CHECKPOINT_VERSION}\n{len(entries)}\n"]
    lines.extend(
        f"{topic} {partition} {offset}\n" for (topic, partition), offset in entries.items()
    )
    return "".join(lines).encode()


def parse_checkpoint(data: bytes) -> dict[TopicPartitionKey, int]:
    """The entries of a checkpoint file's bytes; raises ``CheckpointFormatError``."""
    if not data.endswith(b"\n"):
        raise CheckpointFormatError("the file does not end with a newline (cut short?)")
    lines = data[:-1].split(b"\n")
    if len(lines) < _HEADER_LINES:
        raise CheckpointFormatError("the version or entry count line is missing")
    if lines[0] != _VERSION_LINE:
        raise CheckpointFormatError(f"unknown version {lines[0][:20]!r}")
    # bytes.isdigit accepts ASCII digits only, where int() would also take signs,
    # spaces and underscores.
    if not lines[1].isdigit() or int(lines[1]) != len(lines) - _HEADER_LINES:
        raise CheckpointFormatError(
            f"entry count {lines[1][:20]!r} disagrees with {len(lines) - _HEADER_LINES} lines"
        )
    entries: dict[TopicPartitionKey, int] = {}
    for number, line in enumerate(lines[_HEADER_LINES:], start=_HEADER_LINES + 1):
        fields = line.rsplit(b" ", _ENTRY_FIELDS - 1)
        if (
            len(fields) != _ENTRY_FIELDS
            or not fields[0]
            or not fields[1].removeprefix(b"-").isdigit()
            or not fields[2].isdigit()
        ):
            raise CheckpointFormatError(f"line {number} is not 'topic partition offset'")
        try:
            topic = fields[0].decode()
        except UnicodeDecodeError:
            raise CheckpointFormatError(f"line {number} has a topic that is not UTF-8") from None
        entries[topic, int(fields[1])] = int(fields[2])
    return entries


def read_checkpoint_file(path: str) -> dict[TopicPartitionKey, int] | None:
    """The entries of the checkpoint file at ``path``, or None if there is none.

    Raises ``CheckpointFormatError`` (naming ``path``) if it is malformed.
    """
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    try:
        return parse_checkpoint(data)
    except CheckpointFormatError as error:
        raise CheckpointFormatError(f"checkpoint file {path} is malformed: {error}") from None


def read_checkpoint(path: str) -> int | None:
    """The offset in a one-entry checkpoint, or None if the file is absent or malformed."""
    try:
        entries = read_checkpoint_file(path)
    except CheckpointFormatError:
        return None
    if entries is None or len(entries) != 1:
        return None
    return next(iter(entries.values()))


def write_checkpoint(dir_path: str, name: str, topic: str, partition: int, offset: int) -> None:
    """Atomically replace ``dir_path/name`` with a one-entry checkpoint."""
    write_atomically(dir_path, name, format_checkpoint({(topic, partition): offset}))


def write_atomically(dir_path: str, name: str, data: bytes, *, sync: bool = True) -> None:
    """Replace ``dir_path/name`` with ``data``: write and fsync a temporary file, rename
    it over the old one, fsync the directory. Without ``sync``, no fsync: for a file
    whose loss in a crash reads the same as its content."""
    fd = os.open(
        os.path.join(dir_path, name + TEMP_SUFFIX),
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
        0o644,
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(os.path.join(dir_path, name + TEMP_SUFFIX), os.path.join(dir_path, name))
    if sync:
        fsync_dir(dir_path)


def fsync_file(path: str) -> None:
    """fsync the file at ``path`` (written earlier, through another descriptor)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(dir_path: str) -> None:
    """fsync a directory, making the creations, renames and unlinks in it durable."""
    fd = os.open(dir_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
