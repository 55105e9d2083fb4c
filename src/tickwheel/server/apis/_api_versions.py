"""ApiVersions (key 18): the versions this broker handles, per API.

Each API's range is its ``ApiSpec.advertised``: the versions handled, except Produce,
listed from 0 as Kafka 4 lists it (KAFKA-18659) while versions 0-2 close the
connection.

The answer is built with v3's classes and converted to the version asked. An
ApiVersions request at a version we do not handle never reaches this handler: the
dispatcher answers it with the v0 body and UNSUPPORTED_VERSION (35), so the client can
retry at a version we listed (Kafka's rule).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


async def handle_api_versions(context: BrokerContext, request: DecodedRequest) -> Response:
    """List every API key with its supported version range."""
    api_keys = tuple(
        ApiVersion(api_key=i16(key), min_version=i16(r.min_version), max_version=i16(r.max_version))
        for key, r in sorted(context.advertised_versions.items())
    )
    return reply(
        request,
        ApiVersionsResponse(
            error_code=ErrorCode.none, api_keys=api_keys, throttle_time=NO_THROTTLE
        ),
    )


API_VERSIONS = ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", VersionRange(0, 3), handle_api_versions)
