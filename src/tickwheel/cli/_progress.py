"""A progress indicator on stderr for an admin command's wait that passes one second.

``progress(label)`` wraps one wait (an AdminClient future, a watermark lookup). If
the wait ends within ``DELAY_S`` nothing is printed; after that a spinner with the
label and the seconds waited is redrawn on one stderr line every ``FRAME_S``, and the
line is cleared when the wait ends, so what the command prints next starts clean.
Nothing goes to stdout: ``--format json`` output stays one JSON document.

It shows only when stderr is a terminal, unless ``--progress`` forces it (or
``--no-progress`` silences it); ``configure`` records that choice once per process,
as ``run`` parses one command per process. No library: a spinner needs a thread and
``\\r``.

Concurrency: the spinner runs on a daemon thread of its own, which ``progress``
stops and joins before it returns; it writes to the stream only while the caller
waits, so the two never interleave.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

DELAY_S = 1.0
"""A wait shorter than this shows nothing."""
FRAME_S = 0.1
"""How often the spinner is redrawn."""
_FRAMES = "|/-\\"


class _Choice:
    """``--progress`` (True), ``--no-progress`` (False) or neither (None: a TTY decides)."""

    forced: bool | None = None


def configure(forced: bool | None) -> None:
    """Record ``--progress`` / ``--no-progress`` for this process (None: stderr is a TTY)."""
    _Choice.forced = forced


def _enabled(stream: TextIO) -> bool:
    if _Choice.forced is not None:
        return _Choice.forced
    return stream.isatty()


def _spin(label: str, stream: TextIO, done: threading.Event) -> None:
    if done.wait(DELAY_S):
        return
    started_s = time.monotonic() - DELAY_S
    width = 0
    frame = 0
    while True:
        text = f"{_FRAMES[frame % len(_FRAMES)]} {label} ({time.monotonic() - started_s:.0f} s)"
        stream.write("\r" + text.ljust(width))
        stream.flush()
        width = max(width, len(text))
        frame += 1
        if done.wait(FRAME_S):
            break
    stream.write("\r" + " " * width + "\r")
    stream.flush()


@contextlib.contextmanager
def progress(label: str, *, stream: TextIO | None = None) -> Iterator[None]:
    """Show a spinner with ``label`` on ``stream`` (stderr) if the block passes ``DELAY_S``."""
    out = sys.stderr if stream is None else stream
    if not _enabled(out):
        yield
        return
    done = threading.Event()
    spinner = threading.Thread(
        target=_spin, args=(label, out, done), name="tickwheel-progress", daemon=True
    )
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
