"""``BrokerUnderTest``: ``tickwheel serve`` as a subprocess a benchmark can hurt.

The broker listens on two loopback listeners (PLAINTEXT and SASL_PLAINTEXT with PLAIN
and both SCRAMs, ``SASL_BROKER_PROPERTIES``), on a log directory the caller owns, with
any extra ``--override``. A thread drains its stderr and counts lines by level and its
tracebacks (``BrokerLog``); ``rss_bytes`` reads its resident memory from ``/proc``;
``alive`` counts a death and starts it again. ``answers_api_versions`` is the liveness
probe: a fresh connection's ApiVersions answered within a timeout.

Concurrency: used from one thread; the stderr drainer is a daemon thread of its own
that only appends to ``log`` and sets the ports once. ``BrokerLog.warned`` waits on a
condition the drainer notifies, so a check for a line the broker is about to write
does not race the drainer.
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
RSS_SETTLE_S = 1.0
RSS_POLL_S = 0.1
SASL_USER, SASL_PASSWORD = "fuzz-user", "fuzz-secret"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_BROKER_PROPERTIES: Mapping[str, str] = {
    "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SASL_USER}="{SASL_PASSWORD}";'
    ),
}
"""What the SASL listener of the broker under test accepts (listener ``SASL_PLAINTEXT``)."""

_LISTENING = re.compile(r"listening on \S+:(\d+)")
_SASL_LISTENING = re.compile(r":(\d+) \(SASL_PLAINTEXT\)")
_METRICS_LISTENING = re.compile(r"metrics on http://\S+:(\d+)/metrics")
_LOG_LEVEL = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
_TRACEBACK = "Traceback (most recent call last)"
API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)
"""A framed ApiVersions v0 (correlation id 1, no client id): the probe every Kafka
broker answers, before any login."""


@dataclass
class BrokerLog:
    """What the broker wrote to stderr: counts by level, and its tracebacks."""

    lines: int = 0
    by_level: dict[str, int] = field(default_factory=dict)
    tracebacks: list[list[str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    _in_traceback: bool = False
    _fed: threading.Condition = field(default_factory=threading.Condition)

    def warned(self, text: str, timeout_s: float) -> bool:
        """Whether a WARNING line containing ``text`` arrives within ``timeout_s``."""
        with self._fed:
            return self._fed.wait_for(
                lambda: any(text in line for line in self.warnings), timeout_s
            )

    def feed(self, line: str) -> None:
        """Count one line of the broker's stderr."""
        with self._fed:
            self._count(line)
            self._fed.notify_all()

    def _count(self, line: str) -> None:
        self.lines += 1
        if _TRACEBACK in line:
            self.tracebacks.append([line])
            self._in_traceback = True
            return
        level = _LOG_LEVEL.match(line)
        if level is not None:
            self._in_traceback = False
            self.by_level[level[1]] = self.by_level.get(level[1], 0) + 1
            if level[1] == "WARNING":
                self.warnings.append(line)
        elif self._in_traceback:
            self.tracebacks[-1].append(line)


class BrokerUnderTest:
    """``tickwheel serve`` as a subprocess; restarted after a death, its stderr counted."""

    def __init__(self, log_dir: Path, overrides: list[str]) -> None:
        self._log_dir = log_dir
        self._overrides = overrides
        self.log = BrokerLog()
        self.deaths = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._drainer: threading.Thread | None = None
        self.port = 0
        self.sasl_port = 0
        self.metrics_port = 0
        self.peak_rss_bytes = 0

    def start(self) -> None:
        """Start the broker and wait until it answers."""
        command = [sys.executable, "-m", "tickwheel.cli", "serve"]
        for override in (
            f"listeners=PLAINTEXT://{LOOPBACK}:0,SASL_PLAINTEXT://{LOOPBACK}:0",
            *(f"{name}={value}" for name, value in SASL_BROKER_PROPERTIES.items()),
            f"log.dirs={self._log_dir}",
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
            "tickwheel.metrics.port=0",
            *self._overrides,
        ):
            command += ["--override", override]
        process = subprocess.Popen(command, stderr=subprocess.PIPE)
        self.process = process
        listening = threading.Event()
        self._drainer = threading.Thread(target=self._drain, args=(process, listening), daemon=True)
        self._drainer.start()
        if not listening.wait(READY_TIMEOUT_S):
            raise RuntimeError("tickwheel serve did not start listening")
        if not answers_api_versions(self.port, READY_TIMEOUT_S):
            raise RuntimeError("tickwheel serve does not answer")

    def _drain(self, process: subprocess.Popen[bytes], listening: threading.Event) -> None:
        assert process.stderr is not None
        with process.stderr:
            for raw in process.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.log.feed(line)
                metrics = _METRICS_LISTENING.search(line)
                if metrics:
                    self.metrics_port = int(metrics[1])
                found = _LISTENING.search(line)
                if found and not listening.is_set():
                    self.port = int(found[1])
                    sasl = _SASL_LISTENING.search(line)
                    self.sasl_port = int(sasl[1]) if sasl else 0
                    listening.set()

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the broker."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``host:port`` of the broker's SASL_PLAINTEXT listener."""
        return f"{LOOPBACK}:{self.sasl_port}"

    def metric(self, name: str) -> float:
        """The value of the metric line that starts with ``name`` (labels included)."""
        url = f"http://{LOOPBACK}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=READY_TIMEOUT_S) as answer:
            text: str = answer.read().decode()
        for line in text.splitlines():
            if line.startswith((name + " ", name + "{")):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)

    def alive(self) -> bool:
        """Whether the process runs; a dead one is counted and started again."""
        assert self.process is not None
        if self.process.poll() is None:
            return True
        self.deaths += 1
        self.start()
        return False

    def rss_bytes(self) -> int:
        """The broker's resident memory now (and the peak seen, in ``peak_rss_bytes``)."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss = int(fields["VmRSS"].split()[0]) * 1024
        self.peak_rss_bytes = max(self.peak_rss_bytes, int(fields["VmHWM"].split()[0]) * 1024)
        return rss

    def settled_rss_bytes(self) -> int:
        """The broker's RSS once it has not grown for ``RSS_SETTLE_S``."""
        rss = self.rss_bytes()
        steady_since = time.monotonic()
        deadline = steady_since + READY_TIMEOUT_S
        while time.monotonic() - steady_since < RSS_SETTLE_S and time.monotonic() < deadline:
            time.sleep(RSS_POLL_S)
            now = self.rss_bytes()
            if now > rss:
                rss, steady_since = now, time.monotonic()
        return rss

    def stop(self) -> None:
        """SIGTERM, then wait."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.rss_bytes()
        self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self._drainer is not None:
            self._drainer.join(STOP_TIMEOUT_S)


def answers_api_versions(port: int, timeout_s: float, host: str = LOOPBACK) -> bool:
    """Whether a fresh connection gets an answer to ApiVersions v0 within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as sock:
                sock.sendall(API_VERSIONS_V0)
                size: int = struct.unpack(">i", receive(sock, 4))[0]
                return len(receive(sock, size)) == size
        except OSError:
            time.sleep(RSS_POLL_S)
    return False


def receive(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock`` (``ConnectionResetError`` if it closes first)."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionResetError("the broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def closed_within(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the broker closes ``sock`` within ``timeout_s`` (what it sent is read)."""
    deadline = time.monotonic() + timeout_s
    try:
        while (left_s := deadline - time.monotonic()) > 0:
            sock.settimeout(left_s)
            if sock.recv(4096) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False
