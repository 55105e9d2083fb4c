"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46).

Clients (``KafkaAdminClient.alter_partition_reassignments``, Kafka's
``kafka-reassign-partitions``) send both to the controller, which moves each partition
from its replicas to the target ones (``cluster.Controller``: add the new replicas,
let them catch up and join the ISR, then drop the old ones); a null replica list
cancels the reassignment in progress, back to the original replicas. The answer comes
once the reassignment is recorded in ZooKeeper, not when it completes; List names the
partitions still moving, with their full replica set and the replicas being added
and removed.

Kafka's errors per partition: INVALID_REPLICA_ASSIGNMENT (an empty, duplicated or
negative list, or a new replica on a broker that is not live),
INVALID_REPLICATION_FACTOR (v1's ``allow_replication_factor_change`` false and a
target of another size), NO_REASSIGNMENT_IN_PROGRESS (a cancellation with none),
UNKNOWN_TOPIC_OR_PARTITION; any other broker than the controller answers
NOT_CONTROLLER at the top level, as Kafka's brokers in ZooKeeper mode do, and clients
ask the controller again. A single broker is the controller of a cluster of one: a
reassignment to its own id changes nothing, one naming another broker is
INVALID_REPLICA_ASSIGNMENT, and nothing is ever being reassigned.

Authorization (Kafka's ``handleAlterPartitionReassignmentsRequest`` and
``handleListPartitionReassignmentsRequest``): ALTER, resp. DESCRIBE, on the cluster,
else CLUSTER_AUTHORIZATION_FAILED at the top level (and, for Alter, for every
partition, as Kafka's error answer has it).

Written against Alter's v1 and List's v0 classes.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
)
from kio.schema.alter_partition_reassignments.v1.response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from tickwheel.cluster import ElectionError, ReassignmentResult, ReplicaAssignment, invalid_target
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

T = TypeVar("T")
_UNAUTHORIZED = "Cluster authorization failed."
_UNKNOWN_PARTITION = "The partition does not exist."


def _requested(
    body: AlterPartitionReassignmentsRequest,
) -> dict[TopicPartition, tuple[int, ...] | None]:
    return {
        TopicPartition(topic.name, int(partition.partition_index)): (
            None if partition.replicas is None else tuple(int(r) for r in partition.replicas)
        )
        for topic in body.topics
        for partition in topic.partitions
    }


def _single_node(
    context: BrokerContext, targets: dict[TopicPartition, tuple[int, ...] | None]
) -> dict[TopicPartition, ReassignmentResult]:
    """A cluster of one: its replicas are this broker alone, and never move."""
    own = context.config.broker_id
    results = {}
    for tp, target in targets.items():
        invalid = (
            None if target is None else invalid_target(ReplicaAssignment((own,)), target, {own})
        )
        if invalid is not None:
            results[tp] = ReassignmentResult(ErrorCode.invalid_replica_assignment, invalid)
        elif target is None:
            results[tp] = ReassignmentResult(ErrorCode.no_reassignment_in_progress)
        elif context.replica_manager.get_partition(tp) is None:
            results[tp] = ReassignmentResult(
                ErrorCode.unknown_topic_or_partition, _UNKNOWN_PARTITION
            )
        else:
            results[tp] = ReassignmentResult(ErrorCode.none)
    return results


def _by_topic(entries: Iterable[tuple[TopicPartition, T]]) -> dict[str, tuple[T, ...]]:
    grouped: dict[str, list[T]] = {}
    for tp, entry in entries:
        grouped.setdefault(tp.topic, []).append(entry)
    return {topic: tuple(partitions) for topic, partitions in grouped.items()}


def _alter_response(
    top_error: ErrorCode, message: str | None, results: dict[TopicPartition, ReassignmentResult]
) -> AlterPartitionReassignmentsResponse:
    by_topic = _by_topic(
        (
            tp,
            ReassignablePartitionResponse(
                partition_index=i32(tp.partition),
                error_code=result.error_code,
                error_message=result.message,
            ),
        )
        for tp, result in results.items()
    )
    return AlterPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        error_code=top_error,
        error_message=message,
        responses=tuple(
            ReassignableTopicResponse(name=TopicName(topic), partitions=partitions)
            for topic, partitions in by_topic.items()
        ),
    )


async def handle_alter_partition_reassignments(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Start, replace or cancel the reassignment of each partition, on the controller."""
    body = request.body_as(AlterPartitionReassignmentsRequest)
    targets = _requested(body)
    if not authorize_cluster(context, request, AclOperation.ALTER):
        refused = ReassignmentResult(ErrorCode.cluster_authorization_failed, _UNAUTHORIZED)
        return reply(
            request,
            _alter_response(
                ErrorCode.cluster_authorization_failed,
                _UNAUTHORIZED,
                dict.fromkeys(targets, refused),
            ),
        )
    if context.cluster is None:
        results = _single_node(context, targets)
    else:
        try:
            results = await context.cluster.controller.alter_reassignments(
                targets, allow_replication_factor_change=body.allow_replication_factor_change
            )
        except ElectionError as error:
            return reply(request, _alter_response(error.error_code, None, {}))
    return reply(request, _alter_response(ErrorCode.none, None, results))


def _list_response(
    top_error: ErrorCode,
    message: str | None,
    ongoing: dict[TopicPartition, ReplicaAssignment],
) -> ListPartitionReassignmentsResponse:
    by_topic = _by_topic(
        (
            tp,
            OngoingPartitionReassignment(
                partition_index=i32(tp.partition),
                replicas=tuple(BrokerId(r) for r in assignment.replicas),
                adding_replicas=tuple(BrokerId(r) for r in assignment.adding),
                removing_replicas=tuple(BrokerId(r) for r in assignment.removing),
            ),
        )
        for tp, assignment in sorted(ongoing.items())
    )
    return ListPartitionReassignmentsResponse(
        throttle_time=NO_THROTTLE,
        error_code=top_error,
        error_message=message,
        topics=tuple(
            OngoingTopicReassignment(name=TopicName(topic), partitions=partitions)
            for topic, partitions in by_topic.items()
        ),
    )


async def handle_list_partition_reassignments(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """The reassignments in progress, of the partitions asked (null: of every one)."""
    body = request.body_as(ListPartitionReassignmentsRequest)
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return reply(
            request,
            ListPartitionReassignmentsResponse(
                throttle_time=NO_THROTTLE,
                error_code=ErrorCode.cluster_authorization_failed,
                error_message=_UNAUTHORIZED,
                topics=tuple(
                    OngoingTopicReassignment(
                        name=topic.name,
                        partitions=tuple(
                            OngoingPartitionReassignment(partition_index=p)
                            for p in topic.partition_indexes
                        ),
                    )
                    for topic in body.topics or ()
                ),
            ),
        )
    cluster = context.cluster
    if cluster is None:
        return reply(request, _list_response(ErrorCode.none, None, {}))
    controller = cluster.controller
    if not controller.active:
        return reply(request, _list_response(ErrorCode.not_controller, None, {}))
    if body.topics is None:
        asked = controller.reassigning()
    else:
        asked = [
            TopicPartition(topic.name, int(p))
            for topic in body.topics
            for p in topic.partition_indexes
        ]
    ongoing = {tp: controller.assignment(tp) for tp in asked}
    return reply(
        request,
        _list_response(ErrorCode.none, None, {tp: a for tp, a in ongoing.items() if a.reassigning}),
    )


PARTITION_REASSIGNMENT_SPECS = (
    ApiSpec(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        "AlterPartitionReassignments",
        VersionRange(0, 1),
        handle_alter_partition_reassignments,
    ),
    ApiSpec(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        "ListPartitionReassignments",
        VersionRange(0, 0),
        handle_list_partition_reassignments,
    ),
)
