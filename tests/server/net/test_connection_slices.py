"""A fetched slice that shrank before it was sent closes the connection, never a short frame."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from tickwheel.bench._batches import make_batch
from tickwheel.log import FileRecordsSlice, Log, LogConfig
from tickwheel.server.apis import CloseConnectionError
from tickwheel.server.net._connection import Connection, _slice_bytes
from tickwheel.server.net._memory_pool import UNBOUNDED, MemoryPool

BIG_VALUE = b"v" * (80 * 1024)  # above SENDFILE_MIN_BYTES, so the sendfile path is taken


def shrunk_slice(log_dir: Path, value: bytes) -> FileRecordsSlice:
    """Read a batch, then truncate the log under the read and append a smaller one.

    The cut lands inside the segment (offset 1, after a first batch), so the segment
    file is cut in place: a cut at the segment's base would replace the file instead,
    and a slice of the old file keeps its bytes.
    """
    log = Log.open(log_dir, LogConfig())
    log.append_as_leader(make_batch([b"first"]), leader_epoch=0)
    log.append_as_leader(make_batch([value]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    records = log.read(1, max_bytes=1 << 20).records
    log.truncate_to(1)
    log.append_as_leader(make_batch([b"x"]), leader_epoch=0)
    return records


def test_a_small_slice_that_shrank_raises(tmp_path: Path) -> None:
    records = shrunk_slice(tmp_path, b"y" * 500)
    with pytest.raises(CloseConnectionError, match="shrank"):
        _slice_bytes(records)


@pytest.mark.asyncio
async def test_a_sendfile_slice_that_shrank_raises(tmp_path: Path) -> None:
    records = shrunk_slice(tmp_path, BIG_VALUE)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        reader, writer = await asyncio.open_connection(sock=ours)
        theirs.setblocking(False)
        connection = Connection(None, reader, writer, 1 << 20, MemoryPool(UNBOUNDED))  # type: ignore[arg-type]
        with pytest.raises(CloseConnectionError, match="shrank"):
            await connection._sendfile(records)
        connection.close()
        await connection.wait_closed()
