"""The sans-IO SASL login: the handshake and authenticate frames it sends, how it reads
the broker's answers, and the errors it names."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.protocol import (
    ApiKey,
    ClientConnection,
    SaslLogin,
    SaslLoginError,
    VersionRange,
    build_entity,
    decode_request,
    peek_request_key,
    response_schema,
)
from tickwheel.security import PlainClient


def _sent(frame: bytes) -> Any:
    """The decoded request in ``frame``."""
    key = peek_request_key(frame[4:])
    decoded = decode_request(
        frame[4:], {key.api_key: VersionRange(key.api_version, key.api_version)}
    )
    return key, decoded.body


def _answer(api_key: ApiKey, version: int, values: dict[str, Any]) -> Any:
    return build_entity(response_schema(api_key, version), values)


def test_a_plain_login_sends_the_mechanism_then_the_token_and_keeps_the_lifetime() -> None:
    login = SaslLogin(ClientConnection("t"), PlainClient("alice", "secret"), peer="broker 1")
    key, handshake = _sent(login.start())
    assert (key.api_key, key.api_version, handshake.mechanism) == (
        ApiKey.SASL_HANDSHAKE,
        1,
        "PLAIN",
    )
    frame = login.next_frame(
        _answer(ApiKey.SASL_HANDSHAKE, 1, {"error_code": 0, "mechanisms": ["PLAIN"]})
    )
    assert frame is not None
    key, authenticate = _sent(frame)
    assert (key.api_key, key.api_version) == (ApiKey.SASL_AUTHENTICATE, 2)
    assert authenticate.auth_bytes == b"\x00alice\x00secret"
    done = login.next_frame(
        _answer(
            ApiKey.SASL_AUTHENTICATE,
            2,
            {
                "error_code": 0,
                "error_message": None,
                "auth_bytes": b"",
                "session_lifetime": datetime.timedelta(seconds=30),
            },
        )
    )
    assert done is None
    assert login.lifetime_ms == 30_000


def test_a_refused_mechanism_names_the_ones_offered() -> None:
    login = SaslLogin(ClientConnection("t"), PlainClient("alice", "secret"), peer="broker 1")
    login.start()
    refusal = _answer(
        ApiKey.SASL_HANDSHAKE,
        1,
        {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": ["SCRAM-SHA-512"]},
    )
    with pytest.raises(
        SaslLoginError, match=r"broker 1 refused SASL mechanism PLAIN \(.*SCRAM-SHA-512"
    ):
        login.next_frame(refusal)


def test_a_failed_authentication_carries_the_brokers_message() -> None:
    login = SaslLogin(ClientConnection("t"), PlainClient("alice", "wrong"), peer="broker 1")
    login.start()
    login.next_frame(_answer(ApiKey.SASL_HANDSHAKE, 1, {"error_code": 0, "mechanisms": ["PLAIN"]}))
    failure = _answer(
        ApiKey.SASL_AUTHENTICATE,
        2,
        {
            "error_code": ErrorCode.sasl_authentication_failed,
            "error_message": "Invalid username or password",
            "auth_bytes": b"",
            "session_lifetime": datetime.timedelta(0),
        },
    )
    with pytest.raises(SaslLoginError, match="SASL login to broker 1 failed: Invalid username"):
        login.next_frame(failure)
