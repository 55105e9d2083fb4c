"""``ExpirationReaper``: the thread that keeps a purgatory's timer moving.

Kafka's ``ExpiredOperationReaper`` is a thread named ``ExpirationReaper-<broker>-<name>``
that calls the purgatory's ``advanceClock(200)`` in a loop: each call waits up to
200 ms for the earliest bucket of the timer to expire, expires what is due (the timer's
executor runs the operations), then purges completed operations from the watcher
lists if enough have piled up. This module is that loop; what one step does belongs to
the purgatory (``advance``), so the thread holds no state of its own but a stop flag.

A timer on a clock that cannot wait (``ManualClock``) returns from ``advance_clock`` at
once, which would turn the loop into a busy spin. So when a step expired nothing and
the timer's clock (``now_ms``) did not move across it, the step did not wait, and the
loop rests ``poll_ms`` of real time on its stop event before the next. With the system
clock a step that expires nothing has waited ``poll_ms``, so the clock has moved,
unless its wait was cut short (``wake``, which only ``stop`` calls, or the timer
closed): then a rest costs nothing that matters.

Concurrency: ``start`` and ``stop`` are called by the owner (the purgatory's
constructor and ``shutdown``); ``stop`` may be called from any thread but the reaper's
own. The loop runs only on the reaper thread. A step in progress is never interrupted:
``stop`` waits for it, which takes at most one ``poll_ms`` wait unless ``wake`` makes
the timer return sooner; a rest between steps ends as soon as ``stop`` is called.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

REAPER_POLL_MS = 200
"""How long one step waits for the timer (Kafka's ``advanceClock(200L)``)."""

_MS_PER_S = 1000.0


class ExpirationReaper:
    """A daemon thread calling ``advance(poll_ms)`` until stopped.

    ``advance`` returns whether anything expired; ``now_ms`` reads the clock of the
    timer it advances.
    """

    __slots__ = ("_advance", "_now_ms", "_poll_ms", "_stopping", "_wake", "_worker")

    def __init__(
        self,
        name: str,
        advance: Callable[[int], bool],
        *,
        now_ms: Callable[[], int],
        wake: Callable[[], None],
        poll_ms: int = REAPER_POLL_MS,
    ) -> None:
        self._advance = advance
        self._now_ms = now_ms
        self._wake = wake
        self._poll_ms = poll_ms
        self._stopping = threading.Event()
        # A daemon thread: a program that forgets shutdown() can still exit.
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def name(self) -> str:
        """The thread's name."""
        return self._worker.name

    def start(self) -> None:
        """Start the thread."""
        self._worker.start()

    def stop(self) -> None:
        """Ask the loop to end, wake the timer, and wait for the thread."""
        self._stopping.set()
        self._wake()
        self._worker.join()

    def _run(self) -> None:
        poll_s = self._poll_ms / _MS_PER_S
        while not self._stopping.is_set():
            before_ms = self._now_ms()
            if not self._advance(self._poll_ms) and self._now_ms() == before_ms:
                # The step did not wait (a clock that cannot): rest, do not spin.
                self._stopping.wait(poll_s)

    def __repr__(self) -> str:
        return f"<ExpirationReaper {self._worker.name!r}>"
