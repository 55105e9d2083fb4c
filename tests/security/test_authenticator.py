"""One connection's SASL states: what passes, handshake, authenticate, re-authenticate."""

from __future__ import annotations

import functools

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.security import (
    ANONYMOUS,
    PLAIN,
    SASL_PLAINTEXT,
    SCRAM_SHA_256,
    KafkaPrincipal,
    PlainClient,
    PlainServer,
    SaslAuthenticationError,
    SaslServerAuthenticator,
    SaslState,
    ScramClient,
    ScramCredentials,
    ScramServer,
    Session,
    credential_to_string,
)
from tickwheel.timer import ManualClock

API_VERSIONS, HANDSHAKE, AUTHENTICATE, METADATA = 18, 17, 36, 3
USERS = {"alice": "alice-secret"}


def _authenticator(clock: ManualClock, max_reauth_ms: int = 0) -> SaslServerAuthenticator:
    credentials = ScramCredentials()
    credentials.set_configs(
        "alice",
        {SCRAM_SHA_256.name: credential_to_string(SCRAM_SHA_256.credential("alice-secret"))},
    )
    return SaslServerAuthenticator(
        Session(ANONYMOUS, "127.0.0.1", SASL_PLAINTEXT, SASL_PLAINTEXT),
        {
            PLAIN: functools.partial(PlainServer, USERS),
            SCRAM_SHA_256.name: functools.partial(ScramServer, SCRAM_SHA_256, credentials.lookup),
        },
        max_reauth_ms={PLAIN: max_reauth_ms, SCRAM_SHA_256.name: max_reauth_ms},
        now_ms=clock.now_ms,
    )


def _plain_login(auth: SaslServerAuthenticator, password: str = "alice-secret") -> int:
    assert auth.admit(HANDSHAKE) is None
    assert auth.handshake(PLAIN) == ErrorCode.none
    assert auth.admit(AUTHENTICATE) is None
    _, lifetime_ms = auth.authenticate(PlainClient("alice", password).initial_response())
    return lifetime_ms


def test_only_api_versions_and_handshake_before_authentication() -> None:
    auth = _authenticator(ManualClock())
    assert auth.admit(METADATA) is not None
    assert auth.admit(API_VERSIONS) is None
    assert auth.admit(API_VERSIONS) is None, "again, after a refused version"
    assert auth.admit(AUTHENTICATE) is not None, "SaslAuthenticate only after the handshake"
    assert auth.handshake(PLAIN) == ErrorCode.none
    assert auth.state == SaslState.AUTHENTICATE
    assert auth.admit(METADATA) is not None
    assert auth.admit(HANDSHAKE) is not None
    assert auth.admit(API_VERSIONS) is not None


def test_plain_login_sets_the_principal() -> None:
    auth = _authenticator(ManualClock())
    assert _plain_login(auth) == 0
    assert auth.authenticated
    assert auth.session.principal == KafkaPrincipal("User", "alice")
    assert auth.admit(METADATA) is None
    assert auth.handshake(PLAIN) == ErrorCode.illegal_sasl_state, "no re-authentication due"


def test_scram_login() -> None:
    auth = _authenticator(ManualClock())
    assert auth.handshake(SCRAM_SHA_256.name) == ErrorCode.none
    client = ScramClient(SCRAM_SHA_256.name, "alice", "alice-secret")
    token: bytes | None = client.initial_response()
    while token is not None:
        answer, _ = auth.authenticate(token)
        token = client.evaluate(answer)
    assert auth.session.principal == KafkaPrincipal("User", "alice")


def test_wrong_password_and_unknown_mechanism_fail() -> None:
    auth = _authenticator(ManualClock())
    with pytest.raises(SaslAuthenticationError):
        _plain_login(auth, "wrong")
    assert auth.failed
    assert auth.session.principal == ANONYMOUS
    assert "invalid credentials with SASL mechanism PLAIN" in auth.failure_message
    other = _authenticator(ManualClock())
    assert other.handshake("GSSAPI") == ErrorCode.unsupported_sasl_mechanism
    assert other.failed
    assert other.enabled_mechanisms == [PLAIN, SCRAM_SHA_256.name]


def test_an_expired_session_must_reauthenticate() -> None:
    clock = ManualClock()
    auth = _authenticator(clock, max_reauth_ms=5_000)
    assert _plain_login(auth) == 5_000
    clock.advance(4_999)
    assert auth.admit(METADATA) is None
    clock.advance(1)
    assert auth.admit(METADATA) is not None, "expired: only a re-authentication passes"
    assert auth.admit(HANDSHAKE) is None
    assert auth.handshake(PLAIN) == ErrorCode.none
    assert auth.state == SaslState.REAUTHENTICATE
    _, lifetime_ms = auth.authenticate(PlainClient("alice", "alice-secret").initial_response())
    assert lifetime_ms == 5_000
    assert auth.admit(METADATA) is None
    assert auth.handshake(PLAIN) == ErrorCode.illegal_sasl_state, "within a second of the last"


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    clock = ManualClock()
    auth = _authenticator(clock, max_reauth_ms=5_000)
    _plain_login(auth)
    clock.advance(2_000)
    assert auth.handshake(SCRAM_SHA_256.name) == ErrorCode.none
    with pytest.raises(SaslAuthenticationError, match="re-authentication of mechanism"):
        auth.authenticate(b"n,,n=alice,r=abc")
    assert auth.failed
