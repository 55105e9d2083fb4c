"""``SaslServerAuthenticator``: the SASL state of one connection on a SASL listener.

Kafka's ``SaslServerAuthenticator``, as states a connection moves through::

    HANDSHAKE_OR_VERSIONS --SaslHandshake--> AUTHENTICATE --SaslAuthenticate*--> COMPLETE
      (ApiVersions: stays)  (mechanism enabled;             (a failure: FAILED)
                             else FAILED)
    COMPLETE --SaslHandshake--> REAUTHENTICATE --SaslAuthenticate*--> COMPLETE or FAILED
      (a session with a lifetime,               (same mechanism and principal)
       >= 1 s since the last)

``admit(api_key)`` is asked before each request is dispatched: before authentication
only ApiVersions and SaslHandshake, and then SaslAuthenticate, pass; anything else is
refused (``refuse``: the login fails, unanswered) and the connection closes, as Kafka
closes a client that speaks Kafka requests on a SASL listener without authenticating.
Kafka takes one successful ApiVersions before the handshake; here any number pass,
since a client whose first version is refused (error 35, kafka-python) asks again and
the fallback is not told apart from a success at this level. After authentication
everything passes, until the session's lifetime (``connections.max.reauth.ms``,
KIP-368) has run out: then only a SaslHandshake, which begins re-authentication, and
any other request closes the connection. A SaslHandshake on a session without a
lifetime, or within a second of the last re-authentication, is not a re-authentication
(Kafka answers it ILLEGAL_SASL_STATE).

``handshake`` and ``authenticate`` are what the SaslHandshake and SaslAuthenticate
handlers call; a failure leaves the authenticator ``failed``, and the connection then
holds the failure's response for ``connection.failed.authentication.delay.ms`` before
sending it and closing (Kafka's delayed close, on the broker's timing wheel). On
success the connection's ``Session`` gets the principal ``User:<username>``.

The handlers find the authenticator of their connection with ``current_authenticator``
(a context variable, as they find the session).

Concurrency: one authenticator per connection, used by that connection's task only.
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.security._principal import USER_TYPE, KafkaPrincipal
from tickwheel.security._sasl_server import SaslAuthenticationError, SaslServer
from tickwheel.security._session import Session

API_VERSIONS_KEY = ApiKey.API_VERSIONS
SASL_HANDSHAKE_KEY = ApiKey.SASL_HANDSHAKE
SASL_AUTHENTICATE_KEY = ApiKey.SASL_AUTHENTICATE
MIN_REAUTH_INTERVAL_MS = 1000
"""Kafka's least time between two re-authentications of one connection."""


class SaslState(enum.Enum):
    """Where a connection is in its SASL exchange."""

    HANDSHAKE_OR_VERSIONS = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTHENTICATE = "re-authenticate"
    FAILED = "failed"


_ADMITTED: Mapping[SaslState, frozenset[int]] = {
    SaslState.HANDSHAKE_OR_VERSIONS: frozenset((API_VERSIONS_KEY, SASL_HANDSHAKE_KEY)),
    SaslState.AUTHENTICATE: frozenset((SASL_AUTHENTICATE_KEY,)),
    SaslState.REAUTHENTICATE: frozenset((SASL_AUTHENTICATE_KEY,)),
    SaslState.FAILED: frozenset(),
}


class SaslServerAuthenticator:
    """The SASL exchange of one connection."""

    def __init__(
        self,
        session: Session,
        mechanisms: Mapping[str, Callable[[], SaslServer]],
        *,
        max_reauth_ms: Mapping[str, int],
        now_ms: Callable[[], int],
    ) -> None:
        self.session = session
        self._mechanisms = mechanisms
        self._max_reauth_ms = max_reauth_ms
        self._now_ms = now_ms
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self._server: SaslServer | None = None
        self._mechanism = ""
        self._pending_mechanism = ""
        self.session_expires_ms: int | None = None
        self._last_reauth_ms: int | None = None
        self.failure: str | None = None

    @property
    def enabled_mechanisms(self) -> list[str]:
        """The listener's mechanisms, as SaslHandshake lists them."""
        return list(self._mechanisms)

    @property
    def authenticated(self) -> bool:
        """True once the connection authenticated (also while it re-authenticates)."""
        return self.state in (SaslState.COMPLETE, SaslState.REAUTHENTICATE)

    @property
    def complete(self) -> bool:
        """True when authenticated and not re-authenticating now."""
        return self.state == SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        """True once authentication failed: the connection closes after the delay."""
        return self.state == SaslState.FAILED

    def expired(self) -> bool:
        """True when the session has a lifetime and it has run out."""
        expires_ms = self.session_expires_ms
        return expires_ms is not None and self._now_ms() >= expires_ms

    def admit(self, api_key: int) -> str | None:
        """None if a request of ``api_key`` may be served now, else why the connection
        closes."""
        if self.state == SaslState.COMPLETE:
            if not self.expired() or api_key == SASL_HANDSHAKE_KEY:
                return None
            return f"its SASL session of {self.session.principal} expired (re-authenticate)"
        if api_key not in _ADMITTED[self.state]:
            return f"unexpected Kafka request of api key {api_key} during SASL {self.state.value}"
        return None

    def refuse(self, reason: str) -> None:
        """Fail the login: a request ``admit`` refused before authentication."""
        self._fail(reason)

    def handshake(self, mechanism: str) -> ErrorCode:
        """Choose ``mechanism`` (SaslHandshake): NONE, UNSUPPORTED_SASL_MECHANISM (the
        connection fails) or ILLEGAL_SASL_STATE (no re-authentication is due)."""
        if self.state == SaslState.COMPLETE:
            now_ms = self._now_ms()
            last_ms = self._last_reauth_ms
            if self.session_expires_ms is None or (
                last_ms is not None and now_ms - last_ms < MIN_REAUTH_INTERVAL_MS
            ):
                return ErrorCode.illegal_sasl_state
            self._last_reauth_ms = now_ms
            self.state = SaslState.REAUTHENTICATE
        elif self.state != SaslState.HANDSHAKE_OR_VERSIONS:
            return ErrorCode.illegal_sasl_state
        factory = self._mechanisms.get(mechanism)
        if factory is None:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism
        if self.state == SaslState.REAUTHENTICATE:
            self._pending_mechanism = mechanism
        else:
            self._mechanism = mechanism
            self.state = SaslState.AUTHENTICATE
        self._server = factory()
        return ErrorCode.none

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """Evaluate the client's token (SaslAuthenticate): the answer token and the
        session lifetime in ms (0 until complete, or without one);
        ``SaslAuthenticationError`` on failure (the connection fails)."""
        server = self._server
        if self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE) or server is None:
            raise SaslAuthenticationError(f"SaslAuthenticate during SASL {self.state.value}")
        reauthenticating = self.state == SaslState.REAUTHENTICATE
        try:
            if reauthenticating and self._pending_mechanism != self._mechanism:
                raise SaslAuthenticationError(
                    f"SASL mechanism '{self._pending_mechanism}' requested by client is not "
                    f"supported for re-authentication of mechanism '{self._mechanism}'"
                )
            answer = server.evaluate(token)
            if not server.complete:
                return answer, 0
            principal = KafkaPrincipal(USER_TYPE, server.username)
            if reauthenticating and principal != self.session.principal:
                raise SaslAuthenticationError(
                    "Cannot change principals during re-authentication from "
                    f"{self.session.principal}: {principal}"
                )
        except SaslAuthenticationError as exc:
            self._fail(str(exc))
            raise
        self.session.principal = principal
        self.state = SaslState.COMPLETE
        self._server = None
        lifetime_ms = self._max_reauth_ms.get(self._mechanism, 0)
        self.session_expires_ms = self._now_ms() + lifetime_ms if lifetime_ms > 0 else None
        return answer, lifetime_ms

    @property
    def failure_message(self) -> str:
        """What the client is told when authentication failed (Kafka's wording, which
        never says whether the user exists)."""
        return (
            f"Authentication failed during "
            f"{'re-authentication' if self._last_reauth_ms is not None else 'authentication'} "
            f"due to invalid credentials with SASL mechanism {self._mechanism}"
        )

    def _fail(self, reason: str) -> None:
        self.state = SaslState.FAILED
        self.failure = reason
        self._server = None


_CURRENT_AUTHENTICATOR: contextvars.ContextVar[SaslServerAuthenticator | None] = (
    contextvars.ContextVar("tickwheel_sasl_authenticator", default=None)
)


def enter_authenticator(authenticator: SaslServerAuthenticator | None) -> None:
    """Make ``authenticator`` the current task's (None on a listener without SASL)."""
    _CURRENT_AUTHENTICATOR.set(authenticator)


def current_authenticator() -> SaslServerAuthenticator | None:
    """The SASL authenticator of the connection being served; None without SASL."""
    return _CURRENT_AUTHENTICATOR.get()
