"""DeleteTopics (key 20): delete topics and their logs.

An unknown topic → UNKNOWN_TOPIC_OR_PARTITION; ``delete.topic.enable=false`` →
TOPIC_DELETION_DISABLED; an internal topic (``__consumer_offsets``) →
INVALID_TOPIC_EXCEPTION; v6's by-id form deletes the topic of that id, or answers
UNKNOWN_TOPIC_ID. Operations waiting on a deleted partition complete at once (their
partition is unknown now: DelayedFetch case B, DelayedProduce case A).

Authorization (Kafka's ``handleDeleteTopicsRequest``): DELETE on each topic, else it is
answered TOPIC_AUTHORIZATION_FAILED (before its existence is checked, so a refused
principal cannot probe for names). A refusal reveals nothing the request did not say:
one by name answers the zero topic id, one by id answers no name unless the principal
may DESCRIBE the topic (DELETE implies DESCRIBE, so only a refused one can lack it).

Controller mutation quota (KIP-599): the partitions of each deleted topic are recorded
against the client's ``controller_mutation_rate`` and the answer carries the throttle
time they earn; from v5 a topic met while the client is already over its quota is
refused with THROTTLING_QUOTA_EXCEEDED.

Written against v6's classes; v1-v5 name topics in a list of names (``topic_names``),
which v6 replaced, so they are read with v5's request class.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import uuid

from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as DeleteTopicsByName
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import is_internal_topic
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._client_quotas import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    mutation_quota,
    throttle_time,
)
from tickwheel.server.apis._common import ApiSpec, Response, reply, to_ms
from tickwheel.server.quotas import MutationQuota

_FIRST_TOPIC_STRUCT_VERSION = 6
_STRICT_QUOTA_VERSION = 5
"""From this version a client over its controller mutation quota is refused (KIP-599)."""
_NO_TOPIC_ID = uuid.UUID(int=0)


def _refusal(
    context: BrokerContext, request: DecodedRequest, name: str
) -> tuple[ErrorCode, str] | None:
    """Why topic ``name`` may not be deleted, if it may not."""
    if not context.config.delete_topic_enable:
        return ErrorCode.topic_deletion_disabled, "delete.topic.enable is false"
    if not authorize(context, request, AclOperation.DELETE, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, "Authorization failed."
    if is_internal_topic(name):
        # Kafka's broker leaves this to ACLs (and kafka-topics refuses it client-side);
        # with no authorizer here, deleting it would drop every committed offset under
        # a running coordinator, so refuse it as Kafka refuses a produce to it.
        return ErrorCode.invalid_topic_exception, f"cannot delete internal topic {name}"
    if name not in context.topics.topics:
        return ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
    return None


async def _delete(
    context: BrokerContext,
    request: DecodedRequest,
    name: str | None,
    timeout_ms: int,
    mutations: MutationQuota,
) -> tuple[ErrorCode, str | None]:
    if name is None:
        return ErrorCode.unknown_topic_id, "no topic has this id"
    refusal = _refusal(context, request, name)
    if refusal is not None:
        return refusal
    if mutations.refused():
        return ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE
    mutations.record(context.topics.topics[name].num_partitions)
    if context.cluster is not None:
        await context.cluster.delete_topic(name, timeout_ms=timeout_ms)
    else:
        context.delete_topic(name)
    return ErrorCode.none, None


def _name(context: BrokerContext, topic: DeleteTopicState) -> str | None:
    """The name of a v6 ``topic``: the one given, else the one its id has, if any."""
    if topic.name is not None:
        return topic.name
    return None if topic.topic_id is None else context.topic_name(topic.topic_id)


async def handle_delete_topics(context: BrokerContext, request: DecodedRequest) -> Response:
    """Delete each named topic."""
    names: list[tuple[str | None, uuid.UUID | None]]
    if request.api_version >= _FIRST_TOPIC_STRUCT_VERSION:
        body = request.body_as(DeleteTopicsRequest)
        names = [(_name(context, t), t.topic_id) for t in body.topics]
        timeout_ms = to_ms(body.timeout)
    else:
        by_name = request.body_as(DeleteTopicsByName)
        names = [(name, None) for name in by_name.topic_names]
        timeout_ms = to_ms(by_name.timeout)
    mutations = mutation_quota(context, request, strict_from_version=_STRICT_QUOTA_VERSION)
    responses = []
    for known_name, asked_id in names:
        name = known_name
        topic_id = (context.topic_id(name) if name is not None else None) or asked_id
        error, message = await _delete(context, request, name, timeout_ms, mutations)
        if error == ErrorCode.topic_authorization_failed:
            topic_id, name = _refused_answer(context, request, name, asked_id)
        responses.append(
            DeletableTopicResult(
                name=None if name is None else TopicName(name),
                topic_id=topic_id,
                error_code=error,
                error_message=message,
            )
        )
    return reply(
        request,
        DeleteTopicsResponse(
            throttle_time=throttle_time(mutations.throttle_ms()), responses=tuple(responses)
        ),
    )


def _refused_answer(
    context: BrokerContext, request: DecodedRequest, name: str | None, asked_id: uuid.UUID | None
) -> tuple[uuid.UUID, str | None]:
    """The (topic id, name) a refused topic is answered with: what the request named."""
    if asked_id is None or asked_id == _NO_TOPIC_ID:
        return _NO_TOPIC_ID, name
    if name is not None and authorize(
        context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=False
    ):
        return asked_id, name
    return asked_id, None


DELETE_TOPICS = ApiSpec(
    ApiKey.DELETE_TOPICS, "DeleteTopics", VersionRange(1, 6), handle_delete_topics
)
