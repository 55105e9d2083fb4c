"""``tickwheel bench sasl``: what a new authenticated connection costs.

A ``tickwheel serve`` subprocess (the fuzz command's: a PLAINTEXT and a SASL_PLAINTEXT
listener, PLAIN and both SCRAMs, log under ``--log-parent``) gets ``--connections``
(500) new connections of each kind, one after the other from this process, after
``_WARMUP`` of each:

- PLAINTEXT: connect, ApiVersions v3 -- the floor every client pays;
- PLAIN: connect, ApiVersions, SaslHandshake v1, one SaslAuthenticate v2;
- SCRAM-SHA-256 and SCRAM-SHA-512 (4096 iterations, Kafka's minimum): connect,
  ApiVersions, SaslHandshake, two SaslAuthenticate; the client computes PBKDF2 over the
  password (``tickwheel.security.ScramClient``, as librdkafka does on every login),
  the broker only HMACs from the stored keys.

Reported per kind: the median and p99 time of a whole connection in ms, and beside the
SCRAM rows the client's PBKDF2 alone (measured apart), so the broker's share can be
read off. The SCRAM users are created first through AlterUserScramCredentials on the
PLAINTEXT listener. Record the figures in ``docs/benchmarks.md`` ("SASL logins").

Concurrency: a command on the main thread; the broker is its own process.
"""

from __future__ import annotations

import argparse
import functools
import socket
import statistics
import struct
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.bench.fuzz import SASL_PASSWORD, SASL_USER, BrokerUnderTest, encode_request
from tickwheel.protocol import response_schema
from tickwheel.security import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    PlainClient,
    SaslClient,
    ScramClient,
)

_LOOPBACK = "127.0.0.1"
_TMPFS = "/dev/shm"
_DEFAULT_CONNECTIONS = 500
_WARMUP = 20
_TIMEOUT_S = 10.0
_PERCENTILE_99 = 0.99
_PBKDF2_SAMPLES = 100
_MS_PER_S = 1000.0
_API_VERSIONS = (18, 3)
_HANDSHAKE = (17, 1)
_AUTHENTICATE = (36, 2)
_ALTER_SCRAM = (51, 0)
_SCRAM_SALT = b"tickwheel-bench-salt"
_API_VERSIONS_VALUES = {"client_software_name": "bench", "client_software_version": "1"}


class _Connection:
    """One blocking connection: a request, then its decoded answer."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection((_LOOPBACK, port), timeout=_TIMEOUT_S)
        self._next_id = 0

    def call(self, key_version: tuple[int, int], values: Mapping[str, Any]) -> Any:
        api_key, version = key_version
        self._next_id += 1
        self._sock.sendall(encode_request(api_key, version, values, self._next_id))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        cls = response_schema(api_key, version)
        header_cls: Any = cls.__header_schema__
        _, header_size = entity_reader(header_cls)(frame, 0)
        body, _ = entity_reader(cls)(frame, header_size)
        return body

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._sock.recv(size - len(data))
            if not chunk:
                raise ConnectionResetError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._sock.close()


def _plaintext(port: int) -> None:
    connection = _Connection(port)
    try:
        connection.call(_API_VERSIONS, _API_VERSIONS_VALUES)
    finally:
        connection.close()


def _login(port: int, client: SaslClient) -> None:
    connection = _Connection(port)
    try:
        connection.call(_API_VERSIONS, _API_VERSIONS_VALUES)
        handshake = connection.call(_HANDSHAKE, {"mechanism": client.mechanism})
        if handshake.error_code != ErrorCode.none:
            raise RuntimeError(f"SaslHandshake {client.mechanism}: {handshake.error_code}")
        token: bytes | None = client.initial_response()
        while token is not None:
            answer = connection.call(_AUTHENTICATE, {"auth_bytes": token})
            if answer.error_code != ErrorCode.none:
                raise RuntimeError(f"SaslAuthenticate: {answer.error_message}")
            token = client.evaluate(answer.auth_bytes)
    finally:
        connection.close()


def _scram_login(port: int, mechanism: str) -> None:
    _login(port, ScramClient(mechanism, SASL_USER, SASL_PASSWORD))


def _create_scram_users(port: int) -> None:
    upsertions = [
        {
            "name": SASL_USER,
            "mechanism": mechanism.type_code,
            "iterations": MIN_ITERATIONS,
            "salt": _SCRAM_SALT,
            "salted_password": mechanism.salted_password(
                SASL_PASSWORD, _SCRAM_SALT, MIN_ITERATIONS
            ),
        }
        for mechanism in SCRAM_MECHANISMS.values()
    ]
    connection = _Connection(port)
    try:
        answer = connection.call(_ALTER_SCRAM, {"deletions": [], "upsertions": upsertions})
    finally:
        connection.close()
    if any(result.error_code != ErrorCode.none for result in answer.results):
        raise RuntimeError(f"could not create the SCRAM user: {answer.results}")


def _times_ms(connect: Callable[[], None], count: int) -> list[float]:
    for _ in range(_WARMUP):
        connect()
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        connect()
        times.append((time.perf_counter() - started) * _MS_PER_S)
    return sorted(times)


def _pbkdf2_ms(mechanism: str) -> float:
    scram = SCRAM_MECHANISMS[mechanism]
    started = time.perf_counter()
    for _ in range(_PBKDF2_SAMPLES):
        scram.salted_password(SASL_PASSWORD, _SCRAM_SALT, MIN_ITERATIONS)
    return (time.perf_counter() - started) * _MS_PER_S / _PBKDF2_SAMPLES


def measure(broker: BrokerUnderTest, count: int) -> dict[str, list[float]]:
    """Each kind's connection times in ms, sorted."""
    plaintext, sasl = broker.port, broker.sasl_port
    kinds: dict[str, Callable[[], None]] = {
        "PLAINTEXT (ApiVersions)": lambda: _plaintext(plaintext),
        "PLAIN": lambda: _login(sasl, PlainClient(SASL_USER, SASL_PASSWORD)),
    }
    for name in SCRAM_MECHANISMS:
        kinds[name] = functools.partial(_scram_login, sasl, name)
    return {kind: _times_ms(connect, count) for kind, connect in kinds.items()}


def _p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(len(values) * _PERCENTILE_99))]


def report(times: Mapping[str, list[float]]) -> str:
    """The figures as a Markdown table."""
    lines = [
        "| connection | median (ms) | p99 (ms) | client PBKDF2 (ms) |",
        "|---|---:|---:|---:|",
    ]
    for kind, values in times.items():
        p99 = _p99(values)
        pbkdf2 = f"{_pbkdf2_ms(kind):.2f}" if kind in SCRAM_MECHANISMS else "-"
        lines.append(f"| {kind} | {statistics.median(values):.2f} | {p99:.2f} | {pbkdf2} |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench sasl", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("--connections", type=int, default=_DEFAULT_CONNECTIONS)
    parser.add_argument(
        "--log-parent",
        default=_TMPFS if Path(_TMPFS).is_dir() else None,
        help="where the broker's temporary log directory goes (default /dev/shm)",
    )
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Measure new connections of each kind against a broker subprocess."""
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tickwheel-sasl-", dir=args.log_parent) as log_dir:
        broker = BrokerUnderTest(Path(log_dir), [])
        broker.start()
        try:
            _create_scram_users(broker.port)
            times = measure(broker, args.connections)
        finally:
            broker.stop()
    print(report(times))
    save_png(
        args.png,
        f"tickwheel bench sasl - {args.connections} new connections each",
        [
            Bars(
                title="a new connection, logged in",
                unit="ms",
                values={
                    "median": {kind: statistics.median(v) for kind, v in times.items()},
                    "p99": {kind: _p99(v) for kind, v in times.items()},
                },
            )
        ],
    )
    return 0
