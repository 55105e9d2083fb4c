"""The client side of a Kafka connection, sans-IO: requests out as bytes, bytes in as
responses.

``ClientConnection`` is what every client in this project (the CLI's admin verbs, the
Spark source's fetcher, a broker's channels to the others) shares, with no socket and
no event loop in it (the model is h11): ``send`` builds a request at a version, gives
it the connection's next correlation id and returns the frame to write;
``receive_data`` takes whatever bytes the socket gave, split anywhere; and
``next_response`` returns the next whole response, decoded with kio, or None while
more bytes are needed (``bytes_needed`` says how many at least). The I/O shells
(``_client_blocking`` for a blocking socket, ``_client_asyncio`` for asyncio streams)
only move those bytes.

Correlation: Kafka answers the requests of one connection in the order they were
sent, so the requests in flight are a queue; a response must carry the correlation id
of the oldest, else the connection is out of step and ``CorrelationError`` says which
id came and which was expected. Several requests may be in flight (pipelining); the
shells here send one at a time.

Framing: each response is a 4-byte big-endian size and that many bytes, starting with
the correlation id (response header v0 or v1, as the request's version is flexible or
not). A size too small to hold the correlation id, or a frame that ends before the
response's header or body does, is a ``MalformedFrameError``. When
a read returns exactly the bytes still missing, as the shells' exact reads do, the
frame is handed to kio without being copied.

Versions: the first request of a connection should be ApiVersions v0, which every
broker answers; its answer is kept, and ``version`` picks the highest version of an
API both the broker and the caller speak, as Kafka's clients do (None if the ranges do
not meet or the broker does not serve it).

Concurrency: a ``ClientConnection`` belongs to its connection's one thread or task.
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kio.serial.errors import BufferUnderflow
from kio.static.protocol import ResponsePayload

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._build import build_entity
from tickwheel.protocol._codec import VersionRange, encode_request
from tickwheel.protocol._errors import MalformedFrameError, ProtocolError
from tickwheel.protocol._framing import SIZE_PREFIX_BYTES
from tickwheel.protocol._schemas import reader_for, request_schema, response_schema

API_VERSIONS_REQUEST_VERSION: Final = 0
"""The ApiVersions version a client asks first: every broker answers v0."""
_SIZE: Final = struct.Struct(">i")
_CORRELATION_ID: Final = struct.Struct(">i")

Encoder = Callable[[int, str], bytes]
"""Makes a request frame (size prefix included) from its correlation id and client id."""

ResponseClass = Callable[[int, int], type[ResponsePayload]]
"""kio's response class for an API key and version (``response_schema`` by default)."""


class CorrelationError(ProtocolError):
    """A response whose correlation id is not the oldest request's: out of step."""


@dataclass(frozen=True, slots=True)
class Response:
    """One decoded response and the request it answers."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any


@dataclass(frozen=True, slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int


def highest_common_version(served: VersionRange, wanted: VersionRange) -> int | None:
    """The highest version in both ranges, or None if they do not meet."""
    highest = min(served.max_version, wanted.max_version)
    if highest < max(served.min_version, wanted.min_version):
        return None
    return highest


class ClientConnection:
    """The protocol state of one client connection; see the module doc."""

    def __init__(self, client_id: str, *, response_class: ResponseClass = response_schema) -> None:
        """A connection that sends ``client_id`` in its request headers and decodes
        responses with ``response_class``'s kio classes."""
        self.client_id = client_id
        self._response_class = response_class
        self._next_correlation_id = 0
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._frame_size: int | None = None
        self._served: dict[int, VersionRange] = {}

    def send(self, api_key: int, api_version: int, values: Mapping[str, Any]) -> bytes:
        """The frame of the request of ``api_key`` at ``api_version`` built from
        ``values`` (fields the version lacks are dropped)."""
        request = build_entity(request_schema(api_key, api_version), values)
        return self.send_encoded(
            api_key,
            api_version,
            lambda correlation_id, client_id: encode_request(
                correlation_id, request, client_id=client_id
            ),
        )

    def send_encoded(self, api_key: int, api_version: int, encode: Encoder) -> bytes:
        """The frame ``encode(correlation_id, client_id)`` makes, as the request of
        ``api_key`` at ``api_version`` (for requests written by hand)."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self._in_flight.append(_InFlight(correlation_id, api_key, api_version))
        return encode(correlation_id, self.client_id)

    def send_api_versions(self) -> bytes:
        """The frame of ApiVersions v0, whose answer ``version`` then uses."""
        return self.send(ApiKey.API_VERSIONS, API_VERSIONS_REQUEST_VERSION, {})

    @property
    def in_flight(self) -> int:
        """How many requests await their response."""
        return len(self._in_flight)

    def receive_data(self, data: bytes) -> None:
        """Add bytes read from the connection (any split of the response stream)."""
        if data:
            self._chunks.append(bytes(data))
            self._buffered += len(data)

    def bytes_needed(self) -> int:
        """How many more bytes the next response needs at least (after
        ``next_response`` returned None; a read of exactly this many never reads
        into the response after it)."""
        wanted = SIZE_PREFIX_BYTES if self._frame_size is None else self._frame_size
        return max(wanted - self._buffered, 1)

    def next_response(self) -> Response | None:
        """The next whole response, decoded, or None until more bytes come."""
        if self._frame_size is None:
            if self._buffered < SIZE_PREFIX_BYTES:
                return None
            size: int = _SIZE.unpack(self._take(SIZE_PREFIX_BYTES))[0]
            if size < _CORRELATION_ID.size:
                raise MalformedFrameError(
                    f"a response frame of {size} bytes is shorter than its correlation id"
                )
            self._frame_size = size
        if self._buffered < self._frame_size:
            return None
        frame = self._take(self._frame_size)
        self._frame_size = None
        return self._decode(frame)

    def version(self, api_key: int, wanted: VersionRange) -> int | None:
        """The highest version of ``api_key`` in ``wanted`` that the broker serves
        (per its ApiVersions answer), or None."""
        served = self._served.get(api_key)
        return None if served is None else highest_common_version(served, wanted)

    def served(self, api_key: int) -> VersionRange | None:
        """The versions of ``api_key`` the broker serves (None: not at all, or not
        asked yet)."""
        return self._served.get(api_key)

    def _take(self, size: int) -> bytes:
        """The first ``size`` buffered bytes (there are at least that many)."""
        chunks = self._chunks
        self._buffered -= size
        if len(chunks[0]) == size:
            return chunks.popleft()
        joined = b"".join(chunks)
        chunks.clear()
        if len(joined) > size:
            chunks.append(joined[size:])
        return joined[:size]

    def _decode(self, frame: bytes) -> Response:
        received: int = _CORRELATION_ID.unpack_from(frame, 0)[0]
        if not self._in_flight:
            raise CorrelationError(f"a response to request {received}, but none was sent")
        request = self._in_flight[0]
        if received != request.correlation_id:
            raise CorrelationError(
                f"a response to request {received}, expected {request.correlation_id}"
            )
        self._in_flight.popleft()
        body_cls: Any = self._response_class(request.api_key, request.api_version)
        body: Any
        try:
            _, header_size = reader_for(body_cls.__header_schema__)(frame, 0)
            body, _ = reader_for(body_cls)(frame, header_size)
        except BufferUnderflow as exc:
            raise MalformedFrameError(
                f"the {body_cls.__name__} v{request.api_version} frame of {len(frame)} bytes "
                "ends before the response does"
            ) from exc
        if request.api_key == ApiKey.API_VERSIONS:
            self._served = {
                int(entry.api_key): VersionRange(int(entry.min_version), int(entry.max_version))
                for entry in body.api_keys
            }
        return Response(request.correlation_id, request.api_key, request.api_version, body)
