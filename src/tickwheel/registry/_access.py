"""``RegistryAccess``: who a request is (HTTP basic authentication) and whether it may.

With ``schema.registry.authentication.method=BASIC`` every request carries
``Authorization: Basic base64(user:password)``, checked against the user's SCRAM
credential on the broker (``tickwheel.security.BasicLogin``); a request without valid
credentials is refused with 401. Without BASIC every request is ``User:ANONYMOUS``, as
on a Kafka PLAINTEXT listener.

The principal (``User:<name>``) is then authorized by the broker's ACLs on the
``_schemas`` topic, through ``authorize`` (the broker's authorizer; None: no authorizer,
everything allowed): reads -- GETs, lookups, compatibility checks -- need DESCRIBE
(which READ and WRITE imply, as in Kafka), and changes -- registrations, deletes,
config and mode -- need WRITE. A refusal is 403 with error_code 40301.

Concurrency: event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable

from tickwheel.registry import _errors as errors
from tickwheel.security import (
    ANONYMOUS,
    USER_TYPE,
    AclOperation,
    BasicCredentialsError,
    BasicLogin,
    CredentialLookup,
    KafkaPrincipal,
    basic_credentials,
)

BASIC = "BASIC"
NONE = "NONE"
METHODS = (NONE, BASIC)
METHOD_PROPERTY = "schema.registry.authentication.method"
Authorize = Callable[[KafkaPrincipal, str, AclOperation], bool]
"""``(principal, client host, operation on _schemas)`` -> allowed?"""


class RegistryAccess:
    """Authentication and authorization of the registry's requests."""

    def __init__(
        self, *, method: str, credential_of: CredentialLookup, authorize: Authorize | None
    ) -> None:
        self._basic = method == BASIC
        self._login = BasicLogin(credential_of)
        self._authorize = authorize

    def principal(self, authorization: str | None) -> KafkaPrincipal:
        """Who sent a request with this ``Authorization`` header (401 if nobody)."""
        if not self._basic:
            return ANONYMOUS
        try:
            user, password = basic_credentials(authorization)
        except BasicCredentialsError as error:
            raise errors.unauthenticated(str(error)) from None
        if not self._login.verify(user, password):
            raise errors.unauthenticated("wrong user name or password")
        return KafkaPrincipal(USER_TYPE, user)

    def check(self, principal: KafkaPrincipal, client_host: str, *, write: bool) -> None:
        """Refuse (403) what the broker's ACLs do not allow ``principal``."""
        if self._authorize is None:
            return
        operation = AclOperation.WRITE if write else AclOperation.DESCRIBE
        if not self._authorize(principal, client_host, operation):
            raise errors.forbidden(str(principal), operation.name)
