"""Frame sizes and the fixed header prefix."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.protocol import (
    FrameTooLargeError,
    MalformedFrameError,
    ProtocolError,
    RequestKey,
    TlsHandshakeError,
    peek_request_key,
    read_frame_size,
    size_prefix,
)

MAX_BYTES = 1024


@given(st.integers(min_value=8, max_value=MAX_BYTES))
def test_sizes_within_bounds_are_returned(size: int) -> None:
    assert read_frame_size(size_prefix(size), MAX_BYTES) == size


@pytest.mark.parametrize("size", [MAX_BYTES + 1, 2**31 - 1])
def test_a_frame_over_the_limit_is_refused(size: int) -> None:
    with pytest.raises(FrameTooLargeError, match=r"socket\.request\.max\.bytes"):
        read_frame_size(size_prefix(size), MAX_BYTES)


@pytest.mark.parametrize("size", [-1, 0, 7])
def test_a_frame_too_short_for_a_header_is_malformed_not_too_large(size: int) -> None:
    with pytest.raises(MalformedFrameError, match="shorter") as raised:
        read_frame_size(struct.pack(">i", size), MAX_BYTES)
    assert not isinstance(raised.value, FrameTooLargeError)
    # Still the layer's one error type, so the server closes the connection.
    assert isinstance(raised.value, ProtocolError)


def test_the_request_key_is_read_from_the_first_eight_bytes() -> None:
    frame = struct.pack(">hhi", 18, 3, 12345) + b"rest"
    assert peek_request_key(frame) == RequestKey(api_key=18, api_version=3, correlation_id=12345)


@pytest.mark.parametrize("minor", [0, 1, 3, 4])
def test_a_tls_handshake_record_is_recognised(minor: int) -> None:
    # A ClientHello's record header: handshake (22), version 3.minor, then its length.
    prefix = bytes([0x16, 0x03, minor, 0x02])
    with pytest.raises(TlsHandshakeError, match="TLS handshake"):
        read_frame_size(prefix, MAX_BYTES)


def test_a_large_size_that_is_not_tls_is_only_too_large() -> None:
    with pytest.raises(FrameTooLargeError) as raised:
        read_frame_size(bytes([0x16, 0x03, 0x05, 0x00]), MAX_BYTES)
    assert not isinstance(raised.value, TlsHandshakeError)


def test_tls_bytes_within_the_limit_are_a_frame_size() -> None:
    # Never refuse a legal frame: the check applies only to sizes over the limit.
    size = int.from_bytes(bytes([0x16, 0x03, 0x01, 0x00]), "big")
    assert read_frame_size(size_prefix(size), size) == size
