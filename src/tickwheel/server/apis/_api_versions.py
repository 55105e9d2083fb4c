"""ApiVersions (key 18): the versions this broker handles, per API.

An ApiVersions request at a version we do not handle never reaches this handler: the
dispatcher answers it with the v0 body and UNSUPPORTED_VERSION (35), so the client can
retry at a version we listed (Kafka's rule).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


async def handle_api_versions(context: BrokerContext, request: DecodedRequest) -> Response:
    """List every API key with its supported version range."""
    return reply(
        request,
        {
            "error_code": ErrorCode.none,
            "api_keys": [
                {"api_key": key, "min_version": r.min_version, "max_version": r.max_version}
                for key, r in sorted(context.supported_versions.items())
            ],
            "throttle_time": 0,
        },
    )


API_VERSIONS = ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", VersionRange(0, 3), handle_api_versions)
