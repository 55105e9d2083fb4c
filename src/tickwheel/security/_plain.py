"""SASL/PLAIN's server side (RFC 4616) against the users of a listener's JAAS line.

The client sends one message, ``[authzid] NUL username NUL password`` (UTF-8); the
server answers an empty token and the exchange is complete. The users are the
``user_<name>="<password>"`` options of ``PlainLoginModule`` in the listener's
``sasl.jaas.config`` (Kafka's ``PlainServerCallbackHandler``). As in Kafka, an
authorization id must be empty or the username itself, and the passwords are compared
in constant time. PLAIN sends the password in clear: use it over SASL_SSL outside a
test.

Concurrency: one ``PlainServer`` per authentication, used by one connection's task.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from tickwheel.security._sasl_server import SaslAuthenticationError

PLAIN = "PLAIN"
_FIELDS = 3


class PlainServer:
    """Checks one PLAIN message against ``users`` (name -> password)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._username = ""
        self._complete = False

    @property
    def mechanism(self) -> str:
        """``PLAIN``."""
        return PLAIN

    @property
    def complete(self) -> bool:
        """True once the message checked out."""
        return self._complete

    @property
    def username(self) -> str:
        """The authenticated user."""
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        """Check the client's one message; an empty answer, or ``SaslAuthenticationError``."""
        if self._complete:
            raise SaslAuthenticationError("SASL/PLAIN exchange already complete")
        try:
            parts = token.decode("utf-8").split("\x00")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != _FIELDS:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError(
                f"Authentication failed: Invalid username or password for {username!r}"
            )
        self._username = username
        self._complete = True
        return b""
