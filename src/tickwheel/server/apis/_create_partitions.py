"""CreatePartitions (key 37): grow topics to a larger partition count.

An unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one →
INVALID_PARTITIONS; an assignment naming another broker → INVALID_REPLICA_ASSIGNMENT;
a topic named twice → INVALID_REQUEST; an internal topic → INVALID_TOPIC_EXCEPTION;
more new partitions than the file-descriptor budget holds → POLICY_VIOLATION; an
``OSError`` while creating them → KAFKA_STORAGE_ERROR with the new partitions removed
again (see CreateTopics for why these codes). ``validate_only`` changes nothing.

Authorization (Kafka's ``handleCreatePartitionsRequest``): ALTER on each topic, else it
is answered TOPIC_AUTHORIZATION_FAILED.

Controller mutation quota (KIP-599): the partitions added are recorded against the
client's ``controller_mutation_rate`` and the answer carries the throttle time they
earn; from v3 a topic met while the client is already over its quota is refused with
THROTTLING_QUOTA_EXCEEDED.

Written against v3's classes; ``body_as`` and ``reply`` carry v0-v2.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import is_internal_topic
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names
from tickwheel.server._cluster import add_cluster_partitions
from tickwheel.server._context import STORAGE_ERRORS, BrokerContext
from tickwheel.server.apis._client_quotas import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    mutation_quota,
    throttle_time,
)
from tickwheel.server.apis._common import ApiSpec, Response, reply, to_ms
from tickwheel.server.apis._create_topics import (
    TopicValidationError,
    storage_error,
    validate_descriptor_budget,
    validate_partition_count,
)

_STRICT_QUOTA_VERSION = 3
"""From this version a client over its controller mutation quota is refused (KIP-599)."""


def _failed(name: TopicName, error: TopicValidationError) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(
        name=name, error_code=error.error_code, error_message=str(error)
    )


def _validate(
    context: BrokerContext, topic: CreatePartitionsTopic, counts: Counter[TopicName]
) -> int:
    """The number of partitions ``topic`` adds; ``TopicValidationError`` if invalid."""
    if counts[topic.name] > 1:
        raise TopicValidationError(
            ErrorCode.invalid_request, f"topic {topic.name!r} appears more than once"
        )
    if is_internal_topic(topic.name):
        # More partitions would move groups to other partitions (hash mod count) and
        # strand their committed offsets; Kafka leaves this to ACLs, none exist here.
        raise TopicValidationError(
            ErrorCode.invalid_topic_exception,
            f"cannot add partitions to internal topic {topic.name}",
        )
    info = context.topics.topics.get(topic.name)
    if info is None:
        raise TopicValidationError(
            ErrorCode.unknown_topic_or_partition, f"topic {topic.name!r} does not exist"
        )
    if topic.count <= info.num_partitions:
        raise TopicValidationError(
            ErrorCode.invalid_partitions,
            f"topic {topic.name!r} has {info.num_partitions} partitions; "
            f"{topic.count} would not add any",
        )
    validate_partition_count(topic.count)
    validate_descriptor_budget(context, topic.count - info.num_partitions)
    for assignment in topic.assignments or ():
        if context.cluster is None and list(assignment.broker_ids) != [context.broker_id]:
            raise TopicValidationError(
                ErrorCode.invalid_replica_assignment,
                f"new partitions must be on broker {context.broker_id} only",
            )
    return topic.count - info.num_partitions


async def handle_create_partitions(context: BrokerContext, request: DecodedRequest) -> Response:
    """Grow each topic unless ``validate_only``."""
    body = request.body_as(CreatePartitionsRequest)
    counts = Counter(topic.name for topic in body.topics)
    allowed = authorized_names(context, request, AclOperation.ALTER, ResourceType.TOPIC, counts)
    mutations = mutation_quota(context, request, strict_from_version=_STRICT_QUOTA_VERSION)
    results: list[CreatePartitionsTopicResult] = []
    for topic in body.topics:
        try:
            if topic.name not in allowed and counts[topic.name] == 1:
                raise TopicValidationError(
                    ErrorCode.topic_authorization_failed, "Authorization failed."
                )
            added = _validate(context, topic, counts)
            if mutations.refused():
                raise TopicValidationError(
                    ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE
                )
        except TopicValidationError as exc:
            results.append(_failed(topic.name, exc))
            continue
        if not body.validate_only:
            mutations.record(added)
        if context.cluster is not None:
            error = await add_cluster_partitions(
                context, topic, validate_only=body.validate_only, timeout_ms=to_ms(body.timeout)
            )
            if error is not None:
                refused = TopicValidationError(error.error_code, error.message)
                results.append(_failed(topic.name, refused))
                continue
        elif not body.validate_only:
            try:
                context.add_partitions(topic.name, topic.count)
            except STORAGE_ERRORS as exc:
                results.append(_failed(topic.name, storage_error(exc)))
                continue
        results.append(CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.none))
    return reply(
        request,
        CreatePartitionsResponse(
            throttle_time=throttle_time(mutations.throttle_ms()), results=tuple(results)
        ),
    )


CREATE_PARTITIONS = ApiSpec(
    ApiKey.CREATE_PARTITIONS, "CreatePartitions", VersionRange(0, 3), handle_create_partitions
)
