"""SASL timing on a ManualClock: a failed login's answer waits on the timing wheel for
``connection.failed.authentication.delay.ms``, and an expired session must
re-authenticate before anything else is served."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.security import PlainClient
from tickwheel.server import BackgroundBroker
from tickwheel.timer import ManualClock

from .sasl import ALICE, ALICE_PASSWORD, SASL_PROPERTIES
from .wire import METADATA_ALL_TOPICS, WireClient, nothing_yet

pytestmark = pytest.mark.integration

API_VERSIONS, METADATA, HANDSHAKE, AUTHENTICATE = 18, 3, 17, 36
DELAY_MS = 250
REAUTH_MS = 5_000


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        **SASL_PROPERTIES,
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
        "connections.max.reauth.ms": str(REAUTH_MS),
    }


def _login(client: WireClient, password: str) -> tuple[int, object]:
    """ApiVersions, SaslHandshake PLAIN, then send SaslAuthenticate; its correlation id
    and the handshake's answer."""
    versions = client.call(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert versions.error_code == ErrorCode.none
    keys = {entry.api_key for entry in versions.api_keys}
    assert {HANDSHAKE, AUTHENTICATE, 50, 51} <= keys
    handshake = client.call(HANDSHAKE, 1, {"mechanism": "PLAIN"})
    token = PlainClient(ALICE, password).initial_response()
    return client.send(AUTHENTICATE, 2, {"auth_bytes": token}), handshake


def test_failed_login_answer_waits_for_the_wheel(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        correlation_id, handshake = _login(client, "wrong")
        assert handshake.error_code == ErrorCode.none  # type: ignore[attr-defined]
        assert nothing_yet(client), "answered before the delay"
        # Meanwhile the broker serves others: another client logs in.
        other = WireClient(tickwheel_manual_broker.bootstrap_servers)
        try:
            _login(other, ALICE_PASSWORD)
            _, logged_in = other.receive(AUTHENTICATE, 2)
            assert logged_in.error_code == ErrorCode.none
        finally:
            other.close()
        tickwheel_clock.advance(DELAY_MS - 1)
        assert nothing_yet(client), "answered before the delay ran out"
        tickwheel_clock.advance(1)
        answered, body = client.receive(AUTHENTICATE, 2)
        assert answered == correlation_id
        assert body.error_code == ErrorCode.sasl_authentication_failed
        assert "invalid credentials with SASL mechanism PLAIN" in body.error_message
        assert client.read_frame() is None, "then the connection closes"
    finally:
        client.close()


def test_unknown_mechanism_lists_the_enabled_ones_then_closes(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        client.send(HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert nothing_yet(client)
        tickwheel_clock.advance(DELAY_MS)
        _, body = client.receive(HANDSHAKE, 1)
        assert body.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(body.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.read_frame() is None
    finally:
        client.close()


def test_expired_session_must_reauthenticate(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    metadata = METADATA_ALL_TOPICS
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        _login(client, ALICE_PASSWORD)
        _, body = client.receive(AUTHENTICATE, 2)
        assert body.error_code == ErrorCode.none
        assert body.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        client.call(METADATA, 12, metadata)
        tickwheel_clock.advance(REAUTH_MS - 1)
        client.call(METADATA, 12, metadata)
        tickwheel_clock.advance(1)
        # Re-authentication is served; afterwards the connection goes on.
        assert client.call(HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        token = PlainClient(ALICE, ALICE_PASSWORD).initial_response()
        assert client.call(AUTHENTICATE, 2, {"auth_bytes": token}).error_code == ErrorCode.none
        client.call(METADATA, 12, metadata)
        tickwheel_clock.advance(REAUTH_MS)
        client.send(METADATA, 12, metadata)
        assert client.read_frame() is None, "expired: anything but a re-authentication closes"
    finally:
        client.close()


def test_a_v0_login_expires_too(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    """SaslAuthenticate v0 carries no session lifetime, but the session still has one:
    such a client is disconnected when it runs out (Kafka's rule for old clients)."""
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        assert client.call(HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.none
        token = PlainClient(ALICE, ALICE_PASSWORD).initial_response()
        assert client.call(AUTHENTICATE, 0, {"auth_bytes": token}).error_code == ErrorCode.none
        again = client.call(AUTHENTICATE, 0, {"auth_bytes": token})
        assert again.error_code == ErrorCode.illegal_sasl_state, "no second login"
        tickwheel_clock.advance(REAUTH_MS)
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert client.read_frame() is None
    finally:
        client.close()


def test_a_request_before_login_closes_after_the_delay_unanswered(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    """Kafka's IllegalSaslStateException: a Metadata request before logging in fails
    the login; no answer, and the close waits on the wheel like any failed login."""
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        tickwheel_clock.advance(DELAY_MS)
        assert client.read_frame() is None
    finally:
        client.close()
