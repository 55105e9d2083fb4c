"""``RegistryAccess``: who a request is (HTTP basic authentication) and whether it may.

With ``schema.registry.authentication.method=BASIC`` every request carries
``Authorization: Basic base64(user:password)``, and the password is checked against
the user's SCRAM credential on the broker (SCRAM-SHA-512, else SCRAM-SHA-256: the users
``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]'`` makes) as a SCRAM
login checks it: PBKDF2 with the credential's salt and iterations, then H(ClientKey)
compared with the stored key in constant time. A request without valid credentials is
refused with 401. Without BASIC every request is ``User:ANONYMOUS``, as on a Kafka
PLAINTEXT listener. A password once verified is remembered (by its SHA-256) while the
user's credential stays the same object, so PBKDF2 is paid once per user and password,
not per request.

The principal (``User:<name>``) is then authorized by the broker's ACLs on the
``_schemas`` topic, through ``authorize`` (the broker's authorizer; None: no authorizer,
everything allowed): reads -- GETs, lookups, compatibility checks -- need DESCRIBE
(which READ and WRITE imply, as in Kafka), and changes -- registrations, deletes,
config and mode -- need WRITE. A refusal is 403 with error_code 40301.

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable

from tickwheel.registry import _errors as errors
from tickwheel.security import (
    ANONYMOUS,
    SCRAM_MECHANISMS,
    USER_TYPE,
    AclOperation,
    KafkaPrincipal,
    ScramCredential,
)

BASIC = "BASIC"
NONE = "NONE"
METHODS = (NONE, BASIC)
METHOD_PROPERTY = "schema.registry.authentication.method"
_SCHEME = "basic "
_MECHANISMS_BY_PREFERENCE = ("SCRAM-SHA-512", "SCRAM-SHA-256")

CredentialLookup = Callable[[str, str], ScramCredential | None]
"""``(user, mechanism)`` -> the user's credential for it, or None."""
Authorize = Callable[[KafkaPrincipal, str, AclOperation], bool]
"""``(principal, client host, operation on _schemas)`` -> allowed?"""


class RegistryAccess:
    """Authentication and authorization of the registry's requests."""

    def __init__(
        self, *, method: str, credential_of: CredentialLookup, authorize: Authorize | None
    ) -> None:
        self._basic = method == BASIC
        self._credential_of = credential_of
        self._authorize = authorize
        self._verified: dict[tuple[str, bytes], ScramCredential] = {}

    def principal(self, authorization: str | None) -> KafkaPrincipal:
        """Who sent a request with this ``Authorization`` header (401 if nobody)."""
        if not self._basic:
            return ANONYMOUS
        if authorization is None or not authorization.lower().startswith(_SCHEME):
            raise errors.unauthenticated("basic authentication is required")
        try:
            decoded = base64.b64decode(authorization[len(_SCHEME) :].strip(), validate=True)
            user, sep, password = decoded.decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise errors.unauthenticated("malformed basic credentials") from None
        if not sep or not self._verify(user, password):
            raise errors.unauthenticated("wrong user name or password")
        return KafkaPrincipal(USER_TYPE, user)

    def _verify(self, user: str, password: str) -> bool:
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

    def check(self, principal: KafkaPrincipal, client_host: str, *, write: bool) -> None:
        """Refuse (403) what the broker's ACLs do not allow ``principal``."""
        if self._authorize is None:
            return
        operation = AclOperation.WRITE if write else AclOperation.DESCRIBE
        if not self._authorize(principal, client_host, operation):
            raise errors.forbidden(str(principal), operation.name)
