"""``DispatchEffects``: what a fault rule does to a request, done the dispatcher's way.

The fault plan (``tickwheel.faults``) decides which request a rule hits and what
happens to it; the doing needs the broker's parts, which the plan may not import: the
handler (with the client's request quota, as any request), a wait of ``delay_ms`` on
the broker's timing wheel (a ``FaultDelay`` timer of the broker's ``LoopTimers``, so a
``ManualClock`` decides when a delayed answer goes), the throttle of the connection
(its ``throttle_time_ms`` and its muting, as client quotas throttle it), the
``CloseConnectionError`` that closes the connection, and the leader hints of the
broker's own metadata (``server.apis.leader_hints``, as the handlers answer them).

Concurrency: on the broker's event loop, like the dispatcher.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from kio.schema.errors import ErrorCode

from tickwheel.faults import Answer
from tickwheel.protocol import DecodedRequest, LeaderHints, with_throttle_time
from tickwheel.replica import TopicPartition
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis import CloseConnectionError, leader_hints
from tickwheel.server.net._throttled_channel import wait_unmuted
from tickwheel.server.quotas import throttle_channel
from tickwheel.timer import SystemTimer

FAULT_DELAY_TIMER: Final = "FaultDelay"
"""The name of the broker's timer delayed answers wait on."""


class DispatchEffects:
    """The dispatcher's side of ``FaultEffects``."""

    def __init__(
        self,
        context: BrokerContext,
        handle: Callable[[DecodedRequest], Awaitable[Answer]],
        timer: SystemTimer,
    ) -> None:
        self.handle = handle
        self._context = context
        self._timer = timer

    async def wait_ms(self, delay_ms: int) -> None:
        """Return after ``delay_ms`` on the broker's clock."""
        await wait_unmuted(self._timer, delay_ms)

    def throttle(self, request: DecodedRequest, answer: Answer, throttle_ms: int) -> Answer:
        """``answer`` throttled ``throttle_ms``; the connection muted that long."""
        throttle_channel(throttle_ms, self._timer.clock.now_ms())
        if answer is None:
            return None
        return with_throttle_time(answer, request.api_key, request.api_version, throttle_ms)

    def close(self, reason: str) -> Exception:
        """The error that closes the connection."""
        return CloseConnectionError(reason)

    def leader_hints(self, pairs: Sequence[tuple[str, int]], error: ErrorCode) -> LeaderHints:
        """The broker's leader hints for ``pairs`` answered ``error``."""
        return leader_hints(self._context, ((TopicPartition(*pair), error) for pair in pairs))
