"""``TimedHandler``: the time a request's handler itself ran on the event loop.

Kafka's ``request_percentage`` quota counts the time a request kept a request handler
thread busy, not the time it waited in a purgatory (its thread was free meanwhile).
Here every handler runs on the one event loop, so its busy time is the time of its own
steps: ``TimedHandler`` drives the handler's coroutine as its awaiter would, timing each
step (``send`` or ``throw`` until the next ``yield``) and nothing while it waits, then
hands on whatever it is sent or thrown (a cancellation reaches the handler as it would
in its own task).

Concurrency: event-loop thread; one per request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class TimedHandler(Generic[T]):
    """Awaits ``handling`` and adds up, in ``busy_s``, the time its steps ran."""

    __slots__ = ("_handling", "busy_s")

    def __init__(self, handling: Awaitable[T]) -> None:
        self._handling = handling
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        coroutine = self._handling.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started_s = time.perf_counter()
            try:
                waiting = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
            except StopIteration as done:
                result: T = done.value
                return result
            finally:
                self.busy_s += time.perf_counter() - started_s
            try:
                sent, thrown = (yield waiting), None
            except BaseException as exc:  # each belongs to the handler
                sent, thrown = None, exc
