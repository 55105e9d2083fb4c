"""The connection defences under attack: what other clients see meanwhile.

Each scenario starts a ``tickwheel serve`` subprocess (``BrokerUnderTest``, default
configuration plus the scenario's own overrides), connects an idempotent confluent-kafka
producer with ``acks=all`` and has one record acknowledged, notes the broker's settled
RSS, then attacks it and, while the attack stands, measures the two things a user
notices: how long a *new* client's ApiVersions takes to be answered, and how long the
*existing* producer's next acks=all record takes to be acknowledged. It also reports the
broker's peak RSS growth, its tracebacks, and the scenario's own facts (a connection
closed at once, connections held back but not refused, ...).

The scenarios:

- ``slow-announcer``: one connection announces a 100 MB request, sends 1 KB and goes quiet.
- ``announcers-and-tricklers``: 200 such connections, plus 8 that each send a whole
  24 MB frame in 1 MiB pieces.
- ``pre-auth-frame``: a 1 MiB frame on the SASL listener before authentication
  (``sasl.server.max.receive.size``, 512 KiB): closed at once.
- ``creation-flood``: 100 connections at once to a listener limited to 20 new
  connections a second (``listener.name.sasl_plaintext.max.connection.creation.rate``):
  the listener takes them at that rate, refusing none, while the other listener's
  clients are served as usual.
- ``per-ip-limit``: 21 connections from 127.0.0.2 with ``max.connections.per.ip=20``:
  the 21st is closed at once, the 20 stay served.

``TARGETS`` are what every scenario must show. ``tickwheel bench fuzz`` runs them after
its frames; the defence test tier (``tests/server/net/test_defences.py``) runs each.

Concurrency: a scenario runs on the calling thread (a helper thread writes the
tricklers' bytes); librdkafka runs its own threads.
"""

from __future__ import annotations

import contextlib
import math
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from tickwheel.bench._served import (
    API_VERSIONS_V0,
    LOOPBACK,
    BrokerUnderTest,
    answers_api_versions,
    closed_within,
)

API_VERSIONS_TARGET_MS = 500.0
ACK_TARGET_MS = 2000.0
RSS_GROWTH_TARGET_MIB = 400.0
TARGETS = (
    f"a new client's ApiVersions within {API_VERSIONS_TARGET_MS:.0f} ms; the existing "
    f"producer's acks=all record within {ACK_TARGET_MS:.0f} ms; peak RSS within baseline + "
    f"{RSS_GROWTH_TARGET_MIB:.0f} MiB; no traceback"
)

_MIB = 1024 * 1024
_ANNOUNCED_BYTES = 104_857_600  # the largest request socket.request.max.bytes allows
_SENT_BYTES = 1024
_ANNOUNCERS = 200
_TRICKLERS = 8
_TRICKLE_FRAME_BYTES = 24 * _MIB
_TRICKLE_PIECE_BYTES = _MIB
_PRE_AUTH_FRAME_BYTES = _MIB
_FLOOD_CONNECTIONS = 100
_FLOOD_RATE_PER_S = 20
_PER_IP_LIMIT = 20
_OTHER_HOST = "127.0.0.2"  # a second loopback address: another client host
_PROBE_TIMEOUT_S = 10.0
_CLOSED_WITHIN_S = 1.0
_TOPIC = "defences"
_MS_PER_S = 1000.0
_POOL_USED = "kafka_network_SocketServer_MemoryPoolUsed"
_FRAME_HEADER_BYTES = 10
_OTHER_REQUESTS_BYTES = 64 * 1024  # room for a request of another client at the time


@dataclass
class DefenceResult:
    """What one scenario's attack did to everyone else."""

    scenario: str
    api_versions_ms: float = math.inf
    ack_ms: float = math.inf
    rss_growth_mib: float = math.inf
    tracebacks: int = 0
    warnings: list[str] = field(default_factory=list)
    facts: dict[str, bool] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        """Whether the targets and every fact of the scenario hold."""
        return (
            self.api_versions_ms <= API_VERSIONS_TARGET_MS
            and self.ack_ms <= ACK_TARGET_MS
            and self.rss_growth_mib <= RSS_GROWTH_TARGET_MIB
            and self.tracebacks == 0
            and all(self.facts.values())
        )


def _frame_prefix(size_bytes: int) -> bytes:
    """A size prefix and a Produce v9 header, as a real request would start."""
    return struct.pack(">ihhih", size_bytes, 0, 9, 7, -1)


def _connect(port: int, source_host: str = LOOPBACK) -> socket.socket:
    return socket.create_connection((LOOPBACK, port), source_address=(source_host, 0))


class _Producer:
    """An idempotent acks=all producer connected before the attack."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        if not math.isfinite(self.ack_ms()):
            raise RuntimeError("the producer's first record was not acknowledged")

    def ack_ms(self) -> float:
        """How long one record takes to be acknowledged (``inf``: not within the timeout)."""
        acked = threading.Event()

        def delivered(error: KafkaError | None, _: Message) -> None:
            if error is None:
                acked.set()

        started = time.monotonic()
        self._producer.produce(_TOPIC, b"still here", partition=0, on_delivery=delivered)
        deadline = started + _PROBE_TIMEOUT_S
        while not acked.is_set() and time.monotonic() < deadline:
            self._producer.poll(0.005)
        return (time.monotonic() - started) * _MS_PER_S if acked.is_set() else math.inf

    def close(self) -> None:
        self._producer.flush(_PROBE_TIMEOUT_S)


def _api_versions_ms(port: int) -> float:
    started = time.monotonic()
    if not answers_api_versions(port, _PROBE_TIMEOUT_S):
        return math.inf
    return (time.monotonic() - started) * _MS_PER_S


Attack = Callable[[BrokerUnderTest, DefenceResult], Iterator[None]]
"""A scenario: sets up its attack, yields while it stands (the probes run then), and
cleans up after; it records its own facts in the result."""


def _slow_announcers(count: int) -> Attack:
    def attack(broker: BrokerUnderTest, result: DefenceResult) -> Iterator[None]:
        sockets = []
        try:
            for _ in range(count):
                sock = _connect(broker.port)
                sockets.append(sock)
                sock.sendall(_frame_prefix(_ANNOUNCED_BYTES) + bytes(_SENT_BYTES))
            # The broker holds what arrived (each announcer's first slice), not what was
            # announced: once it has read them all, the pool holds about count x 1 KB.
            deadline = time.monotonic() + _PROBE_TIMEOUT_S
            held = broker.metric(_POOL_USED)
            while held < count * _SENT_BYTES and time.monotonic() < deadline:
                time.sleep(0.05)
                held = broker.metric(_POOL_USED)
            result.facts["the pool holds the bytes that arrived, not the ones announced"] = (
                count * _SENT_BYTES
                <= held
                <= count * (_SENT_BYTES + _FRAME_HEADER_BYTES) + _OTHER_REQUESTS_BYTES
            )
            yield
        finally:
            for sock in sockets:
                sock.close()

    return attack


def _announcers_and_tricklers(broker: BrokerUnderTest, result: DefenceResult) -> Iterator[None]:
    stop = threading.Event()
    tricklers = [_connect(broker.port) for _ in range(_TRICKLERS)]

    def trickle() -> None:
        piece = bytes(_TRICKLE_PIECE_BYTES)
        first = _frame_prefix(_TRICKLE_FRAME_BYTES)
        remaining = [_TRICKLE_FRAME_BYTES + 4] * _TRICKLERS
        with contextlib.suppress(OSError):
            while any(remaining) and not stop.is_set():
                for index, sock in enumerate(tricklers):
                    if not remaining[index]:
                        continue
                    head = first if remaining[index] == _TRICKLE_FRAME_BYTES + 4 else b""
                    data = (head + piece)[: remaining[index]]
                    sock.sendall(data)
                    remaining[index] -= len(data)
        result.facts["the tricklers' frames were all sent"] = not any(remaining)

    writer = threading.Thread(target=trickle, name="trickler", daemon=True)
    with contextlib.ExitStack() as stack:
        for sock in tricklers:
            stack.callback(sock.close)
        announcers = _slow_announcers(_ANNOUNCERS)(broker, result)
        next(announcers)
        writer.start()
        try:
            yield
            writer.join(_PROBE_TIMEOUT_S * 3)
        finally:
            stop.set()
            with contextlib.suppress(StopIteration):
                next(announcers)


def _pre_auth_frame(broker: BrokerUnderTest, result: DefenceResult) -> Iterator[None]:
    with _connect(broker.sasl_port) as sock:
        sock.sendall(_frame_prefix(_PRE_AUTH_FRAME_BYTES) + bytes(_SENT_BYTES))
        result.facts["closed at once"] = closed_within(sock, _CLOSED_WITHIN_S)
        yield
    result.facts["a WARNING names sasl.server.max.receive.size"] = broker.log.warned(
        "sasl.server.max.receive.size", _PROBE_TIMEOUT_S
    )


def _creation_flood(broker: BrokerUnderTest, result: DefenceResult) -> Iterator[None]:
    started = time.monotonic()
    flood = []
    answered_at: list[float] = []
    try:
        for _ in range(_FLOOD_CONNECTIONS):
            sock = socket.socket()
            sock.bind((_OTHER_HOST, 0))
            sock.setblocking(False)
            sock.connect_ex((LOOPBACK, broker.sasl_port))
            flood.append(sock)
        yield
        pending = dict(enumerate(flood))
        deadline = started + _FLOOD_CONNECTIONS / _FLOOD_RATE_PER_S + _PROBE_TIMEOUT_S
        sent: set[int] = set()
        while pending and time.monotonic() < deadline:
            for index, sock in list(pending.items()):
                with contextlib.suppress(BlockingIOError, OSError):
                    if index not in sent:
                        sock.send(API_VERSIONS_V0)
                        sent.add(index)
                    if sock.recv(4):
                        answered_at.append(time.monotonic() - started)
                        del pending[index]
            time.sleep(0.01)
        first_second = sum(1 for at in answered_at if at < 1.0)
        result.facts["every flooding connection was served in the end"] = not pending
        # A full bucket (one second's worth) plus one second's refill, and some slack.
        result.facts[f"at most {_FLOOD_RATE_PER_S}/s taken after the first burst"] = (
            first_second <= 2 * _FLOOD_RATE_PER_S + 5
        )
        result.facts["the flood took as long as its rate says"] = bool(answered_at) and (
            max(answered_at) >= (_FLOOD_CONNECTIONS - 2 * _FLOOD_RATE_PER_S) / _FLOOD_RATE_PER_S
        )
    finally:
        for sock in flood:
            sock.close()


def _per_ip_limit(broker: BrokerUnderTest, result: DefenceResult) -> Iterator[None]:
    held = []
    try:
        for _ in range(_PER_IP_LIMIT):
            sock = _connect(broker.port, _OTHER_HOST)
            held.append(sock)
        served = 0
        for sock in held:
            sock.sendall(API_VERSIONS_V0)
            sock.settimeout(_PROBE_TIMEOUT_S)
            served += len(sock.recv(4)) == 4
        extra = _connect(broker.port, _OTHER_HOST)
        held.append(extra)
        result.facts[f"the first {_PER_IP_LIMIT} are served"] = served == _PER_IP_LIMIT
        result.facts[f"connection {_PER_IP_LIMIT + 1} is closed at once"] = closed_within(
            extra, _CLOSED_WITHIN_S
        )
        yield
        result.facts["a WARNING names max.connections.per.ip"] = broker.log.warned(
            "max.connections.per.ip", _PROBE_TIMEOUT_S
        )
    finally:
        for sock in held:
            sock.close()


SCENARIOS: dict[str, tuple[list[str], Attack]] = {
    "slow-announcer": ([], _slow_announcers(1)),
    "announcers-and-tricklers": ([], _announcers_and_tricklers),
    "pre-auth-frame": ([], _pre_auth_frame),
    "creation-flood": (
        [f"listener.name.sasl_plaintext.max.connection.creation.rate={_FLOOD_RATE_PER_S}"],
        _creation_flood,
    ),
    "per-ip-limit": ([f"max.connections.per.ip={_PER_IP_LIMIT}"], _per_ip_limit),
}
"""Each scenario's broker overrides and attack."""


def run_scenario(name: str, log_parent: str | None = None) -> DefenceResult:
    """Run scenario ``name`` against a broker of its own."""
    overrides, attack = SCENARIOS[name]
    result = DefenceResult(name)
    with tempfile.TemporaryDirectory(prefix="tickwheel-defence-", dir=log_parent) as log_dir:
        broker = BrokerUnderTest(Path(log_dir), overrides)
        broker.start()
        try:
            producer = _Producer(broker.bootstrap_servers)
            try:
                baseline_bytes = broker.settled_rss_bytes()
                broker.peak_rss_bytes = 0
                attacking = attack(broker, result)
                next(attacking)
                result.api_versions_ms = _api_versions_ms(broker.port)
                result.ack_ms = producer.ack_ms()
                with contextlib.suppress(StopIteration):
                    next(attacking)
                broker.settled_rss_bytes()
                result.rss_growth_mib = (broker.peak_rss_bytes - baseline_bytes) / _MIB
            finally:
                producer.close()
        finally:
            broker.stop()
        result.tracebacks = len(broker.log.tracebacks)
        result.warnings = list(broker.log.warnings)
    return result


def report(results: list[DefenceResult]) -> str:
    """The results as a Markdown table, with each scenario's facts below it."""
    lines = [
        f"Targets: {TARGETS}.",
        "",
        "| scenario | new client's ApiVersions (ms) | existing producer's ack (ms) "
        "| peak RSS growth (MiB) | tracebacks | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    lines.extend(
        f"| {result.scenario} | {result.api_versions_ms:.1f} | {result.ack_ms:.1f} "
        f"| {result.rss_growth_mib:.0f} | {result.tracebacks} "
        f"| {'yes' if result.met else 'NO'} |"
        for result in results
    )
    for result in results:
        for fact, holds in result.facts.items():
            lines.append(f"- {result.scenario}: {fact}: {'yes' if holds else 'NO'}")
    return "\n".join(lines)
