"""``LeaderEpochFileCache``: where each leader epoch starts in a partition's log (KIP-101).

Every batch a leader writes carries the leader epoch it was written in. The cache keeps,
for each epoch the log holds, the offset of its first batch: one entry per leader change,
so a short list whose epochs and start offsets both strictly increase. It answers the
question a follower asks a new leader after a leader change (OffsetsForLeaderEpoch,
KIP-101/KIP-279): where does my latest epoch end in your log? The follower truncates
there instead of at its high watermark, so replicas stay identical below the high
watermark through any sequence of leader changes. Consumers ask it too (KIP-320), to
see whether their position survived a leader change.

The rules are Kafka's ``LeaderEpochFileCache``:

- ``assign(epoch, start_offset)`` changes nothing when ``epoch`` is the latest and
  ``start_offset`` is not below its start. Otherwise it first drops, from the newest
  back, every entry the new one supersedes (an epoch at least as new, or a start at
  or after the new start), then appends the entry. So a new epoch starting where the
  latest started replaces it (that epoch wrote nothing), and a batch from an older
  epoch than the cache holds (a follower copying the leader's log over an epoch of
  its own that wrote nothing) ends the newer entries, keeping the cache in step with
  the batches.
- ``truncate_from_end(end_offset)`` drops the entries starting at or after
  ``end_offset``: the log was cut there.
- ``truncate_from_start(start_offset)`` drops the entries starting at or before
  ``start_offset`` and puts the last of them back starting at ``start_offset``: the
  epoch covering the new log start (DeleteRecords, retention) is kept.
- ``end_offset_for(requested_epoch, log_end_offset)`` answers with the largest epoch
  not above ``requested_epoch`` and where it ends: the start of the next epoch, or the
  log end offset when the requested epoch is the latest. A requested epoch older than
  every entry gets itself and the first entry's start (its data is gone, the follower
  replicates from there); ``UNDEFINED_EPOCH`` or an epoch newer than every entry gets
  ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``.

The file is Kafka's ``leader-epoch-checkpoint`` in the partition directory::

    0           <- format version
    2           <- number of entries
    0 0         <- epoch, start offset
    3 1234

It is replaced atomically on every change (write ``leader-epoch-checkpoint.tmp``,
fsync, rename, fsync the directory), so it always holds the cache as it was after
some change, never a torn mix. One change waits for the log's next flush for its
fsyncs: an epoch assigned at the log end (a new leader's, ``Log.maybe_assign_epoch_start_offset``),
which a restart would not use anyway (the load forgets every entry at or past the log
end) until batches follow it, and those reach the disk only with a flush, which
fsyncs the file first (``sync``). So making a thousand partitions leaders costs no
fsync per partition. Kafka writes truncations in the background to keep an
fsync off its fetcher threads; here they are written at once, as assignments are:
changes come once per leader change, truncation or log start move, never per batch.

``Log.open`` reads every batch header anyway (to rebuild producer state), so it
rebuilds the cache from the batches' epochs (``load_leader_epoch_cache``): each epoch
starts at its first batch, the first one moved up to the log start, and none at or
past the log end (Kafka's load truncates its cache there, forgetting an epoch that has
no batch yet). The file is rewritten when it differs: missing, malformed (a WARNING),
holding epochs whose batches a crash cut off or that had none, or disagreeing below
the log end (a WARNING: the batches win).

Concurrency: not thread-safe; the owning log's lock guards every call. The entries are
an immutable tuple replaced on each change, so a reader outside the lock sees one
consistent list.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Sequence
from typing import Final, NamedTuple

from tickwheel.log._checkpoint import CHECKPOINT_VERSION, fsync_dir, fsync_file, write_atomically
from tickwheel.log._errors import LogStorageError

LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
# OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1
# Version and entry count, before the entries.
_HEADER_LINES: Final = 2
_ENTRY_FIELDS: Final = 2

_log = logging.getLogger(__name__)


class EpochEntry(NamedTuple):
    """A leader epoch and the offset of its first batch."""

    epoch: int
    start_offset: int


class MalformedCheckpointError(ValueError):
    """A ``leader-epoch-checkpoint`` file that is not in Kafka's format."""


def _assigned(entries: tuple[EpochEntry, ...], entry: EpochEntry) -> tuple[EpochEntry, ...]:
    """``entries`` after Kafka's ``assign`` of ``entry`` (see the module docstring)."""
    if entries:
        latest = entries[-1]
        if entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return entries
    kept = len(entries)
    while kept and (
        entries[kept - 1].epoch >= entry.epoch
        or entries[kept - 1].start_offset >= entry.start_offset
    ):
        kept -= 1
    return (*entries[:kept], entry)


def _truncated_from_end(entries: tuple[EpochEntry, ...], end_offset: int) -> tuple[EpochEntry, ...]:
    """``entries`` without those starting at or after ``end_offset``."""
    kept = len(entries)
    while kept and entries[kept - 1].start_offset >= end_offset:
        kept -= 1
    return entries[:kept]


def _truncated_from_start(
    entries: tuple[EpochEntry, ...], start_offset: int
) -> tuple[EpochEntry, ...]:
    """``entries`` with the one covering ``start_offset`` starting there, and none before."""
    dropped = 0
    while dropped < len(entries) and entries[dropped].start_offset <= start_offset:
        dropped += 1
    if dropped == 0:
        return entries
    covering = EpochEntry(entries[dropped - 1].epoch, start_offset)
    return (covering, *entries[dropped:])


def _check_increasing(entries: Sequence[EpochEntry]) -> None:
    for earlier, later in itertools.pairwise(entries):
        if later.epoch <= earlier.epoch or later.start_offset <= earlier.start_offset:
            raise MalformedCheckpointError(f"entry {later} does not follow {earlier}")


def parse_leader_epoch_checkpoint(data: bytes) -> tuple[EpochEntry, ...]:
    """The entries of a ``leader-epoch-checkpoint`` file's bytes.

    Accepts exactly what Kafka writes: version 0, the entry count, that many
    ``<epoch> <start offset>`` lines of non-negative decimals, each line ended by a
    newline, epochs and start offsets strictly increasing. An empty file is no entries,
    as Kafka reads the empty file it creates for a new partition. Raises
    ``MalformedCheckpointError`` naming what is wrong.
    """
    if not data:
        return ()
    if not data.endswith(b"\n"):
        raise MalformedCheckpointError("the last line is cut short")
    lines = data[:-1].split(b"\n")
    if lines[0] != str(CHECKPOINT_VERSION).encode():
        raise MalformedCheckpointError(f"unknown version {lines[0]!r}")
    # bytes.isdigit accepts ASCII digits only, where int() would also take signs,
    # spaces and underscores.
    if len(lines) < _HEADER_LINES or not lines[1].isdigit():
        raise MalformedCheckpointError("no entry count")
    count = int(lines[1])
    if len(lines) != _HEADER_LINES + count:
        raise MalformedCheckpointError(
            f"{count} entries announced, {len(lines) - _HEADER_LINES} present"
        )
    entries = []
    for line in lines[_HEADER_LINES:]:
        fields = line.split(b" ")
        if len(fields) != _ENTRY_FIELDS or not all(field.isdigit() for field in fields):
            raise MalformedCheckpointError(f"{line!r} is not '<epoch> <start offset>'")
        entries.append(EpochEntry(int(fields[0]), int(fields[1])))
    _check_increasing(entries)
    return tuple(entries)


def format_leader_epoch_checkpoint(entries: Sequence[EpochEntry]) -> bytes:
    """The bytes of a ``leader-epoch-checkpoint`` file holding ``entries``."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(f"{epoch} {start_offset}" for epoch, start_offset in entries)
    return ("\n".join(lines) + "\n").encode()


class LeaderEpochFileCache:
    """The (epoch, start offset) of every leader epoch in a log, kept in its checkpoint file.

    Create it with ``load_leader_epoch_cache``; the constructor reads and writes nothing,
    and refuses (``ValueError``) entries whose epochs or start offsets do not strictly
    increase.
    """

    __slots__ = ("_dir_path", "_entries", "_unsynced")

    def __init__(self, dir_path: str, entries: Sequence[EpochEntry] = ()) -> None:
        _check_increasing(entries)
        self._dir_path = dir_path
        self._entries = tuple(entries)
        # Whether the file was last written without fsync and holds entries.
        self._unsynced = False

    @property
    def path(self) -> str:
        """The checkpoint file."""
        return os.path.join(self._dir_path, LEADER_EPOCH_CHECKPOINT)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """Every entry, oldest epoch first."""
        return self._entries

    @property
    def latest_epoch(self) -> int | None:
        """The newest epoch, or None when the cache is empty."""
        entries = self._entries
        return entries[-1].epoch if entries else None

    def assign(self, epoch: int, start_offset: int, *, sync: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        Without ``sync`` the file is written but fsynced only by ``sync()``. Raises
        ``ValueError`` for a negative epoch or offset, and ``LogStorageError`` if the
        file cannot be written.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        return self._replace(_assigned(self._entries, EpochEntry(epoch, start_offset)), sync=sync)

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the entries starting at or after ``end_offset``; returns whether any were."""
        return self._replace(_truncated_from_end(self._entries, end_offset))

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop the entries before ``start_offset``, the one covering it moved up to start there."""
        return self._replace(_truncated_from_start(self._entries, start_offset))

    def clear(self) -> bool:
        """Drop every entry (the log was emptied); returns whether there were any."""
        return self._replace(())

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch for ``requested_epoch``.

        See the module docstring; ``log_end_offset`` is the answer for the latest epoch.
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        for i, higher in enumerate(entries):
            if higher.epoch > requested_epoch:
                # The requested epoch ends where the next one starts, and is answered
                # with the newest epoch not above it (itself, when older than all).
                floor_epoch = entries[i - 1].epoch if i else requested_epoch
                return floor_epoch, higher.start_offset
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    def write(self, *, sync: bool = True) -> None:
        """Atomically replace the checkpoint file with the entries (``sync``: fsynced;
        otherwise ``sync()`` does it later, unless there are no entries: a lost file
        reads the same as an empty one).

        Raises ``LogStorageError`` if the file cannot be written.
        """
        try:
            write_atomically(
                self._dir_path,
                LEADER_EPOCH_CHECKPOINT,
                format_leader_epoch_checkpoint(self._entries),
                sync=sync,
            )
        except OSError as error:
            raise LogStorageError(f"write of {self.path} failed: {error}") from error
        self._unsynced = not sync and bool(self._entries)

    def sync(self) -> None:
        """fsync the file and its directory if it was written without; the log calls it
        on every flush. Raises ``OSError`` if that fails."""
        if not self._unsynced:
            return
        fsync_file(self.path)
        fsync_dir(self._dir_path)
        self._unsynced = False

    def _replace(self, entries: tuple[EpochEntry, ...], *, sync: bool = True) -> bool:
        if entries == self._entries:
            return False
        self._entries = entries
        self.write(sync=sync)
        return True

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._dir_path!r}, {list(self._entries)})"


def load_leader_epoch_cache(
    dir_path: str,
    batch_epochs: Sequence[EpochEntry],
    log_start_offset: int,
    log_end_offset: int,
    *,
    compacted: bool = False,
) -> LeaderEpochFileCache:
    """The cache of a recovered log, its checkpoint file rewritten if it disagrees.

    In a ``compacted`` log the cleaner may have removed the batches an epoch began
    with (or all of them): there the file is kept when every epoch the batches show is
    in it and starts at or before the first batch that carries it, as Kafka keeps its
    file.

    ``batch_epochs`` are the (epoch, base offset) of each batch whose epoch is newer
    than every batch's before it, oldest first: what Kafka's recovery assigns from
    batches. The cache holds them with the first moved up to the log start, and none
    from the log end on: as Kafka's load truncates its cache at the log end, an epoch
    with no batch yet (a leader that wrote nothing, a log emptied by DeleteRecords) is
    forgotten. The file is rewritten unless it holds exactly that; a WARNING tells
    when it was malformed or disagreed below the log end.
    """
    expected = _truncated_from_end(
        _truncated_from_start(tuple(batch_epochs), log_start_offset), log_end_offset
    )
    cache = LeaderEpochFileCache(dir_path, expected)
    try:
        with open(cache.path, "rb") as file:
            found: tuple[EpochEntry, ...] | None = parse_leader_epoch_checkpoint(file.read())
    except FileNotFoundError:
        found = None
    except MalformedCheckpointError as error:
        _log.warning("%s: %s; rebuilding it from the log's batches", cache.path, error)
        found = None
    except OSError as error:
        raise LogStorageError(f"read of {cache.path} failed: {error}") from error
    if found is not None:
        # Entries from the log end on are no fault: a crash cut the batches they began
        # with, or their epoch began with none. Below the log end they must agree.
        held = _truncated_from_end(_truncated_from_start(found, log_start_offset), log_end_offset)
        starts = {entry.epoch: entry.start_offset for entry in held}
        if compacted and all(
            starts.get(entry.epoch, entry.start_offset + 1) <= entry.start_offset
            for entry in expected
        ):
            cache = LeaderEpochFileCache(dir_path, held)
            if held != found:
                cache.write()
            return cache
        if held != expected:
            _log.warning(
                "%s holds %s, the log's batches say %s; rewriting it from the batches",
                cache.path,
                list(found),
                list(expected),
            )
    if found is None and not expected:
        # A new log: Kafka's empty file, not fsynced, since losing it in a crash reads
        # the same (no file, no epochs). Creating many partitions then costs no fsync
        # per partition here.
        cache.write(sync=False)
    elif found != expected:
        cache.write()
    return cache
