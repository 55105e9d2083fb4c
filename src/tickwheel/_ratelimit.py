"""``RateLimitedLog``: one log line for a condition that keeps happening, not one per event.

A client that sends garbage, or a follower whose leader is down, produces the same
line over and over; at one a second it buries everything else in the log. Each
condition has a key (a client's address, a leader's id). The first event of a key is
logged at once; then at most one line per interval, the interval doubling after each
line that had repeats to report (``INITIAL_INTERVAL_S``, 2 s, 4 s, ... up to
``MAX_INTERVAL_S``), and that line tells what was held back::

    closing connection from 10.0.0.7: ... (repeated 37 times in the last 60 s)

A key quiet for a whole ``MAX_INTERVAL_S`` is forgotten, so the next event is logged
at once again, with no count. Repeats held back when a condition stops are never
reported (no timer runs to flush them): the last line says how often it happened up
to then. At most ``max_keys`` keys are kept; the least recently seen is dropped first,
so a flood of distinct addresses costs bounded memory (a dropped key's next event is
logged as a first one).

Time comes from an injected ``clock`` (seconds, monotonic), so tests need not sleep.

Concurrency: safe from any thread (one lock around the key table; the logging call
runs outside it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

INITIAL_INTERVAL_S = 1.0
"""The shortest gap between two lines of one key."""
MAX_INTERVAL_S = 60.0
"""The longest gap between two lines of one key, and how long a quiet key is kept."""
DEFAULT_MAX_KEYS = 4096
"""Keys kept at most (about 200 bytes each)."""


@dataclass(slots=True)
class _KeyState:
    logged_at_s: float
    last_seen_s: float
    interval_s: float
    held_back: int = 0


class RateLimitedLog:
    """Logs each key's repeating condition with backoff and a count of what was held back."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        initial_interval_s: float = INITIAL_INTERVAL_S,
        max_interval_s: float = MAX_INTERVAL_S,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < initial_interval_s <= max_interval_s:
            raise ValueError("need 0 < initial_interval_s <= max_interval_s")
        self._logger = logger
        self._initial_interval_s = initial_interval_s
        self._max_interval_s = max_interval_s
        self._max_keys = max_keys
        self._clock = clock
        self._keys: OrderedDict[Hashable, _KeyState] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log ``msg % args`` for ``key`` unless its interval holds it back; True if logged."""
        if not self._logger.isEnabledFor(level):
            return False
        suffix = self._admit(key)
        if suffix is None:
            return False
        self._logger.log(level, msg + suffix, *args, stacklevel=2)
        return True

    def _admit(self, key: Hashable) -> str | None:
        """The suffix to log this event with ("" or the repeat count), or None: held back."""
        now_s = self._clock()
        with self._lock:
            state = self._keys.get(key)
            if state is None or now_s - state.last_seen_s >= self._max_interval_s:
                self._keys[key] = _KeyState(now_s, now_s, self._initial_interval_s)
                self._keys.move_to_end(key)
                if len(self._keys) > self._max_keys:
                    self._keys.popitem(last=False)
                return ""
            self._keys.move_to_end(key)
            state.last_seen_s = now_s
            if now_s - state.logged_at_s < state.interval_s:
                state.held_back += 1
                return None
            held_back, since_s = state.held_back, now_s - state.logged_at_s
            state.logged_at_s = now_s
            state.held_back = 0
            if held_back:
                state.interval_s = min(state.interval_s * 2, self._max_interval_s)
                return f" (repeated {held_back} times in the last {since_s:.0f} s)"
            state.interval_s = self._initial_interval_s
            return ""
