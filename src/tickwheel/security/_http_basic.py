"""HTTP Basic logins checked against the broker's SCRAM credentials.

The broker's HTTP doors (the schema registry, the fault endpoint) take
``Authorization: Basic base64(user:password)`` and check the password as a SCRAM
login would: PBKDF2 with the user's stored salt and iterations, then H(ClientKey)
compared with the stored key in constant time, for SCRAM-SHA-512 first, else
SCRAM-SHA-256 (the credentials ``kafka-configs --add-config 'SCRAM-SHA-256=[...]'``
makes). So an HTTP user is a Kafka user, with no password file of its own.

``basic_credentials`` reads the header; ``BasicLogin.verify`` checks the pair. A
password once verified is remembered (by its SHA-256) while the user's credential stays
the same object, so PBKDF2 is paid once per user and password, not per request; a
changed or deleted credential is a new object, and the remembered password no longer
counts.

Concurrency: one ``BasicLogin`` per door, used from one thread (the broker's loop).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from typing import Final

from tickwheel.security._scram import SCRAM_MECHANISMS, ScramCredential

_SCHEME: Final = "basic "
_MECHANISMS_BY_PREFERENCE: Final = ("SCRAM-SHA-512", "SCRAM-SHA-256")

CredentialLookup = Callable[[str, str], ScramCredential | None]
"""``(user, mechanism name)`` -> the user's credential for it, or None."""


class BasicCredentialsError(ValueError):
    """No ``Authorization: Basic`` header, or one that does not decode; says which."""


def basic_credentials(authorization: str | None) -> tuple[str, str]:
    """``(user, password)`` from an ``Authorization`` header's value."""
    if authorization is None or not authorization.lower().startswith(_SCHEME):
        raise BasicCredentialsError("basic authentication is required")
    try:
        decoded = base64.b64decode(authorization[len(_SCHEME) :].strip(), validate=True)
        user, separator, password = decoded.decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise BasicCredentialsError("malformed basic credentials") from None
    if not separator:
        raise BasicCredentialsError("malformed basic credentials")
    return user, password


class BasicLogin:
    """Checks Basic passwords against SCRAM credentials found by ``credential_of``."""

    def __init__(self, credential_of: CredentialLookup) -> None:
        self._credential_of = credential_of
        self._verified: dict[tuple[str, bytes], ScramCredential] = {}

    def verify(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s, by the strongest credential they have."""
        for name in _MECHANISMS_BY_PREFERENCE:
            credential = self._credential_of(user, name)
            if credential is None:
                continue
            key = (user, hashlib.sha256(password.encode()).digest())
            if self._verified.get(key) is credential:
                return True
            mechanism = SCRAM_MECHANISMS[name]
            salted = mechanism.salted_password(password, credential.salt, credential.iterations)
            stored_key = mechanism.digest(mechanism.client_key(salted))
            if not hmac.compare_digest(stored_key, credential.stored_key):
                return False
            self._verified[key] = credential
            return True
        return False
