"""SCRAM's server side (RFC 5802, RFC 7677): two client messages, two answers.

1. client-first ``n,[a=<authzid>],n=<user>,r=<client nonce>`` -> server-first
   ``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``, from the user's stored
   credential (``lookup``);
2. client-final ``c=<b64 gs2 header>,r=<nonce>,p=<b64 proof>`` -> server-final
   ``v=<b64 ServerSignature>``, once the proof checks:
   ``H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey``.

Every check Kafka's ``ScramSaslServer`` makes is made here, and fails the same way
(``SaslAuthenticationError``; the client is told SASL_AUTHENTICATION_FAILED): an
unknown user, a credential with fewer iterations than the mechanism's minimum, an
authorization id other than the username, extensions (Kafka's ``tokenauth`` for
delegation tokens, which this broker does not issue), a final nonce that is not the
combined nonce, a channel binding other than the gs2 header the client sent first,
and a wrong proof. As in Kafka the server never sends ``e=``: a failure is the Kafka
error, not a server-final message.

Concurrency: one ``ScramServer`` per authentication, used by one connection's task.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from tickwheel.security._sasl_server import SaslAuthenticationError
from tickwheel.security._scram import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramError,
    ScramMechanism,
    b64decode,
    b64encode,
    decode_saslname,
    new_nonce,
    parse_attributes,
    xor,
)

CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(username, mechanism name) -> the stored credential, or None."""

_AWAIT_CLIENT_FIRST, _AWAIT_CLIENT_FINAL, _COMPLETE = range(3)


class ScramServer:
    """The server side of one SCRAM authentication."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: CredentialLookup,
        nonce_factory: Callable[[], str] = new_nonce,
    ) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._nonce_factory = nonce_factory
        self._state = _AWAIT_CLIENT_FIRST
        self._username = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    @property
    def mechanism(self) -> str:
        """``SCRAM-SHA-256`` or ``SCRAM-SHA-512``."""
        return self._mechanism.name

    @property
    def complete(self) -> bool:
        """True once the client's proof checked out."""
        return self._state == _COMPLETE

    @property
    def username(self) -> str:
        """The authenticated user."""
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message, or ``SaslAuthenticationError``."""
        try:
            message = token.decode("utf-8")
            if self._state == _AWAIT_CLIENT_FIRST:
                return self._client_first(message).encode()
            if self._state == _AWAIT_CLIENT_FINAL:
                return self._client_final(message).encode()
        except (ScramError, UnicodeDecodeError) as exc:
            raise SaslAuthenticationError(f"Authentication failed: {exc}") from exc
        raise SaslAuthenticationError("SCRAM exchange already complete")

    def _client_first(self, message: str) -> str:
        gs2_flag, sep, rest = message.partition(",")
        authzid_part, sep2, bare = rest.partition(",")
        if not sep or not sep2 or gs2_flag not in ("n", "y"):
            raise ScramError("invalid client-first message (channel binding is not offered)")
        if authzid_part and not authzid_part.startswith("a="):
            raise ScramError("invalid authorization id in the client-first message")
        attributes = parse_attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("invalid client-first message")
        if len(attributes) > 2:
            raise ScramError("SCRAM extensions (delegation tokens) are not supported")
        username = decode_saslname(attributes[0][1])
        client_nonce = attributes[1][1]
        authzid = decode_saslname(authzid_part[2:]) if authzid_part else ""
        if authzid and authzid != username:
            raise ScramError("Client requested an authorization id that is different from username")
        if not username or not client_nonce:
            raise ScramError("empty username or nonce in the client-first message")
        credential = self._lookup(username, self._mechanism.name)
        if credential is None:
            raise ScramError(f"Invalid user credentials for {username!r}")
        if credential.iterations < MIN_ITERATIONS:
            raise ScramError(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self._mechanism.name}"
            )
        self._username = username
        self._credential = credential
        self._gs2_header = f"{gs2_flag},{authzid_part},"
        self._client_first_bare = bare
        self._nonce = client_nonce + self._nonce_factory()
        self._server_first = (
            f"r={self._nonce},s={b64encode(credential.salt)},i={credential.iterations}"
        )
        self._state = _AWAIT_CLIENT_FINAL
        return self._server_first

    def _client_final(self, message: str) -> str:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_attribute = message.rpartition(",p=")
        if not sep:
            raise ScramError("no proof in the client-final message")
        attributes = dict(parse_attributes(without_proof))
        if attributes.get("r") != self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        if b64decode(attributes.get("c", "")) != self._gs2_header.encode():
            raise ScramError("invalid channel binding in the final client message")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        mechanism = self._mechanism
        signature = mechanism.hmac(credential.stored_key, auth_message)
        client_key = xor(b64decode(proof_attribute), signature)
        if not hmac.compare_digest(mechanism.digest(client_key), credential.stored_key):
            raise ScramError(f"Invalid client credentials for {self._username!r}")
        self._state = _COMPLETE
        return f"v={b64encode(mechanism.hmac(credential.server_key, auth_message))}"
