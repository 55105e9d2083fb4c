"""The APIs a finalized feature turns on: answered only while it is at level 1 or more.

Kafka's broker serves the consumer group protocol (KIP-848) only while ``group.version``
is finalized at 1 or more, and share groups (KIP-932) only while ``share.version`` is;
below, each of their requests is refused whole with UNSUPPORTED_VERSION
(``isConsumerGroupProtocolEnabled``, ``isShareGroupProtocolEnabled``), so that
``kafka-features.sh downgrade`` really turns them off. ``feature_gated`` wraps the
handlers of those APIs whose response has a top-level error code to carry the refusal:

=============================  =================  =====================================
API                            key                feature
=============================  =================  =====================================
ConsumerGroupHeartbeat         68                 ``group.version``
ShareGroupHeartbeat            76                 ``share.version``
ShareFetch                     78                 ``share.version``
ShareAcknowledge               79                 ``share.version``
AlterShareGroupOffsets         91                 ``share.version``
DeleteShareGroupOffsets        92                 ``share.version``
=============================  =================  =====================================

The describing APIs (ConsumerGroupDescribe, ShareGroupDescribe,
DescribeShareGroupOffsets) answer per group and stay served: with the feature off no
new group of that type forms, so they find none.

Concurrency: the wrapped handlers run on the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, DecodedRequest
from tickwheel.server._context import BrokerContext
from tickwheel.server._features import GROUP_VERSION, SHARE_VERSION
from tickwheel.server.apis._common import ApiSpec, Handler, Response, refuse_whole

GATED_APIS: Final[Mapping[int, str]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: GROUP_VERSION,
    ApiKey.SHARE_GROUP_HEARTBEAT: SHARE_VERSION,
    ApiKey.SHARE_FETCH: SHARE_VERSION,
    ApiKey.SHARE_ACKNOWLEDGE: SHARE_VERSION,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: SHARE_VERSION,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: SHARE_VERSION,
}
_ENABLED_FROM_LEVEL: Final = 1


def _gated(handle: Handler, feature: str) -> Handler:
    async def handle_if_enabled(context: BrokerContext, request: DecodedRequest) -> Response:
        if context.finalized_features.level(feature) < _ENABLED_FROM_LEVEL:
            return refuse_whole(request, ErrorCode.unsupported_version)
        return await handle(context, request)

    return handle_if_enabled


def feature_gated(specs: tuple[ApiSpec, ...]) -> tuple[ApiSpec, ...]:
    """``specs`` with the handlers of ``GATED_APIS`` answering only while their feature
    is on."""
    return tuple(
        replace(spec, handle=_gated(spec.handle, GATED_APIS[spec.api_key]))
        if spec.api_key in GATED_APIS
        else spec
        for spec in specs
    )
