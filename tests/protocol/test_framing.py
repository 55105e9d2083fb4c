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
