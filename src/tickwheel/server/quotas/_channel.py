"""``ChannelThrottle``: how long a client's connection stays muted after a throttled answer.

KIP-219: a broker answers a throttled request at once, its ``throttle_time_ms`` telling
the client how long to wait, then mutes the channel for that time, so a client that
ignores the hint is held back all the same. The quota managers find the connection of
the request being handled through a context variable (``enter_channel``, set by the
connection's task before it serves): ``throttle_channel`` pushes its muted-until time
out, and the connection reads no further request until then, waiting on a task of the
timing wheel (``server.net``'s ``Connection``).

Concurrency: event-loop thread; each connection's task has its own context.
"""

from __future__ import annotations

import contextvars


class ChannelThrottle:
    """Until when one connection is muted (broker clock, ms; 0: not muted)."""

    __slots__ = ("muted_until_ms",)

    def __init__(self) -> None:
        self.muted_until_ms = 0

    def throttle(self, until_ms: int) -> None:
        """Keep the channel muted until ``until_ms`` at least."""
        self.muted_until_ms = max(self.muted_until_ms, until_ms)


_CURRENT_CHANNEL: contextvars.ContextVar[ChannelThrottle | None] = contextvars.ContextVar(
    "tickwheel_channel_throttle", default=None
)


def enter_channel(channel: ChannelThrottle) -> None:
    """Make ``channel`` the current task's connection throttle."""
    _CURRENT_CHANNEL.set(channel)


def throttle_channel(throttle_ms: int, now_ms: int) -> None:
    """Mute the connection of the request being handled for ``throttle_ms`` (no-op
    outside a connection, or for 0)."""
    channel = _CURRENT_CHANNEL.get()
    if channel is not None and throttle_ms > 0:
        channel.throttle(now_ms + throttle_ms)
