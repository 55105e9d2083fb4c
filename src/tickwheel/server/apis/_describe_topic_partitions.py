"""DescribeTopicPartitions (key 75, KIP-966): topics and their partitions, page by page.

What Kafka 4's admin client sends for ``describeTopics``: Metadata's topic part without
the brokers, and paged. The topics asked for (none: every topic the principal may
DESCRIBE) are described in name order; a response describes at most
``response_partition_limit`` partitions, capped by the broker's
``max.request.partition.size.limit`` (at least one). Where the limit stops it, the
response's ``next_cursor`` names the topic and partition the next request starts from
(the request's ``cursor``); a topic the limit leaves out whole is named with partition
0. A cursor that names a topic outside a given topic list, or a negative partition, is
INVALID_REQUEST for every topic asked for, as in Kafka.

The answer follows Kafka's ``DescribeTopicPartitionsRequestHandler``: a topic asked for
by name that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for
an illegal name) with the zero topic id; one the principal may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED with the zero id, no partitions, and is answered after the
others (its existence is not revealed). A partition without a live leader has leader
-1 and no error. Every described topic carries the operations the principal may
perform on it. Each partition's eligible leader replicas and last known ELR (KIP-966)
are those of its state in the cluster's metadata cache, kept by the controller while
``eligible.leader.replicas.version`` is 1 (``tickwheel.cluster._elr``); a single node
has none.

Partitions come from the same place as Metadata's: this broker on a single node, the
cluster's metadata cache in a cluster.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from kio.schema.describe_topic_partitions.v0.request import Cursor as RequestCursor
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
from kio.schema.describe_topic_partitions.v0.response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import MetadataResponsePartition
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition, is_internal_topic
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorized_names, authorized_operations
from tickwheel.server._cluster import partition_entries
from tickwheel.server._context import BrokerContext
from tickwheel.server._topics import topic_name_error
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._metadata import local_partitions

_log = logging.getLogger(__name__)
_ZERO_TOPIC_ID = uuid.UUID(int=0)
_NOT_ASKED = -(2**31)


def _cursor_error(body: DescribeTopicPartitionsRequest, names: set[str]) -> str | None:
    """Why the request's cursor cannot be followed, or None."""
    cursor = body.cursor
    if cursor is None:
        return None
    if body.topics and cursor.topic_name not in names:
        return f"cursor.topic_name {cursor.topic_name!r} is not among the topics asked for"
    if cursor.partition_index < 0:
        return f"cursor.partition_index must not be negative, got {cursor.partition_index}"
    return None


def _refusal(
    body: DescribeTopicPartitionsRequest, error_code: ErrorCode
) -> DescribeTopicPartitionsResponse:
    """Every topic asked for refused with ``error_code``."""
    return DescribeTopicPartitionsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(_error_topic(error_code, t.name, is_internal=False) for t in body.topics),
    )


def _error_topic(
    error_code: ErrorCode, name: str, *, is_internal: bool, operations: int = _NOT_ASKED
) -> DescribeTopicPartitionsResponseTopic:
    """A topic answered with ``error_code``: the zero topic id and no partitions."""
    return DescribeTopicPartitionsResponseTopic(
        error_code=error_code,
        name=TopicName(name),
        topic_id=_ZERO_TOPIC_ID,
        is_internal=is_internal,
        partitions=(),
        topic_authorized_operations=i32(operations),
    )


def _unknown_topic(name: str, operations: int) -> DescribeTopicPartitionsResponseTopic:
    error_code = (
        ErrorCode.invalid_topic_exception
        if topic_name_error(name)
        else ErrorCode.unknown_topic_or_partition
    )
    return _error_topic(
        error_code, name, is_internal=is_internal_topic(name), operations=operations
    )


def _partitions(
    context: BrokerContext, name: str, num_partitions: int
) -> Sequence[MetadataResponsePartition]:
    """``name``'s partitions as Metadata describes them, in partition order."""
    if context.cluster is not None:
        return partition_entries(context.cluster, name, context.request_listener)
    return local_partitions(context, name, num_partitions)


def _described(
    context: BrokerContext, name: str, partition: MetadataResponsePartition
) -> DescribeTopicPartitionsResponsePartition:
    """A Metadata partition entry as DescribeTopicPartitions answers it, with its
    ELRs: a partition without a leader has leader -1 and no error of its own."""
    state = None
    if context.cluster is not None:
        tp = TopicPartition(name, partition.partition_index)
        state = context.cluster.cache.partition_states.get(tp)
    elr = () if state is None else state.elr
    last_known_elr = () if state is None else state.last_known_elr
    return DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.none,
        partition_index=partition.partition_index,
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        replica_nodes=partition.replica_nodes,
        isr_nodes=partition.isr_nodes,
        eligible_leader_replicas=tuple(BrokerId(b) for b in elr),
        last_known_elr=tuple(BrokerId(b) for b in last_known_elr),
        offline_replicas=partition.offline_replicas,
    )


def _page(
    context: BrokerContext,
    request: DecodedRequest,
    names: list[str],
    start: RequestCursor | None,
    limit: int,
    *,
    fetch_all: bool,
) -> tuple[list[DescribeTopicPartitionsResponseTopic], Cursor | None]:
    """The topics of ``names`` (sorted, authorized) from ``start`` on, up to ``limit``
    partitions, and the cursor where the next page starts (None: nothing is left)."""
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    remaining = limit
    for name in names:
        if remaining == 0:
            return topics, Cursor(topic_name=TopicName(name), partition_index=i32(0))
        operations = authorized_operations(context, request, ResourceType.TOPIC, name)
        info = context.topics.topics.get(name)
        if info is None:
            if not fetch_all:
                topics.append(_unknown_topic(name, operations))
            continue
        partitions = _partitions(context, name, info.num_partitions)
        first = start.partition_index if start is not None and start.topic_name == name else 0
        end = min(len(partitions), first + remaining)
        page = tuple(_described(context, name, p) for p in partitions[first:end])
        topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(name),
                topic_id=info.topic_id,
                is_internal=is_internal_topic(name),
                partitions=page,
                topic_authorized_operations=i32(operations),
            )
        )
        if end < len(partitions):
            return topics, Cursor(topic_name=TopicName(name), partition_index=i32(end))
        remaining -= len(page)
    return topics, None


async def handle_describe_topic_partitions(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Describe the requested (or all) topics' partitions, from the cursor on."""
    body = request.body_as(DescribeTopicPartitionsRequest)
    start = body.cursor
    first_name = start.topic_name if start is not None else ""
    fetch_all = not body.topics
    asked = context.topics.topics if fetch_all else {t.name for t in body.topics}
    names = {name for name in asked if name >= first_name}
    problem = _cursor_error(body, names)
    if problem is not None:
        _log.info("DescribeTopicPartitions refused: %s", problem)
        return reply(request, _refusal(body, ErrorCode.invalid_request))
    ordered = sorted(names)
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, ordered)
    limit = max(
        min(context.config.max_request_partition_size_limit, body.response_partition_limit), 1
    )
    topics, next_cursor = _page(
        context, request, [n for n in ordered if n in allowed], start, limit, fetch_all=fetch_all
    )
    if not fetch_all:
        topics += [
            _error_topic(ErrorCode.topic_authorization_failed, name, is_internal=False)
            for name in ordered
            if name not in allowed
        ]
    return reply(
        request,
        DescribeTopicPartitionsResponse(
            throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor
        ),
    )


DESCRIBE_TOPIC_PARTITIONS = ApiSpec(
    ApiKey.DESCRIBE_TOPIC_PARTITIONS,
    "DescribeTopicPartitions",
    VersionRange(0, 0),
    handle_describe_topic_partitions,
)
