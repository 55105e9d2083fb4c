"""InitProducerId (key 22): a producer id for an idempotent or transactional producer.

Without a ``transactional_id``, each call hands out a producer id never used before
(the registry reserves ids in blocks on disk, so a restart does not reuse one; in a
cluster, blocks claimed in ZooKeeper, so no two brokers hand out the same id), at
epoch 0; the log then deduplicates that producer's batches by sequence number. With
one, the transaction coordinator answers (``tickwheel.coordinator.transaction``): the
id's producer id at its next epoch, fencing an earlier instance.

Authorization (Kafka's ``handleInitProducerIdRequest``): a transactional id needs WRITE
on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).

The handler is written against version 4's classes (``DecodedRequest.body_as``), and
so is the coordinator's answer; ``reply`` converts it to the version asked.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import (
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, refuse_whole, reply

_FIRST_EPOCH = i16(0)


def _refusal(
    context: BrokerContext, request: DecodedRequest, transactional_id: str | None
) -> ErrorCode | None:
    if transactional_id is not None:
        allowed = authorize(
            context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        )
        return None if allowed else ErrorCode.transactional_id_authorization_failed
    if authorize_cluster(context, request, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False):
        return None
    if authorize_by_resource_type(context, request, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


async def handle_init_producer_id(context: BrokerContext, request: DecodedRequest) -> Response:
    """Allocate a fresh producer id, or ask the transaction coordinator."""
    body = request.body_as(InitProducerIdRequest)
    if context.authorizer is not None:
        refusal = _refusal(context, request, body.transactional_id)
        if refusal is not None:
            return refuse_whole(request, refusal)
    if body.transactional_id is not None:
        response = await context.transactions.apis.init_producer_id(body, request.api_version)
        return reply(request, response)
    producer_id = (
        await context.cluster.allocate_producer_id()
        if context.cluster is not None
        else context.topics.allocate_producer_id()
    )
    return reply(
        request,
        InitProducerIdResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            producer_id=ProducerId(producer_id),
            producer_epoch=_FIRST_EPOCH,
        ),
    )


INIT_PRODUCER_ID = ApiSpec(
    ApiKey.INIT_PRODUCER_ID, "InitProducerId", VersionRange(0, 5), handle_init_producer_id
)
