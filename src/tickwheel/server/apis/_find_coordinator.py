"""FindCoordinator (key 10): the group, transaction or share coordinator of a key.

As Kafka's ``KafkaApis.getCoordinator`` handles every key type in one place, this
handler sends key_type 1 (a transactional id) to the transaction coordinator, key_type
2 (a share-partition, ``group:topicId:partition``, v6+) to the share coordinator, and
every other request (key_type 0, a group; unknown types, answered INVALID_REQUEST) to
the group coordinator. A v4+ request carries one key type for all its keys.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

from typing import Any

from tickwheel.coordinator import FIND_COORDINATOR_KEY, GROUP_API_VERSIONS
from tickwheel.coordinator.share import COORDINATOR_TYPE_SHARE, SHARE_KEY_MIN_VERSION
from tickwheel.coordinator.transaction import COORDINATOR_TYPE_TRANSACTION
from tickwheel.protocol import DecodedRequest
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response


async def handle_find_coordinator(context: BrokerContext, request: DecodedRequest) -> Response:
    """Route to the coordinator of the request's key type."""
    body: Any = request.body
    key_type = int(getattr(body, "key_type", 0))
    if key_type == COORDINATOR_TYPE_SHARE and request.api_version >= SHARE_KEY_MIN_VERSION:
        if context.share_coordinator is None:
            raise RuntimeError("the share coordinator is not started")
        return await context.share_coordinator.handle(request)
    if key_type == COORDINATOR_TYPE_TRANSACTION:
        if context.transactions is None:
            raise RuntimeError("the transaction coordinator is not started")
        return await context.transactions.handle(request)
    if context.groups is None:
        raise RuntimeError("the group coordinator is not started")
    return await context.groups.handle(request)


FIND_COORDINATOR = ApiSpec(
    FIND_COORDINATOR_KEY,
    "FindCoordinator",
    GROUP_API_VERSIONS[FIND_COORDINATOR_KEY],
    handle_find_coordinator,
)
