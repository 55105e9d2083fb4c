"""SaslHandshake (key 17) and SaslAuthenticate (key 36): a client logs in.

Both answer through the connection's ``SaslServerAuthenticator`` (``current_authenticator``),
which the connection also asks before every request (``Connection._admit``):

- SaslHandshake v1 names the mechanism; the answer lists the listener's enabled
  mechanisms with NONE, or UNSUPPORTED_SASL_MECHANISM (the connection then fails: its
  answer waits ``connection.failed.authentication.delay.ms`` and the connection
  closes). Only v1 is served, as Kafka 4 serves it (KIP-896 removed v0, after which the
  client sent bare tokens without SaslAuthenticate): a v0 handshake is an unadvertised
  version and closes the connection. After authentication, a handshake on a session
  with a lifetime begins re-authentication (KIP-368); without one, or within a second of
  the last, it is answered ILLEGAL_SASL_STATE, as are handshakes on a listener without
  SASL.
- SaslAuthenticate v0-2 carries the mechanism's tokens. Each answer carries the
  server's token; the last one, from v1, the session's lifetime in ms
  (``connections.max.reauth.ms``; 0 when sessions do not expire). A failed login is
  SASL_AUTHENTICATION_FAILED with Kafka's message ("Authentication failed during
  authentication due to invalid credentials with SASL mechanism ..."), which never says
  whether the user exists; the broker logs the reason. A SaslAuthenticate outside an exchange
  is ILLEGAL_SASL_STATE.

The handlers are written against SaslHandshake v1's and SaslAuthenticate v2's classes;
``body_as`` and ``reply`` carry SaslAuthenticate v0 and v1.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import datetime
import logging

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i64Timedelta

from tickwheel.protocol import DecodedRequest, VersionRange
from tickwheel.security import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslAuthenticationError,
    SaslState,
    current_authenticator,
    current_session,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_log = logging.getLogger(__name__)
_OUTSIDE_EXCHANGE = "SaslAuthenticate request received outside a SASL exchange"


async def handle_sasl_handshake(context: BrokerContext, request: DecodedRequest) -> Response:
    """Choose the connection's mechanism, or begin its re-authentication."""
    body = request.body_as(SaslHandshakeRequest)
    authenticator = current_authenticator()
    if authenticator is None:
        return reply(request, SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state))
    error_code = authenticator.handshake(body.mechanism)
    if error_code == ErrorCode.unsupported_sasl_mechanism:
        _log.info(
            "SASL mechanism %r requested by %s is not enabled on listener %s",
            body.mechanism,
            current_session().client_host,
            current_session().listener_name,
        )
    return reply(
        request,
        SaslHandshakeResponse(
            error_code=error_code, mechanisms=tuple(authenticator.enabled_mechanisms)
        ),
    )


async def handle_sasl_authenticate(context: BrokerContext, request: DecodedRequest) -> Response:
    """Evaluate the client's next token."""
    body = request.body_as(SaslAuthenticateRequest)
    authenticator = current_authenticator()
    if authenticator is None or authenticator.state not in (
        SaslState.AUTHENTICATE,
        SaslState.REAUTHENTICATE,
    ):
        return reply(
            request,
            SaslAuthenticateResponse(
                error_code=ErrorCode.illegal_sasl_state,
                error_message=_OUTSIDE_EXCHANGE,
                auth_bytes=b"",
            ),
        )
    reauthenticating = authenticator.state == SaslState.REAUTHENTICATE
    try:
        token, lifetime_ms = authenticator.authenticate(body.auth_bytes)
    except SaslAuthenticationError:
        # The connection logs the reason when it closes, after the delay.
        return reply(
            request,
            SaslAuthenticateResponse(
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=authenticator.failure_message,
                auth_bytes=b"",
            ),
        )
    if reauthenticating and authenticator.complete:
        _log.debug(
            "%s re-authenticated from %s; session lifetime %d ms",
            authenticator.session.principal,
            authenticator.session.client_host,
            lifetime_ms,
        )
    return reply(
        request,
        SaslAuthenticateResponse(
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=token,
            session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime_ms)),
        ),
    )


SASL_HANDSHAKE = ApiSpec(
    SASL_HANDSHAKE_KEY, "SaslHandshake", VersionRange(1, 1), handle_sasl_handshake
)
SASL_AUTHENTICATE = ApiSpec(
    SASL_AUTHENTICATE_KEY, "SaslAuthenticate", VersionRange(0, 2), handle_sasl_authenticate
)
SASL_SPECS = (SASL_HANDSHAKE, SASL_AUTHENTICATE)
