"""The share groups' administration APIs (KIP-932), answered by ``ShareGroupAdmin``.

============================  ===  ========  =========================================
API                           key  versions  what it does
============================  ===  ========  =========================================
DescribeShareGroupOffsets     90   0-1       start offsets (v1: lag) of share-partitions
AlterShareGroupOffsets        91   0         start share-partitions at new offsets
DeleteShareGroupOffsets       92   0         forget share-partitions' state
============================  ===  ========  =========================================

DeleteGroups of a share group goes to the same admin (``_groups``). Each request goes to
the group's coordinator, the leader of its ``__consumer_offsets`` partition, as for the
other group APIs: anywhere else the group is NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS
while that partition loads). No Python client has these calls; ``kafka-share-groups.sh``
makes them.

Each handler reads its request as the newest version's kio class and builds that
version's response (a v0 DescribeShareGroupOffsets answer drops the lag).

Authorization (Kafka's): DESCRIBE on the group to describe its offsets, READ to alter
them, DELETE to delete them; else GROUP_AUTHORIZATION_FAILED.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest
from kio.schema.alter_share_group_offsets.v0.response import (
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest
from kio.schema.delete_share_group_offsets.v0.response import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import DescribeShareGroupOffsetsRequest
from kio.schema.describe_share_group_offsets.v1.response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from tickwheel.coordinator.group.share import TopicOffsets
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._share import group_coordinator_error

DESCRIBE_SHARE_GROUP_OFFSETS_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
ALTER_SHARE_GROUP_OFFSETS_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
DELETE_SHARE_GROUP_OFFSETS_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS


def coordinator_error(context: BrokerContext, group_id: str) -> ErrorCode | None:
    """Why this broker cannot answer for ``group_id`` (None: it coordinates it)."""
    if not group_id:
        return ErrorCode.invalid_group_id
    return group_coordinator_error(context.groups, group_id)


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.none else error.name


def _described_topic(topic: TopicOffsets) -> DescribeShareGroupOffsetsResponseTopic:
    return DescribeShareGroupOffsetsResponseTopic(
        topic_name=TopicName(topic.topic_name),
        topic_id=topic.topic_id,
        partitions=tuple(
            DescribeShareGroupOffsetsResponsePartition(
                partition_index=i32(p.partition),
                start_offset=i64(p.start_offset),
                leader_epoch=i32(p.leader_epoch),
                lag=i64(p.lag),
                error_code=p.error_code,
                error_message=_message(p.error_code),
            )
            for p in topic.partitions
        ),
    )


def _group_error(
    context: BrokerContext, request: DecodedRequest, operation: AclOperation, group_id: str
) -> ErrorCode | None:
    """GROUP_AUTHORIZATION_FAILED, else the coordinator's error for the group, or None."""
    if not authorize(context, request, operation, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    return coordinator_error(context, group_id)


async def handle_describe_share_group_offsets(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """The start offsets of each group's share-partitions."""
    body = request.body_as(DescribeShareGroupOffsetsRequest)
    groups = []
    for group in body.groups:
        error = _group_error(context, request, AclOperation.DESCRIBE, group.group_id)
        topics: list[TopicOffsets] = []
        if error is None:
            asked = (
                None
                if group.topics is None
                else [(t.topic_name, [int(p) for p in t.partitions]) for t in group.topics]
            )
            error, topics = await context.share_admin.describe_offsets(group.group_id, asked)
        groups.append(
            DescribeShareGroupOffsetsResponseGroup(
                group_id=group.group_id,
                topics=tuple(_described_topic(topic) for topic in topics),
                error_code=error,
                error_message=_message(error),
            )
        )
    return reply(
        request, DescribeShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))
    )


async def handle_alter_share_group_offsets(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Start the named share-partitions at new offsets (an empty group only)."""
    body = request.body_as(AlterShareGroupOffsetsRequest)
    error = _group_error(context, request, AclOperation.READ, body.group_id)
    results: dict[str, dict[int, ErrorCode]] = {}
    if error is None:
        offsets: dict[str, dict[int, int]] = {
            topic.topic_name: {
                int(p.partition_index): int(p.start_offset) for p in topic.partitions
            }
            for topic in body.topics
        }
        error, results = await context.share_admin.alter_offsets(body.group_id, offsets)
    responses = tuple(
        AlterShareGroupOffsetsResponseTopic(
            topic_name=TopicName(name),
            topic_id=context.topic_id(name),
            partitions=tuple(
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=i32(partition),
                    error_code=partition_error,
                    error_message=_message(partition_error),
                )
                for partition, partition_error in partitions.items()
            ),
        )
        for name, partitions in results.items()
    )
    return reply(
        request,
        AlterShareGroupOffsetsResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=_message(error),
            responses=responses,
        ),
    )


async def handle_delete_share_group_offsets(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Forget the state of every partition of the named topics (an empty group only)."""
    body = request.body_as(DeleteShareGroupOffsetsRequest)
    error = _group_error(context, request, AclOperation.DELETE, body.group_id)
    results: dict[str, ErrorCode] = {}
    if error is None:
        names = [topic.topic_name for topic in body.topics]
        error, results = await context.share_admin.delete_offsets(body.group_id, names)
    responses = tuple(
        DeleteShareGroupOffsetsResponseTopic(
            topic_name=TopicName(name),
            topic_id=context.topic_id(name),
            error_code=topic_error,
            error_message=_message(topic_error),
        )
        for name, topic_error in results.items()
    )
    return reply(
        request,
        DeleteShareGroupOffsetsResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=_message(error),
            responses=responses,
        ),
    )


SHARE_ADMIN_SPECS: tuple[ApiSpec, ...] = (
    ApiSpec(
        DESCRIBE_SHARE_GROUP_OFFSETS_KEY,
        "DescribeShareGroupOffsets",
        VersionRange(0, 1),
        handle_describe_share_group_offsets,
    ),
    ApiSpec(
        ALTER_SHARE_GROUP_OFFSETS_KEY,
        "AlterShareGroupOffsets",
        VersionRange(0, 0),
        handle_alter_share_group_offsets,
    ),
    ApiSpec(
        DELETE_SHARE_GROUP_OFFSETS_KEY,
        "DeleteShareGroupOffsets",
        VersionRange(0, 0),
        handle_delete_share_group_offsets,
    ),
)
