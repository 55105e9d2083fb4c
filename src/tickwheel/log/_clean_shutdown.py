"""The clean shutdown marker: whether a broker's logs were closed cleanly last time.

Kafka's ``CleanShutdownFileHandler``: a broker that stops cleanly (its logs flushed
and closed) writes ``.kafka_cleanshutdown`` into every log directory, holding
``{"version": 0, "brokerEpoch": N}``, the broker epoch it stopped at. At start-up
``take_clean_shutdown`` reads the markers and deletes them, so a marker speaks only
for the stop just before: a broker killed afterwards leaves none. The epoch read
goes to the controller with the broker's registration; -1 (a directory without a
readable marker) says the shutdown was unclean, and the controller takes the broker
out of every eligible leader replica set (KIP-966): records it acknowledged may be
gone.

Concurrency: plain file operations on the caller's thread; called once at start and
once at stop.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from tickwheel.log._checkpoint import write_atomically

_log = logging.getLogger(__name__)
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
NO_BROKER_EPOCH: Final = -1
"""What ``take_clean_shutdown`` answers after an unclean shutdown."""
_VERSION: Final = 0


def write_clean_shutdown(log_dirs: Sequence[Path], broker_epoch: int) -> None:
    """Mark each of ``log_dirs`` (the online ones) as cleanly shut down at
    ``broker_epoch`` (synced). A directory the marker cannot be written to is logged
    and left without one: the next start counts the shutdown as unclean, as it must."""
    document = json.dumps({"version": _VERSION, "brokerEpoch": broker_epoch}).encode("utf-8")
    for log_dir in log_dirs:
        try:
            write_atomically(str(log_dir), CLEAN_SHUTDOWN_FILE, document)
        except OSError as error:
            _log.warning("no clean shutdown marker written in %s: %s", log_dir, error)


def _read(path: Path) -> int | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        _log.debug("no clean shutdown marker in %s: %r", path, exc)
        return None
    epoch = document.get("brokerEpoch") if isinstance(document, dict) else None
    return epoch if isinstance(epoch, int) else None


def take_clean_shutdown(log_dirs: Sequence[Path]) -> int:
    """The broker epoch of a clean last shutdown (the lowest if the directories
    differ), or -1 if any directory lacks a readable marker; the markers are deleted."""
    epochs = [_read(log_dir / CLEAN_SHUTDOWN_FILE) for log_dir in log_dirs]
    for log_dir in log_dirs:
        with contextlib.suppress(FileNotFoundError):
            (log_dir / CLEAN_SHUTDOWN_FILE).unlink()
    if not epochs or any(epoch is None for epoch in epochs):
        return NO_BROKER_EPOCH
    return min(epoch for epoch in epochs if epoch is not None)
