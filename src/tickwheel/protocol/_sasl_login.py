"""A client's SASL login, sans-IO: the frames to send, judged answer by answer.

A SASL_PLAINTEXT or SASL_SSL listener answers nothing but ApiVersions and the login
until the client has authenticated, so Kafka's clients log in right after connecting:
SaslHandshake v1 naming the mechanism, then SaslAuthenticate v2 carrying the
mechanism client's tokens until it has nothing more to send (for SCRAM, after it
checked the server's signature). ``SaslLogin`` is that exchange over a
``ClientConnection``: ``start`` is the handshake frame, and ``next_frame`` takes each
answer's body and returns the next frame to send, or None once logged in; then
``lifetime_ms`` is the session lifetime the broker granted
(``connections.max.reauth.ms``; 0: no limit). A refused mechanism or a failed login is
a ``SaslLoginError``; the mechanism client's own errors pass through. The I/O shells
run the loop (``BlockingClient.login``, ``AsyncClient.login``).

The mechanism client is anything with ``mechanism``, ``initial_response`` and
``evaluate`` (``SaslClient``); ``tickwheel.security`` makes PLAIN and SCRAM ones.

Concurrency: one login per connection, on the connection's thread or task.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._client import ClientConnection
from tickwheel.protocol._errors import ProtocolError

SASL_HANDSHAKE_VERSION: Final = 1
SASL_AUTHENTICATE_VERSION: Final = 2
_MS_PER_S: Final = 1000.0


class SaslLoginError(ProtocolError):
    """The broker refused the SASL mechanism or the credentials."""


class SaslClient(Protocol):
    """The client side of one SASL exchange."""

    @property
    def mechanism(self) -> str:
        """The SASL mechanism name."""
        ...

    def initial_response(self) -> bytes:
        """The first token to send."""
        ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token after the server's ``challenge``; None when done."""
        ...


class SaslLogin:
    """One SASL login over ``connection`` with ``client``; see the module doc."""

    def __init__(self, connection: ClientConnection, client: SaslClient, *, peer: str) -> None:
        """A login to the broker ``peer`` names in errors."""
        self._connection = connection
        self._client = client
        self._peer = peer
        self._handshaken = False
        self.lifetime_ms = 0

    def start(self) -> bytes:
        """The SaslHandshake frame."""
        return self._connection.send(
            ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": self._client.mechanism}
        )

    def next_frame(self, answer: Any) -> bytes | None:
        """The frame to send after ``answer`` (the body of the last frame's response),
        or None when the login is done."""
        if not self._handshaken:
            if answer.error_code != ErrorCode.none:
                raise SaslLoginError(
                    f"{self._peer} refused SASL mechanism {self._client.mechanism} "
                    f"({answer.error_code.name}; it offers {list(answer.mechanisms)})"
                )
            self._handshaken = True
            return self._authenticate(self._client.initial_response())
        if answer.error_code != ErrorCode.none:
            raise SaslLoginError(f"SASL login to {self._peer} failed: {answer.error_message}")
        self.lifetime_ms = round(answer.session_lifetime.total_seconds() * _MS_PER_S)
        token = self._client.evaluate(answer.auth_bytes)
        return None if token is None else self._authenticate(token)

    def _authenticate(self, token: bytes) -> bytes:
        return self._connection.send(
            ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token}
        )
