"""``tickwheel bench log``: the partition log against plain file I/O on the same bytes.

Method. One process, one temporary directory on the file system ``--dir`` names
(default: the system temp dir), batches prepared before any timing: ``--batches`` v2
record batches of ``--batch-bytes`` each (16 KiB by default: 16 records of about
1 KiB, CRC-32C set), 64 MiB by default, handed over as ``bytes`` as the broker's
produce path does. Each workload runs ``--rounds`` times; within a round the peers
alternate every 4 MiB (appends, each peer going first in turn) or 16 MiB (reads, in
ABBA order), so the load of a shared machine falls on all alike. Printed: the median
throughput (MiB/s) of each and the median of the per-round ratios subject / plain
(above 1: the subject is faster). Nothing is fsynced (``flush.messages`` and
``flush.ms`` stay at Kafka's "never", its default).

- append: ``Log.append_as_leader(batch, epoch)`` for every batch into a fresh log
  (framing, CRC-32C and client checks, offset assignment, ``os.writev`` of the patched
  16-byte prefix and the untouched rest, index upkeep, result) against
  ``os.write(fd, batch)`` of the same bytes to a fresh ``O_APPEND`` file. A third peer,
  the floor, checks each batch's CRC-32C and then ``os.write``s it: the least any log
  that validates produced batches can do, so "floor" / "os.write" is the best ratio
  such a log could reach here. Appends are timed by the calling thread's CPU time
  (``--clock cpu``, the default; ``--clock wall`` for elapsed time): the write, page
  cache copy included, runs in full on that thread, and CPU time leaves out the
  slices other processes take on a busy machine.
- read: a consumer-style fetch loop over the whole log, ``--fetch-bytes`` (1 MiB) per
  fetch: ``Log.read(offset, max_bytes)`` then ``os.sendfile`` of the slice (the
  zero-copy path the broker uses), against reading the same segment file with
  ``os.preadv`` into a reusable buffer. Two sinks: (1) "socket": a fresh TCP
  connection on 127.0.0.1 per 16 MiB (``TCP_NODELAY``, 4 MiB buffers) drained by a
  ``cat`` process, so the receiving end costs no GIL time; the plain peer must also
  write its buffer to the socket (a server without sendfile); the time runs until
  ``cat`` has read everything. (2) "/dev/null": ``sendfile`` to ``/dev/null`` for the
  log, no sink for the plain peer: the raw cost of getting the bytes out of the page
  cache, where ``sendfile`` copies nothing and ``preadv`` copies every byte once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import crc32c

from tickwheel.bench._batches import CRC_FIELD, CRC_START, HEADER_BYTES, encode_record
from tickwheel.bench._batches import make_batch as encode_batch
from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.log import Log, LogConfig

DEFAULT_BATCH_BYTES: Final = 16 * 1024
RECORDS_PER_BATCH: Final = 16
_VALUE_BYTES: Final = 1000
DEFAULT_BATCHES: Final = 4096
DEFAULT_ROUNDS: Final = 5
DEFAULT_FETCH_BYTES: Final = 1024 * 1024
MIB: Final = 1024 * 1024
# The stored CRC, read at its offset in the batch.
_CRC_FIELD_VALUE = struct.Struct(f">{CRC_FIELD}xI")
_TIMESTAMP_MS: Final = 1_700_000_000_000
_SOCKET_BUFFER_BYTES: Final = 4 * MIB
# The log and its peers alternate every this many batches (4 MiB) or fetches (16 MiB),
# so that the load of a shared machine falls on all alike.
_CHUNK_BATCHES: Final = 256
_CHUNK_FETCHES: Final = 16
# Appends are timed by the calling thread's CPU time by default: each write is done
# in full (page-cache copy included) by the calling thread, and CPU time leaves out
# the slices other processes take from it, which on a busy shared box swing single
# rounds' wall-clock ratios from 0.2 to over 2.
_APPEND_CLOCKS: Final[dict[str, Callable[[], float]]] = {
    "cpu": time.thread_time,
    "wall": time.perf_counter,
}


def make_batch(batch_bytes: int, seed: int) -> bytes:
    """A valid v2 batch of ``RECORDS_PER_BATCH`` records totalling exactly ``batch_bytes``."""
    value = bytes([seed % 251]) * _VALUE_BYTES
    values = [value] * (RECORDS_PER_BATCH - 1)
    used = HEADER_BYTES + sum(len(encode_record(i, 0, None, value)) for i in range(len(values)))
    remaining = batch_bytes - used
    # The last record takes up the rest: find the value length whose record fills it.
    last_length = next(
        length
        for length in range(remaining, 0, -1)
        if len(encode_record(len(values), 0, None, bytes(length))) == remaining
    )
    return encode_batch([*values, value[:1] * last_length], timestamp_ms=_TIMESTAMP_MS)


def _append_round(
    directory: Path, batches: list[bytes], round_index: int, clock: Callable[[], float]
) -> tuple[float, float, float]:
    """Seconds spent appending ``batches`` to a fresh log, writing them to a fresh file,
    and checking their CRC-32C then writing them to another fresh file (the floor)."""
    log_dir = directory / f"append-{round_index}"
    plain_path = directory / f"plain-{round_index}.log"
    floor_path = directory / f"floor-{round_index}.log"
    log = Log.open(log_dir, LogConfig())
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    plain_fd = os.open(plain_path, flags, 0o644)
    floor_fd = os.open(floor_path, flags, 0o644)
    append = log.append_as_leader
    write = os.write
    crc = crc32c.crc32c

    def run_log(chunk: list[bytes]) -> None:
        for batch in chunk:
            append(batch, 0)

    def run_plain(chunk: list[bytes]) -> None:
        for batch in chunk:
            write(plain_fd, batch)

    def run_floor(chunk: list[bytes]) -> None:
        for batch in chunk:
            if crc(memoryview(batch)[CRC_START:]) != _CRC_FIELD_VALUE.unpack_from(batch)[0]:
                raise ValueError("bad CRC in a prepared batch")
            write(floor_fd, batch)

    peers = [run_log, run_plain, run_floor]
    times = [0.0] * len(peers)
    try:
        for chunk_index, start in enumerate(range(0, len(batches), _CHUNK_BATCHES)):
            chunk = batches[start : start + _CHUNK_BATCHES]
            # The peers take turns going first, so none always inherits the others'
            # warm caches or pays for their dirty pages.
            for turn in range(len(peers)):
                index = (chunk_index + turn) % len(peers)
                begin = clock()
                peers[index](chunk)
                times[index] += clock() - begin
    finally:
        os.close(plain_fd)
        os.close(floor_fd)
        plain_path.unlink()
        floor_path.unlink()
        log.close()
        shutil.rmtree(log_dir)
    return times[0], times[1], times[2]


def _drained_s(send: Callable[[int], None]) -> float:
    """Seconds for ``send(fd)`` to push bytes into a fresh loopback TCP connection and
    for a ``cat`` process on the far end to read them all (to its EOF)."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    for sock in (sender, receiver):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER_BYTES)
        # As Kafka's server sockets: no Nagle delay on the tail of a response.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # A separate process drains the socket, so the receiving end costs no GIL time
    # and reads as fast whichever way the bytes were sent.
    with (
        receiver,
        subprocess.Popen(["cat"], stdin=receiver.fileno(), stdout=subprocess.DEVNULL) as cat,
    ):
        begin = time.perf_counter()
        with sender:
            send(sender.fileno())
        cat.wait()
        return time.perf_counter() - begin


def _read_round(
    log: Log, path: Path, devnull: int, fetch_bytes: int, batch_bytes: int
) -> list[float]:
    """Seconds to serve the whole log four ways (see the module docstring)."""
    fd = os.open(path, os.O_RDONLY)
    buffer = bytearray(fetch_bytes)
    view = memoryview(buffer)

    def log_to(out_fd: int, start: int, end: int) -> None:
        offset = start // batch_bytes * RECORDS_PER_BATCH
        for _ in range(start, end, fetch_bytes):
            records = log.read(offset, fetch_bytes).records
            sent = 0
            while sent < records.length:
                sent += os.sendfile(
                    out_fd, records.fileno(), records.position + sent, records.length - sent
                )
            offset += records.length // batch_bytes * RECORDS_PER_BATCH

    def plain_to(out_fd: int | None, start: int, end: int) -> None:
        for position in range(start, end, fetch_bytes):
            count = os.preadv(fd, [buffer], position)
            if out_fd is not None:
                _send_all(out_fd, view[:count])

    peers: list[Callable[[int, int], float]] = [
        lambda start, end: _drained_s(lambda out: log_to(out, start, end)),
        lambda start, end: _drained_s(lambda out: plain_to(out, start, end)),
        lambda start, end: _timed_s(lambda: log_to(devnull, start, end)),
        lambda start, end: _timed_s(lambda: plain_to(None, start, end)),
    ]
    times = [0.0] * len(peers)
    size = log.size_bytes
    chunk_bytes = _CHUNK_FETCHES * fetch_bytes
    try:
        for chunk, start in enumerate(range(0, size, chunk_bytes)):
            end = min(start + chunk_bytes, size)
            # Each pair runs in alternating order (log first, then plain first), so
            # neither side always inherits the other's warm-up.
            order = [0, 1, 2, 3] if chunk % 2 == 0 else [1, 0, 3, 2]
            for index in order:
                times[index] += peers[index](start, end)
    finally:
        os.close(fd)
    return times


def _timed_s(run: Callable[[], None]) -> float:
    begin = time.perf_counter()
    run()
    return time.perf_counter() - begin


def _send_all(out_fd: int, data: memoryview) -> None:
    sent = 0
    while sent < len(data):
        sent += os.write(out_fd, data[sent:])


def _report(
    name: str,
    log_s: list[float],
    plain_s: list[float],
    peer: str,
    mib: float,
    subject: str = "log",
) -> tuple[float, float]:
    """Print one workload's line; returns (subject, peer) median MiB/s."""
    ratios = [plain / log for log, plain in zip(log_s, plain_s, strict=True)]
    print(
        f"{name:<24} {subject:<5} {mib / statistics.median(log_s):7.0f} MiB/s   "
        f"{peer:<15} {mib / statistics.median(plain_s):7.0f} MiB/s   "
        f"ratio {statistics.median(ratios):5.2f}  "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    return mib / statistics.median(log_s), mib / statistics.median(plain_s)


def main(argv: list[str]) -> int:
    """Run the append and read workloads; print medians and ratios."""
    parser = argparse.ArgumentParser(prog="tickwheel bench log", description=__doc__)
    parser.add_argument("--batches", type=int, default=DEFAULT_BATCHES)
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--fetch-bytes", type=int, default=DEFAULT_FETCH_BYTES)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    parser.add_argument(
        "--clock",
        choices=sorted(_APPEND_CLOCKS),
        default="cpu",
        help="what times the appends: this thread's CPU time (default) or wall-clock time",
    )
    add_png_argument(parser)
    args = parser.parse_args(argv)

    batches = [make_batch(args.batch_bytes, i) for i in range(args.batches)]
    mib = args.batches * args.batch_bytes / MIB
    print(
        f"tickwheel bench log: {args.batches} batches of {args.batch_bytes} B ({mib:.0f} MiB), "
        f"{args.rounds} rounds, fetches of {args.fetch_bytes} B, appends on the {args.clock} clock"
    )
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-log-", dir=args.dir) as temp:
        directory = Path(temp)
        clock = _APPEND_CLOCKS[args.clock]
        appends = [_append_round(directory, batches, r, clock) for r in range(args.rounds)]
        append = _report(
            f"append ({args.batch_bytes} B batches)",
            [log for log, _, _ in appends],
            [plain for _, plain, _ in appends],
            "os.write",
            mib,
        )
        _report(
            "floor: CRC-32C + write",
            [floor for _, _, floor in appends],
            [plain for _, plain, _ in appends],
            "os.write",
            mib,
            subject="floor",
        )
        log = Log.open(directory / "read-0", LogConfig())
        for batch in batches:
            log.append_as_leader(batch, 0)
        segment = directory / "read-0" / f"{0:020d}.log"
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            reads = [
                _read_round(log, segment, devnull, args.fetch_bytes, args.batch_bytes)
                for _ in range(args.rounds)
            ]
        finally:
            os.close(devnull)
            log.close()
        socket_log, socket_plain = [r[0] for r in reads], [r[1] for r in reads]
        to_socket = _report("read -> socket", socket_log, socket_plain, "preadv+send", mib)
        to_null = _report(
            "read -> /dev/null", [r[2] for r in reads], [r[3] for r in reads], "preadv", mib
        )
    workloads = {"append": append, "read -> socket": to_socket, "read -> /dev/null": to_null}
    save_png(
        args.png,
        f"tickwheel bench log - {args.batches} batches of {args.batch_bytes} B, "
        f"median of {args.rounds} rounds",
        [
            Bars(
                title="tickwheel's log beside plain system calls",
                unit="MiB/s (median)",
                values={
                    "tickwheel Log": {name: ours for name, (ours, _) in workloads.items()},
                    "plain calls (os.write, preadv+send, preadv)": {
                        name: plain for name, (_, plain) in workloads.items()
                    },
                },
            )
        ],
    )
    return 0
