"""ApiVersions (key 18): the versions this broker handles, per API, and its features.

Each API's range is its ``ApiSpec.advertised``: the versions handled, except Produce,
listed from 0 as Kafka 4 lists it (KAFKA-18659) while versions 0-2 close the
connection.

The answer is built with v4's classes and converted to the version asked. An
ApiVersions request at a version we do not handle never reaches this handler: the
dispatcher answers it with the v0 body and UNSUPPORTED_VERSION (35), so the client can
retry at a version we listed (Kafka's rule).

From v3 the answer carries the features (``_features``): those this broker supports
with their level ranges, and the cluster's finalized levels with their epoch (-1 while
a cluster broker has not read them yet). Below v4 a supported feature whose range
starts at 0 is left out, as Kafka leaves it out (older Java clients reject such a
range, KAFKA-17492); every feature served here starts at 0, so only v4 lists them. A
finalized level is sent as both its minimum and maximum, as Kafka sends it.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Final

from kio.schema.api_versions.v4.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i64

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.server._context import BrokerContext
from tickwheel.server._features import SUPPORTED_FEATURES
from tickwheel.server.apis._common import ApiSpec, Response, reply

_LEVEL_0_LISTED_FROM: Final = 4


def _supported_features(api_version: int) -> tuple[SupportedFeatureKey, ...]:
    return tuple(
        SupportedFeatureKey(name=f.name, min_version=i16(f.min_level), max_version=i16(f.max_level))
        for f in SUPPORTED_FEATURES
        if f.min_level > 0 or api_version >= _LEVEL_0_LISTED_FROM
    )


async def handle_api_versions(context: BrokerContext, request: DecodedRequest) -> Response:
    """List every API key with its supported version range, and the features."""
    api_keys = tuple(
        ApiVersion(api_key=i16(key), min_version=i16(r.min_version), max_version=i16(r.max_version))
        for key, r in sorted(context.advertised_versions.items())
    )
    finalized = context.finalized_features
    return reply(
        request,
        ApiVersionsResponse(
            error_code=ErrorCode.none,
            api_keys=api_keys,
            throttle_time=NO_THROTTLE,
            supported_features=_supported_features(request.api_version),
            finalized_features_epoch=i64(finalized.epoch),
            finalized_features=tuple(
                FinalizedFeatureKey(
                    name=name, max_version_level=i16(level), min_version_level=i16(level)
                )
                for name, level in sorted(finalized.levels.items())
            ),
        ),
    )


API_VERSIONS = ApiSpec(ApiKey.API_VERSIONS, "ApiVersions", VersionRange(0, 4), handle_api_versions)
