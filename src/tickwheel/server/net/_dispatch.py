"""``Dispatcher``: from a request frame to a handler's response.

Decodes the frame against the versions handled, answers an ApiVersions request at a
version we do not handle with the v0 fallback body (error 35, listing the advertised
ranges, as the normal answer does), calls the API's
handler, and records the request's count and time under Kafka's metric names. Any
other frame that cannot be handled raises ``ProtocolError`` for the connection to
deal with: ``InvalidRequestError`` (the request breaks its schema) carries the
INVALID_REQUEST answer when the API has one, the others close the connection. A
handler only ever sees a request that decoded and passed the schema check, so no
null it did not ask for; whether its values are in range is its own to check.

Concurrency: runs on the broker's event-loop thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from tickwheel.protocol import (
    API_VERSIONS_KEY,
    UnsupportedVersionError,
    decode_request,
    encode_api_versions_fallback,
    peek_request_key,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis import ApiSpec, Response


class Dispatcher:
    """Routes each request frame to its API's handler."""

    def __init__(self, context: BrokerContext, specs: Iterable[ApiSpec]) -> None:
        self._context = context
        self._specs = {spec.api_key: spec for spec in specs}
        self._versions = {key: spec.versions for key, spec in self._specs.items()}
        self._advertised = sorted((key, spec.advertised) for key, spec in self._specs.items())

    async def dispatch(self, frame: bytes) -> Response:
        """The response to one request frame (None: send nothing)."""
        try:
            request = decode_request(frame, self._versions)
        except UnsupportedVersionError:
            key = peek_request_key(frame)
            if key.api_key != API_VERSIONS_KEY:
                raise
            return encode_api_versions_fallback(key.correlation_id, self._advertised)
        spec = self._specs[request.api_key]
        started_s = time.perf_counter()
        response = await spec.handle(self._context, request)
        self._context.metrics.record_request(spec.name, time.perf_counter() - started_s)
        return response
