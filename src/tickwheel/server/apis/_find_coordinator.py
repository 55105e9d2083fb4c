"""FindCoordinator (key 10): the group, transaction or share coordinator of a key.

As Kafka's ``KafkaApis.getCoordinator`` handles every key type in one place, this
handler sends key_type 1 (a transactional id) to the transaction coordinator, key_type
2 (a share-partition, ``group:topicId:partition``, v6+) to the share coordinator, and
every other request (key_type 0, a group; unknown types, answered INVALID_REQUEST) to
the group coordinator. A v4+ request carries one key type for all its keys.

Authorization (Kafka's ``getCoordinator``): a group key needs DESCRIBE on the group
(GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), a share key CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED, for the whole request). Only the keys allowed reach the
coordinator; the others are answered with the error and no node.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.coordinator import FIND_COORDINATOR_KEY
from tickwheel.coordinator.group import GROUP_API_VERSIONS
from tickwheel.coordinator.share_state import COORDINATOR_TYPE_SHARE, SHARE_KEY_MIN_VERSION
from tickwheel.coordinator.transaction import COORDINATOR_TYPE_TRANSACTION
from tickwheel.protocol import (
    DecodedRequest,
    build_entity,
    encode_response,
    response_schema,
)
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import (
    AUTHORIZATION_FAILED,
    authorize_cluster,
    authorized_names,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, refuse_whole

_MULTI_KEY_VERSION = 4
_NO_NODE: dict[str, Any] = {"node_id": -1, "host": "", "port": -1}


def _coordinator_answer(context: BrokerContext, body: Any) -> Any:
    """The coordinator's response entity to ``body`` (a group or transaction key)."""
    if int(getattr(body, "key_type", 0)) == COORDINATOR_TYPE_TRANSACTION:
        return context.transactions.apis.find_coordinator(body)
    return context.groups.apis.classic.find_coordinator(body)


async def _authorized(context: BrokerContext, request: DecodedRequest) -> Response | None:
    """The answer when the principal may not look up every key; None when it may."""
    body: Any = request.body
    key_type = int(getattr(body, "key_type", 0))
    if key_type == COORDINATOR_TYPE_SHARE and request.api_version >= SHARE_KEY_MIN_VERSION:
        if authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return None
        return refuse_whole(request, ErrorCode.cluster_authorization_failed)
    resource_type = (
        ResourceType.TRANSACTIONAL_ID
        if key_type == COORDINATOR_TYPE_TRANSACTION
        else ResourceType.GROUP
    )
    error = AUTHORIZATION_FAILED[resource_type]
    keys = [body.key] if request.api_version < _MULTI_KEY_VERSION else list(body.coordinator_keys)
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, resource_type, keys)
    if len(allowed) == len(set(keys)):
        return None
    if request.api_version < _MULTI_KEY_VERSION:
        return refuse_whole(request, error)
    refused = [
        {"key": key, **_NO_NODE, "error_code": error, "error_message": None}
        for key in keys
        if key not in allowed
    ]
    kept = tuple(key for key in keys if key in allowed)
    if not kept:
        cls = response_schema(request.api_key, request.api_version)
        response = build_entity(cls, {"throttle_time": 0, "coordinators": refused})
    else:
        answered = _coordinator_answer(context, dataclasses.replace(body, coordinator_keys=kept))
        response = dataclasses.replace(
            answered,
            coordinators=(
                *answered.coordinators,
                *(build_entity(type(answered.coordinators[0]), r) for r in refused),
            ),
        )
    return encode_response(request.correlation_id, response)


async def handle_find_coordinator(context: BrokerContext, request: DecodedRequest) -> Response:
    """Route to the coordinator of the request's key type."""
    body: Any = request.body
    if context.authorizer is not None:
        refused = await _authorized(context, request)
        if refused is not None:
            return refused
    key_type = int(getattr(body, "key_type", 0))
    if key_type == COORDINATOR_TYPE_SHARE and request.api_version >= SHARE_KEY_MIN_VERSION:
        response = context.share_coordinator.apis.find_coordinator(body)
    else:
        response = _coordinator_answer(context, body)
    return encode_response(request.correlation_id, response)


FIND_COORDINATOR = ApiSpec(
    FIND_COORDINATOR_KEY,
    "FindCoordinator",
    GROUP_API_VERSIONS[FIND_COORDINATOR_KEY],
    handle_find_coordinator,
)
