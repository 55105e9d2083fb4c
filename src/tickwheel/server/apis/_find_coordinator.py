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

The handler is written against version 6's classes, as the coordinators are: a request
before v4 has its one key carried as v6's only coordinator key, and the one coordinator
answered is carried back into that version's top-level fields.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import (
    FindCoordinatorRequest as OneKeyRequest,
)
from kio.schema.find_coordinator.v3.response import (
    FindCoordinatorResponse as OneKeyResponse,
)
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i32

from tickwheel.coordinator import FIND_COORDINATOR_KEY
from tickwheel.coordinator.group import GROUP_API_VERSIONS
from tickwheel.coordinator.share_state import SHARE_KEY_MIN_VERSION
from tickwheel.protocol import NO_THROTTLE, CoordinatorType, DecodedRequest
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import (
    AUTHORIZATION_FAILED,
    authorize_cluster,
    authorized_names,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, refuse_whole, reply

_MULTI_KEY_VERSION: Final = 4
_NO_NODE: Final = BrokerId(-1)
_NO_PORT: Final = i32(-1)

# The key types as numbers, for comparing with the request's (a kio ``i8``).
_TRANSACTION_KEYS: Final = int(CoordinatorType.TRANSACTION)
_SHARE_KEYS: Final = int(CoordinatorType.SHARE)


def _keys_request(request: DecodedRequest) -> FindCoordinatorRequest:
    """The request as v6; before v4, its one key (of type 0, a group, in v0) alone."""
    if request.api_version >= _MULTI_KEY_VERSION:
        return request.body_as(FindCoordinatorRequest)
    one = request.body_as(OneKeyRequest)
    return FindCoordinatorRequest(key_type=one.key_type, coordinator_keys=(one.key,))


def _reply(request: DecodedRequest, response: FindCoordinatorResponse) -> bytes:
    """``response`` at the request's version; before v4, its one coordinator."""
    if request.api_version >= _MULTI_KEY_VERSION:
        return reply(request, response)
    (only,) = response.coordinators
    return reply(
        request,
        OneKeyResponse(
            throttle_time=response.throttle_time,
            error_code=only.error_code,
            error_message=only.error_message,
            node_id=only.node_id,
            host=only.host,
            port=only.port,
        ),
    )


def _is_share_request(request: DecodedRequest, body: FindCoordinatorRequest) -> bool:
    return body.key_type == _SHARE_KEYS and request.api_version >= SHARE_KEY_MIN_VERSION


def _coordinator_answer(
    context: BrokerContext, body: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    """The coordinator's answer to ``body`` (group or transaction keys)."""
    if body.key_type == _TRANSACTION_KEYS:
        return context.transactions.apis.find_coordinator(body)
    return context.groups.apis.classic.find_coordinator(body)


async def _authorized(
    context: BrokerContext, request: DecodedRequest, body: FindCoordinatorRequest
) -> Response | None:
    """The answer when the principal may not look up every key; None when it may."""
    if _is_share_request(request, body):
        if authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return None
        return refuse_whole(request, ErrorCode.cluster_authorization_failed)
    resource_type = (
        ResourceType.TRANSACTIONAL_ID if body.key_type == _TRANSACTION_KEYS else ResourceType.GROUP
    )
    error = AUTHORIZATION_FAILED[resource_type]
    keys = body.coordinator_keys
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, resource_type, keys)
    if len(allowed) == len(set(keys)):
        return None
    if request.api_version < _MULTI_KEY_VERSION:
        return refuse_whole(request, error)
    refused = tuple(
        Coordinator(
            key=key, node_id=_NO_NODE, host="", port=_NO_PORT, error_code=error, error_message=None
        )
        for key in keys
        if key not in allowed
    )
    kept = tuple(key for key in keys if key in allowed)
    answered: tuple[Coordinator, ...] = ()
    if kept:
        kept_body = dataclasses.replace(body, coordinator_keys=kept)
        answered = _coordinator_answer(context, kept_body).coordinators
    return reply(
        request,
        FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=(*answered, *refused)),
    )


async def handle_find_coordinator(context: BrokerContext, request: DecodedRequest) -> Response:
    """Route to the coordinator of the request's key type."""
    body = _keys_request(request)
    if context.authorizer is not None:
        refused = await _authorized(context, request, body)
        if refused is not None:
            return refused
    if _is_share_request(request, body):
        return reply(request, context.share_coordinator.apis.find_coordinator(body))
    return _reply(request, _coordinator_answer(context, body))


FIND_COORDINATOR = ApiSpec(
    FIND_COORDINATOR_KEY,
    "FindCoordinator",
    GROUP_API_VERSIONS[FIND_COORDINATOR_KEY],
    handle_find_coordinator,
)
