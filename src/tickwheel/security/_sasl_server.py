"""``SaslServer``: what each mechanism's server side offers the authenticator.

A mechanism server evaluates the client's tokens one at a time (``evaluate`` returns
the token to send back), says when the exchange is ``complete``, and then names the
user who authenticated. A client that fails -- a wrong password, an unknown user, a
malformed or out-of-order message -- makes ``evaluate`` raise
``SaslAuthenticationError``: its text is for the broker's log; the client is told
Kafka's generic message, never whether the user exists.

Concurrency: one server per authentication of one connection, used by that
connection's task only.
"""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """The client failed to authenticate (the message is for the broker's log)."""


class SaslServer(Protocol):
    """The server side of one SASL mechanism's exchange."""

    @property
    def mechanism(self) -> str:
        """The SASL mechanism name (``PLAIN``, ``SCRAM-SHA-256``, ...)."""
        ...

    @property
    def complete(self) -> bool:
        """True once the client has authenticated."""
        ...

    @property
    def username(self) -> str:
        """The authenticated user (complete exchanges only)."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token; ``SaslAuthenticationError`` on failure."""
        ...
