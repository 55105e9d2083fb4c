"""``WindowedRate``: a rate over Kafka's sampled windows, and the throttle time it implies.

Kafka measures a client's use with a ``Rate`` over a ``SampledStat``: ``quota.window.num``
samples (11) of ``quota.window.size.seconds`` (1 s) each. A value is added to the current
sample; once a sample is a window old the next one starts (the oldest reused once all
exist); a sample older than all the windows together is reset before it is read. The
rate is the samples' total over the time they cover, from the oldest sample's start to
now, but never less than ``samples - 1`` whole windows, so that one burst right after a
quiet spell does not read as an enormous rate.

When the rate exceeds the quota the client is throttled for the time that brings the
rate back to the quota if it sends nothing meanwhile (Kafka's ``QuotaUtils.throttleTime``):
``(rate - quota) / quota * window`` milliseconds, ``window`` being the span the rate was
measured over.

Concurrency: one event loop; not thread-safe.
"""

from __future__ import annotations

from typing import Final

QUOTA_WINDOW_NUM: Final = 11
"""Kafka's ``quota.window.num``: samples kept per rate."""

QUOTA_WINDOW_SIZE_MS: Final = 1000
"""Kafka's ``quota.window.size.seconds`` (1), in milliseconds."""

_MS_PER_S: Final = 1000.0


class WindowedRate:
    """Values per second over ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_samples", "_starts_ms", "_values", "window_ms")

    def __init__(
        self, samples: int = QUOTA_WINDOW_NUM, window_ms: int = QUOTA_WINDOW_SIZE_MS
    ) -> None:
        self._samples = samples
        self.window_ms = window_ms
        self._starts_ms: list[int] = []
        self._values: list[float] = []
        self._current = -1

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (a negative one takes a recorded value back)."""
        self._purge(now_ms)
        if self._current < 0 or now_ms >= self._starts_ms[self._current] + self.window_ms:
            self._advance(now_ms)
        self._values[self._current] += value

    def rate_per_s(self, now_ms: int) -> float:
        """The rate at ``now_ms``: the samples' total over the span they cover, in seconds."""
        self._purge(now_ms)
        if self._current < 0:
            return 0.0
        return sum(self._values) / (self.span_ms(now_ms) / _MS_PER_S)

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over: since the oldest sample began, and at
        least ``samples - 1`` windows (Kafka's ``Rate.windowSize``)."""
        oldest_ms = min(self._starts_ms, default=now_ms)
        elapsed_ms = now_ms - oldest_ms
        full_windows = elapsed_ms // self.window_ms
        min_full_windows = self._samples - 1
        if full_windows < min_full_windows:
            elapsed_ms += (min_full_windows - full_windows) * self.window_ms
        return elapsed_ms

    def throttle_ms(self, bound_per_s: float, now_ms: int) -> int:
        """How long a client at this rate waits to be back at ``bound_per_s`` (0: not over)."""
        rate = self.rate_per_s(now_ms)
        if rate <= bound_per_s:
            return 0
        return round((rate - bound_per_s) / bound_per_s * self.span_ms(now_ms))

    def _advance(self, now_ms: int) -> None:
        self._current = (self._current + 1) % self._samples
        if self._current >= len(self._starts_ms):
            self._starts_ms.append(now_ms)
            self._values.append(0.0)
        else:
            self._starts_ms[self._current] = now_ms
            self._values[self._current] = 0.0

    def _purge(self, now_ms: int) -> None:
        expire_age_ms = self._samples * self.window_ms
        for index, start_ms in enumerate(self._starts_ms):
            if now_ms - start_ms >= expire_age_ms:
                self._starts_ms[index] = now_ms
                self._values[index] = 0.0
