"""The client side of PLAIN and SCRAM, for this broker's own connections to others.

When the inter-broker listener is SASL_*, a broker authenticates like any Kafka
client: ``initial_response()`` is the first token it sends, ``evaluate(challenge)``
the next one (None once nothing is left to send), which is the protocol layer's
``SaslClient`` that ``SaslLogin`` drives. ``PlainClient`` sends one message;
``ScramClient`` sends client-first and client-final and then checks the server's
signature (``v=``), so a server that does not hold the credential is refused too. A
server-final ``e=<reason>`` (RFC 5802's error form, which other servers send) and a
wrong signature raise ``SaslClientError``, and so does a server-first message asking
for fewer iterations than ``MIN_ITERATIONS`` (Kafka's client refuses it too: a weak
hash) or more than ``MAX_ITERATIONS`` (more than Kafka stores; refused before running
PBKDF2, so a server cannot make the client spin).

Concurrency: one client per authentication, used by one task.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from tickwheel.protocol import SaslClient
from tickwheel.security._plain import PLAIN
from tickwheel.security._scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramError,
    b64decode,
    b64encode,
    encode_saslname,
    new_nonce,
    parse_attributes,
    xor,
)

_GS2_HEADER = "n,,"


class SaslClientError(Exception):
    """The server's answers did not authenticate it, or could not be read."""


class PlainClient:
    """PLAIN: one message with the username and password."""

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password

    @property
    def mechanism(self) -> str:
        """``PLAIN``."""
        return PLAIN

    def initial_response(self) -> bytes:
        """``NUL username NUL password``."""
        return f"\x00{self._username}\x00{self._password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        """Nothing more to send."""
        return None


class ScramClient:
    """SCRAM-SHA-256 or SCRAM-SHA-512 with a username and password."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce_factory: Callable[[], str] = new_nonce,
    ) -> None:
        self._mechanism = SCRAM_MECHANISMS[mechanism]
        self._password = password
        self._client_first_bare = f"n={encode_saslname(username)},r={nonce_factory()}"
        self._server_signature: bytes | None = None
        self._done = False

    @property
    def mechanism(self) -> str:
        """The SCRAM mechanism name."""
        return self._mechanism.name

    def initial_response(self) -> bytes:
        """client-first."""
        return (_GS2_HEADER + self._client_first_bare).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        """client-final after server-first; None after a verified server-final."""
        if self._done:
            return None
        try:
            message = challenge.decode("utf-8")
            if self._server_signature is None:
                return self._client_final(message).encode()
            self._check_server_final(message)
        except (ScramError, UnicodeDecodeError) as exc:
            raise SaslClientError(f"SCRAM: {exc}") from exc
        self._done = True
        return None

    def _client_final(self, server_first: str) -> str:
        attributes = dict(parse_attributes(server_first))
        if "e" in attributes:
            raise SaslClientError(f"the server refused: {attributes['e']}")
        client_nonce = self._client_first_bare.rpartition(",r=")[2]
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i")
        if not nonce.startswith(client_nonce) or len(nonce) == len(client_nonce):
            raise SaslClientError("the server's nonce does not extend the client's")
        if salt is None or iterations is None or not iterations.isdigit():
            raise SaslClientError("server-first message without salt or iterations")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise SaslClientError(
                f"the server asks for {iterations} iterations, outside"
                f" [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
            )
        mechanism = self._mechanism
        salted = mechanism.salted_password(self._password, b64decode(salt), int(iterations))
        without_proof = f"c={b64encode(_GS2_HEADER.encode())},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = mechanism.client_key(salted)
        signature = mechanism.hmac(mechanism.digest(client_key), auth_message)
        self._server_signature = mechanism.hmac(mechanism.server_key(salted), auth_message)
        return f"{without_proof},p={b64encode(xor(client_key, signature))}"

    def _check_server_final(self, server_final: str) -> None:
        attributes = dict(parse_attributes(server_final))
        if "e" in attributes:
            raise SaslClientError(f"the server refused: {attributes['e']}")
        assert self._server_signature is not None
        if not hmac.compare_digest(b64decode(attributes.get("v", "")), self._server_signature):
            raise SaslClientError("the server's signature does not match")


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """The client for ``mechanism`` (PLAIN or a SCRAM); ``ValueError`` for another."""
    if mechanism == PLAIN:
        return PlainClient(username, password)
    if mechanism in SCRAM_MECHANISMS:
        return ScramClient(mechanism, username, password)
    raise ValueError(f"tickwheel cannot authenticate with SASL mechanism {mechanism}")
