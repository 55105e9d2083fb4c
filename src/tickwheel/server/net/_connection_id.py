"""Which client connection a request came on: an id per connection, told to handlers.

A ``Connection`` takes an id from ``new_connection_id`` and sets it with
``enter_connection`` in its own task before serving; a handler reads it with
``current_connection_id`` (share sessions belong to the connection that opened them).
It is a context variable, so each connection's task sees its own.

Concurrency: event-loop thread; each task has its own context.
"""

from __future__ import annotations

import contextvars
import itertools

_CURRENT_CONNECTION: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "tickwheel_connection", default=None
)
_connection_ids = itertools.count(1)


def new_connection_id() -> int:
    """An id no other connection of this process had."""
    return next(_connection_ids)


def enter_connection(connection_id: int) -> None:
    """Make ``connection_id`` the current task's connection."""
    _CURRENT_CONNECTION.set(connection_id)


def current_connection_id() -> int | None:
    """The id of the connection whose request is being handled (None outside one)."""
    return _CURRENT_CONNECTION.get()
