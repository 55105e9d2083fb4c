"""``tickwheel serve [server.properties] [--override NAME=VALUE ...]``: run a broker.

Reads Kafka's ``server.properties`` format (the file is optional; without it every
setting has Kafka's default, listening on ``PLAINTEXT://127.0.0.1:9092``), then
``KAFKA_*`` environment variables as the apache/kafka image maps them
(``KAFKA_LOG_DIRS`` is ``log.dirs``), then ``--override`` settings
(``kafka-server-start.sh``'s flag), each over the one before. It logs where it
listens, and runs until SIGINT or SIGTERM, then stops (``Broker.stop``, bounded in
time whatever the cluster's state: controlled shutdown, answers sent, connections
closed, logs flushed, checkpoints written) and exits with status 0. A second SIGINT or
SIGTERM during the stop flushes the logs and exits at once, with status 128 plus the
signal's number. With ``zookeeper.connect`` set it joins that cluster; otherwise it
runs alone. A bad setting, a listener that cannot be opened (the port is taken, for
Kafka's listener or for ``tickwheel.metrics.port``) or a ``log.dirs`` entry that is not
a usable directory is reported on stderr with exit status 2.

Concurrency: one process, one event loop; the signal handlers run on that loop.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import logging
import os
import signal
import sys
import threading

from tickwheel.cluster import InconsistentClusterIdError
from tickwheel.replica import LogDirError
from tickwheel.server import Broker, BrokerConfig, ConfigError, MetricsPortError, parse_overrides

_log = logging.getLogger(__name__)

_LISTEN_ERRNOS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL})
"""Why a listener cannot be opened: the port is taken, or the address is not ours."""

EXIT_GRACE_S = 1.0
"""How long the process may take to exit once the broker stopped."""
FORCED_EXIT_BASE = 128
"""A second signal's exit status is this plus the signal's number, as a shell reports
a process that the signal ended (130 for SIGINT, 143 for SIGTERM)."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""``--log-level`` choices: the logging module's level names."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel serve",
        description="Run a Kafka-compatible broker, alone or in a cluster (zookeeper.connect).",
    )
    parser.add_argument("properties", nargs="?", help="a server.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a property, overriding the file (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,  # case-insensitive: --log-level debug is DEBUG
        choices=LOG_LEVELS,
        default="INFO",
        help="logging level (default INFO)",
    )
    return parser


async def _serve(config: BrokerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    broker = Broker(config)

    def on_signal(signum: signal.Signals) -> None:
        if not stop.is_set():
            stop.set()
            return
        _log.warning("%s during shutdown: flushing the logs and exiting at once", signum.name)
        broker.flush_logs()
        _exit_now(FORCED_EXIT_BASE + signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    async with broker:
        # Everything loaded so far (modules, kio's schema classes, open logs) lives as
        # long as the process: move it out of the collector's view, so that a full
        # collection scans only what requests allocate and never stalls the loop for
        # the ~100 ms a gen-2 collection of all that takes.
        gc.freeze()
        await stop.wait()
        _log.info("signal received, stopping")
    # The logs are closed. A worker thread still blocked in a call to a ZooKeeper that
    # never answered would keep the interpreter from exiting: it is not waited for long.
    watchdog = threading.Timer(EXIT_GRACE_S, _exit_after_stop)
    watchdog.daemon = True
    watchdog.start()


def _exit_after_stop() -> None:
    _log.warning("threads still blocked %.0f s after the stop; exiting without them", EXIT_GRACE_S)
    _exit_now(0)


def _exit_now(status: int) -> None:
    """Exit at once, without waiting for other threads (the logs are flushed)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv: list[str]) -> int:
    """Run the broker until a signal; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        overrides = parse_overrides(args.override)
        config = BrokerConfig.load(args.properties, os.environ, overrides)
    except (ConfigError, OSError) as exc:
        print(f"tickwheel serve: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config))
    except (ConfigError, LogDirError, InconsistentClusterIdError) as exc:
        print(f"tickwheel serve: {exc}", file=sys.stderr)
        return 2
    except MetricsPortError as exc:
        print(f"tickwheel serve: {exc.strerror}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in _LISTEN_ERRNOS:
            raise
        print(f"tickwheel serve: cannot listen on {config.listeners}: {exc}", file=sys.stderr)
        return 2
    return 0
