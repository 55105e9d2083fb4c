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

A client with a ``request_percentage`` quota (``tickwheel.server.quotas``) has its
handlers' own running time measured (``TimedHandler``: their steps on the event loop,
not their waits) and recorded as Kafka does, in percent of one handler per second; over
the quota, the answer's ``throttle_time_ms`` says the longer of the API's own throttle
and the request quota's (``with_throttle_time``), and the connection is muted for it.
ApiVersions, the SASL requests, WriteTxnMarkers and followers' fetches are exempt, as
Kafka exempts them.

While the broker's fault plan (``tickwheel.faults``) holds a rule, each request is
matched against it; a request a rule hits is carried out by the plan through
``DispatchEffects``. With no rule, the check is one attribute read.

Concurrency: runs on the broker's event-loop thread.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable

from kio.schema.fetch.v12.request import FetchRequest

from tickwheel.faults import FaultPlan
from tickwheel.protocol import (
    API_VERSIONS_KEY,
    ApiKey,
    DecodedRequest,
    UnsupportedVersionError,
    decode_request,
    encode_api_versions_fallback,
    peek_request_key,
    with_throttle_time,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis import ApiSpec, Response
from tickwheel.server.apis._client_quotas import quota_client
from tickwheel.server.net._fault_effects import DispatchEffects
from tickwheel.server.quotas import TimedHandler
from tickwheel.timer import SystemTimer

_PERCENT_PER_S = 100.0
"""A second of one handler's time, in the units of ``request_percentage``."""
_EXEMPT_KEYS = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.WRITE_TXN_MARKERS,
    }
)


class Dispatcher:
    """Routes each request frame to its API's handler."""

    def __init__(
        self,
        context: BrokerContext,
        specs: Iterable[ApiSpec],
        faults: FaultPlan,
        fault_timer: SystemTimer,
    ) -> None:
        self._context = context
        self._faults = faults
        self._fault_effects = DispatchEffects(context, self._handle, fault_timer)
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
        faults = self._faults
        hit = faults.match(request) if faults.armed else None
        if hit is None:
            response = await self._handle(request)
        else:
            response = await faults.apply(hit, request, self._fault_effects)
        self._context.metrics.record_request(spec.name, time.perf_counter() - started_s)
        return response

    def _handle(self, request: DecodedRequest) -> Awaitable[Response]:
        """The handler's response, under the client's request quota: the handler's own
        coroutine when no request quota applies (no frame between it and the reader)."""
        spec = self._specs[request.api_key]
        quotas = self._context.quotas
        client = quota_client(request) if quotas.configs else None
        if client is None or not quotas.request.applies(*client) or _exempt(request):
            return spec.handle(self._context, request)
        return self._handle_timed(spec, request, client)

    async def _handle_timed(
        self, spec: ApiSpec, request: DecodedRequest, client: tuple[str, str]
    ) -> Response:
        """The handler's response, its running time recorded against the client's
        request quota, ``throttle_time_ms`` raised when over it."""
        quotas = self._context.quotas
        timed = TimedHandler(spec.handle(self._context, request))
        response = await timed
        throttle_ms = quotas.request.record(*client, timed.busy_s * _PERCENT_PER_S)
        if throttle_ms > 0 and response is not None:
            response = with_throttle_time(
                response, request.api_key, request.api_version, throttle_ms
            )
        return response


def _exempt(request: DecodedRequest) -> bool:
    """Whether the request is exempt from request quotas (Kafka's exempt requests)."""
    if request.api_key in _EXEMPT_KEYS:
        return True
    return request.api_key == ApiKey.FETCH and request.body_as(FetchRequest).replica_id >= 0
