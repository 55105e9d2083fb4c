"""SegmentFile and FileRecordsSlice: positional reads, zero-copy slices, descriptor lifetime."""

from __future__ import annotations

import gc
import os
import socket
from pathlib import Path

import pytest

from tickwheel.log import FileRecordsSlice, LogStorageError
from tickwheel.log._records import SegmentFile

DATA = bytes(range(256)) * 4


def _segment_file(tmp_path: Path) -> SegmentFile:
    file = SegmentFile(str(tmp_path / "00000000000000000000.log"))
    os.write(file.fileno(), DATA)
    return file


def test_segment_file_appends_and_reads_by_position(tmp_path: Path) -> None:
    file = _segment_file(tmp_path)
    assert file.size() == len(DATA)
    assert file.read(10, 20) == DATA[10:30]
    # Fewer bytes only at the end of the file; none past it.
    assert file.read(len(DATA) - 5, 20) == DATA[-5:]
    assert file.read(len(DATA) + 5, 20) == b""
    # O_APPEND: writes land at the end whatever was read before.
    os.write(file.fileno(), b"tail")
    assert file.read(len(DATA), 10) == b"tail"
    file.close()


def test_a_closed_segment_file_refuses_use_and_closes_once(tmp_path: Path) -> None:
    file = _segment_file(tmp_path)
    file.close()
    file.close()
    with pytest.raises(LogStorageError, match="closed"):
        file.fileno()
    with pytest.raises(LogStorageError):
        file.read(0, 1)


def test_a_slice_reads_exactly_its_bytes(tmp_path: Path) -> None:
    file = _segment_file(tmp_path)
    records = FileRecordsSlice(file, 100, 50)
    assert len(records) == 50
    assert records.read_bytes() == DATA[100:150]
    assert bytes(records.memoryview()) == DATA[100:150]
    assert records.path == file.path
    assert records.fileno() == file.fileno()
    assert FileRecordsSlice(file, 100, 0).read_bytes() == b""
    file.close()


def test_a_slice_goes_to_a_socket_with_sendfile(tmp_path: Path) -> None:
    file = _segment_file(tmp_path)
    records = FileRecordsSlice(file, 300, 200)
    left, right = socket.socketpair()
    with left, right:
        sent = os.sendfile(left.fileno(), records.fileno(), records.position, records.length)
        assert sent == records.length
        assert right.recv(records.length, socket.MSG_WAITALL) == DATA[300:500]
    file.close()


def _fd_target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_an_unlinked_file_stays_open_until_its_last_slice_is_dropped(tmp_path: Path) -> None:
    file = _segment_file(tmp_path)
    fd = file.fileno()
    records = FileRecordsSlice(file, 0, 64)
    os.unlink(file.path)
    target = _fd_target(fd)
    assert target == f"{file.path} (deleted)"
    del file  # the log forgets a deleted segment; only the slice refers to it now
    gc.collect()
    assert records.read_bytes() == DATA[:64]
    assert _fd_target(fd) == target
    del records
    gc.collect()
    # Closed: the descriptor is gone (or already reused for another file).
    assert _fd_target(fd) != target
