"""``ZooKeeperServer``: a standalone Apache ZooKeeper for tests and the local cluster.

It runs Debian's ``zookeeper`` package (3.8; ``apt-get install zookeeper``) with the
system's Java: ``org.apache.zookeeper.server.quorum.QuorumPeerMain`` with the package's
jar (whose manifest lists its dependencies) and its configuration folder (log4j) on
the class path, reading a minimal ``zoo.cfg`` written into the data directory:
``tickTime``, ``dataDir``, ``clientPort`` and ``clientPortAddress`` (loopback unless
told otherwise), the admin HTTP server off, and the ``ruok``/``srvr`` four-letter
words allowed. ``start`` returns once ``srvr`` reports a serving mode (``ruok`` answers
``imok`` before the server accepts sessions, so it is not enough);
``stop`` ends the process it started, by its PID (SIGTERM, then SIGKILL), never by
name. It is never installed or started as a system service.

``tick_ms`` bounds the session timeouts a client may get (2 to 20 ticks): tests use a
short tick so that a killed broker's registration expires in seconds.

Concurrency: one owner thread; not thread-safe.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Self

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEFAULT_TICK_MS = 2000
DEFAULT_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0
_POLL_INTERVAL_S = 0.05
_COMMAND_TIMEOUT_S = 1.0
_SERVING = b"Mode:"
_ANSWER_BYTES = 64


class ZooKeeperError(RuntimeError):
    """ZooKeeper is not installed, or did not start."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, word: bytes) -> bytes:
    """Send a four-letter-word command and return the answer (empty if refused)."""
    with socket.create_connection((host, port), timeout=_COMMAND_TIMEOUT_S) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(_ANSWER_BYTES):
            chunks.append(chunk)
        return b"".join(chunks)


class ZooKeeperServer:
    """A ZooKeeper process on ``host:port`` with its data in ``data_dir``."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_ms: int = DEFAULT_TICK_MS,
        java: str = "java",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.tick_ms = tick_ms
        self._java = java
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The ``zookeeper.connect`` string for this server (no chroot)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return None if self._process is None else self._process.pid

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.data_dir.resolve()}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        return config

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Self:
        """Start the server and wait until it serves requests."""
        if not ZOOKEEPER_JAR.exists():
            raise ZooKeeperError(f"{ZOOKEEPER_JAR} not found: install Debian's zookeeper package")
        if shutil.which(self._java) is None:
            raise ZooKeeperError(f"{self._java!r} not found: install a Java runtime (17)")
        config = self._write_config()
        class_path = os.pathsep.join([str(ZOOKEEPER_CONF_DIR), str(ZOOKEEPER_JAR)])
        log_path = self.data_dir / "zookeeper.out"
        with log_path.open("ab") as log_file:
            self._process = subprocess.Popen(
                [
                    self._java,
                    "-cp",
                    class_path,
                    "-Dzookeeper.root.logger=WARN,CONSOLE",
                    f"-Dzookeeper.log.dir={self.data_dir.resolve()}",
                    MAIN_CLASS,
                    str(config),
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # Its own session: a terminal's Ctrl-C must not kill it before the
                # brokers that use it have stopped.
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with {self._process.returncode}; see {log_path}"
                )
            if self.is_serving():
                return self
            time.sleep(_POLL_INTERVAL_S)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not answer on {self.connect} in {timeout_s} s")

    def is_serving(self) -> bool:
        """Whether the server accepts sessions (``srvr`` reports its mode)."""
        try:
            return _SERVING in four_letter_word(self.host, self.port, b"srvr")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the process this object started (SIGTERM, then SIGKILL); idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
