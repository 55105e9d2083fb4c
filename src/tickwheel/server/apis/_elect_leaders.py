"""ElectLeaders (key 43): preferred or unclean leader election, answered by the controller.

Clients (``AdminClient.elect_leaders``) send it to the controller. There the
``Controller`` elects each partition (PREFERRED: the first assigned replica, if live
and in sync; UNCLEAN: a live replica for a leaderless partition) and the answer waits
in a ``DelayedElectLeader`` until the new leaders are in place or ``timeout_ms``
passes. Kafka's errors: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION per partition, and
NOT_CONTROLLER per partition from any other broker, as Kafka's brokers answer in
ZooKeeper mode; an election type other than the two is INVALID_REQUEST (top level from
v1, per partition in v0). A null partition list
means every partition, and then only the partitions that needed an election are
answered. A single broker is the controller of a cluster of one, where every
partition already has its only replica as leader: ELECTION_NOT_NEEDED.

Authorization (Kafka's ``handleElectLeaders``): ALTER on the cluster, else every
partition and the whole answer CLUSTER_AUTHORIZATION_FAILED.

Written against v2's classes; v0, which has no election type, reads as PREFERRED.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply, to_ms

_PREFERRED = 0
_UNCLEAN = 1
_FIRST_TOP_LEVEL_ERROR_VERSION = 1


def _requested(body: ElectLeadersRequest) -> list[TopicPartition] | None:
    if body.topic_partitions is None:
        return None
    return [
        TopicPartition(topic.topic, int(partition))
        for topic in body.topic_partitions
        for partition in topic.partitions
    ]


def _single_node(
    context: BrokerContext, tps: list[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    return {
        tp: ErrorCode.election_not_needed
        if context.replica_manager.get_partition(tp) is not None
        else ErrorCode.unknown_topic_or_partition
        for tp in tps
    }


async def handle_elect_leaders(context: BrokerContext, request: DecodedRequest) -> Response:
    """Elect the requested partitions' leaders on the controller and answer per partition."""
    body = request.body_as(ElectLeadersRequest)
    requested = _requested(body)
    top_error = ErrorCode.none
    results: dict[TopicPartition, ErrorCode] = {}
    if not authorize_cluster(context, request, AclOperation.ALTER):
        top_error = ErrorCode.cluster_authorization_failed
        results = dict.fromkeys(requested or [], top_error)
    elif body.election_type not in (_PREFERRED, _UNCLEAN):
        top_error = ErrorCode.invalid_request
    elif context.cluster is None:
        # A null list asks for every partition: none needs an election here.
        results = _single_node(context, requested or [])
    else:
        results = await context.cluster.elect_leaders(
            requested, preferred=body.election_type == _PREFERRED, timeout_ms=to_ms(body.timeout)
        )
    if top_error != ErrorCode.none and request.api_version < _FIRST_TOP_LEVEL_ERROR_VERSION:
        results = dict.fromkeys(requested or [], top_error)
    by_topic: dict[str, list[PartitionResult]] = {}
    for tp, code in sorted(results.items()):
        by_topic.setdefault(tp.topic, []).append(
            PartitionResult(partition_id=i32(tp.partition), error_code=code, error_message=None)
        )
    return reply(
        request,
        ElectLeadersResponse(
            throttle_time=NO_THROTTLE,
            error_code=top_error,
            replica_election_results=tuple(
                ReplicaElectionResult(topic=TopicName(topic), partition_result=tuple(partitions))
                for topic, partitions in by_topic.items()
            ),
        ),
    )


ELECT_LEADERS = ApiSpec(
    ApiKey.ELECT_LEADERS, "ElectLeaders", VersionRange(0, 2), handle_elect_leaders
)
