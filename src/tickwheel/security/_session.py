"""``Session``: the security side of the connection a request came on.

Kafka's ``RequestContext`` carries the principal, the client's address and the listener
with every request; here a ``Connection`` creates one ``Session`` when it starts serving
and makes it current with ``enter_session`` in its own task, so a handler (an
authorization check, SaslAuthenticate, an audit line) reads it with
``current_session``. The session is mutable where the connection's state changes: SASL
authentication (and re-authentication) replaces ``principal``.

Concurrency: event-loop thread; each connection's task has its own context variable, and
only that task mutates its session.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from tickwheel.security._principal import ANONYMOUS, KafkaPrincipal

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
"""Kafka's security protocols, the values of ``listener.security.protocol.map``."""


@dataclass(slots=True)
class Session:
    """Who is on a connection, from where, through which listener."""

    principal: KafkaPrincipal
    client_host: str
    listener_name: str = PLAINTEXT
    security_protocol: str = PLAINTEXT


_CURRENT_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "tickwheel_session", default=None
)


def enter_session(session: Session) -> None:
    """Make ``session`` the current task's session."""
    _CURRENT_SESSION.set(session)


def current_session_or_none() -> Session | None:
    """The session of the request being handled; None outside a connection."""
    return _CURRENT_SESSION.get()


def current_session() -> Session:
    """The session of the request being handled.

    Outside a connection (a broker's own calls, unit tests calling a handler directly)
    it is an anonymous PLAINTEXT session from the loopback address.
    """
    session = _CURRENT_SESSION.get()
    return Session(ANONYMOUS, "127.0.0.1") if session is None else session
