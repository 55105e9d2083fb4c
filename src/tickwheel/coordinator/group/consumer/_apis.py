"""``ConsumerGroupApis``: the group APIs with consumer-protocol groups, as kio entities.

ConsumerGroupHeartbeat and ConsumerGroupDescribe are answered here; every other group
API goes to the classic ``GroupApis`` after a look at whether its group id names a
consumer-protocol group (one namespace for every protocol; ListGroups also lists, and
DeleteGroups hands on, the share groups the broker tells it of). Like ``GroupApis``, each
method takes and returns kio entities of the newest version in the table (the broker
converts), with the version sent where behaviour depends on it:

=====================  ===  ========  ===============================================
API                    key  versions  for a consumer-protocol group
=====================  ===  ========  ===============================================
ConsumerGroupHeartbeat  68  0-1       ``ConsumerGroupCoordinator.handle_heartbeat``
ConsumerGroupDescribe   69  0-1       members, epochs, assignments and targets
OffsetCommit             8  2-9       member epoch checked (UNKNOWN_MEMBER_ID,
                                      STALE_MEMBER_EPOCH; UNSUPPORTED_VERSION before
                                      v9), then stored as a group without members
OffsetFetch              9  1-9       v8+ (several groups per request) answered here
                                      for every group; v9's member epoch checked
TxnOffsetCommit         28  0-3       member epoch checked as OffsetCommit's (any
                                      version), then stored as a group without members
ListGroups              16  0-5       listed with type "consumer" (classic ones with
                                      "classic"); ``types_filter`` and
                                      ``states_filter`` apply to both
OffsetDelete            47  0         GROUP_SUBSCRIBED_TO_TOPIC for the topics its
                                      members subscribe to; the others' offsets go
DescribeGroups          15  0-5       "Dead", as Kafka answers for a non-classic group
DeleteGroups            42  0-2       NON_EMPTY_GROUP, or its records and offsets go
JoinGroup               11  0-7       INCONSISTENT_GROUP_PROTOCOL while it has members;
                                      an empty one becomes classic (migration policy)
=====================  ===  ========  ===============================================

``GROUP_API_VERSIONS_WITH_CONSUMER`` is what the broker advertises: the classic table,
OffsetFetch widened to v9 (the batched versions, from ``OFFSET_FETCH_BATCHED``, are
answered here as v9, each group through the classic coordinator's
``handle_fetch_offsets``; the broker sends the one-group versions to the classic
``offset_fetch`` as v7), and the two new APIs. Topic ids
travel on the wire; ``TopicCatalog`` names them for ConsumerGroupDescribe.

Concurrency contract: the methods run on the broker's event loop, like ``GroupApis``;
a heartbeat's answer, given when its append completes (on whatever thread that is),
reaches the loop through ``GroupApis``' ``_Answer``.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable, Mapping

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import Assignment as DescribedAssignment
from kio.schema.consumer_group_describe.v1.response import (
    ConsumerGroupDescribeResponse,
    Member,
)
from kio.schema.consumer_group_describe.v1.response import (
    DescribedGroup as ConsumerDescribedGroup,
)
from kio.schema.consumer_group_describe.v1.response import (
    TopicPartitions as DescribedTopicPartitions,
)
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import Assignment as HeartbeatAssignment
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.consumer_group_heartbeat.v1.response import (
    TopicPartitions as HeartbeatTopicPartitions,
)
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeleteGroupsResponse
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribedGroup, DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v7.request import JoinGroupRequest
from kio.schema.join_group.v7.response import JoinGroupResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_commit.v9.response import OffsetCommitResponse
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest
from kio.schema.offset_fetch.v9.response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponseTopics,
)
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta

from tickwheel.coordinator.group._apis import (
    DEFAULT_CLIENT_HOST,
    GROUP_API_NAMES,
    GROUP_API_VERSIONS,
    OFFSET_FETCH_KEY,
    GroupApis,
    _Answer,
    asked_partitions,
    delete_groups_response,
    fetched_topics,
    join_protocol_name,
    offset_commit_response,
    txn_offset_commit_response,
)
from tickwheel.coordinator.group._group import GroupState
from tickwheel.coordinator.group._manager import FetchedOffset
from tickwheel.coordinator.group.consumer._coordinator import (
    CONSUMER_GROUP_TYPE,
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResult,
    TopicCatalog,
)
from tickwheel.coordinator.group.consumer._member import Assignment, normalized
from tickwheel.protocol import NO_THROTTLE, ApiKey, VersionRange, convert

CONSUMER_GROUP_HEARTBEAT_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
CONSUMER_GROUP_DESCRIBE_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE

CONSUMER_GROUP_API_VERSIONS: Mapping[int, VersionRange] = {
    CONSUMER_GROUP_HEARTBEAT_KEY: VersionRange(0, 1),
    CONSUMER_GROUP_DESCRIBE_KEY: VersionRange(0, 1),
}
OFFSET_FETCH_BATCHED = 8
"""The first OffsetFetch version naming several groups (KIP-709), answered here."""
GROUP_API_VERSIONS_WITH_CONSUMER: Mapping[int, VersionRange] = {
    **GROUP_API_VERSIONS,
    OFFSET_FETCH_KEY: VersionRange(GROUP_API_VERSIONS[OFFSET_FETCH_KEY].min_version, 9),
    **CONSUMER_GROUP_API_VERSIONS,
}
"""Every group API and the versions ``ConsumerGroupApis`` answers."""
GROUP_API_NAMES_WITH_CONSUMER: Mapping[int, str] = {
    **GROUP_API_NAMES,
    CONSUMER_GROUP_HEARTBEAT_KEY: "ConsumerGroupHeartbeat",
    CONSUMER_GROUP_DESCRIBE_KEY: "ConsumerGroupDescribe",
}

_CLASSIC_GROUP_TYPE = "classic"
_CONSUMER_MEMBER_TYPE = i8(1)  # KIP-1099: -1 unknown, 0 classic, 1 consumer protocol
_DEAD = GroupState.DEAD.value
_CLIENT_MEMBER_ID_VERSION = 1  # ConsumerGroupHeartbeat v1: the client names its member


def _owned(request: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    return normalized(
        {
            tp.topic_id: [int(p) for p in tp.partitions]
            for tp in request.topic_partitions
            if tp.topic_id is not None
        }
    )


def _wire_assignment(assignment: Assignment) -> HeartbeatAssignment:
    return HeartbeatAssignment(
        topic_partitions=tuple(
            HeartbeatTopicPartitions(
                topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(partitions))
            )
            for topic_id, partitions in sorted(assignment.items())
        )
    )


class ConsumerGroupApis:
    """The group APIs over a classic ``GroupApis`` and a ``ConsumerGroupCoordinator``."""

    def __init__(
        self, classic: GroupApis, coordinator: ConsumerGroupCoordinator, topics: TopicCatalog
    ) -> None:
        self.classic = classic
        self.coordinator = coordinator
        self._topics = topics
        # The groups of the other protocol (share groups), set by the broker: as
        # ListGroups shows them given its states filter (each entry has a
        # ``group_type``), whether an id is one, and its deletion.
        self.other_groups: Callable[[frozenset[str]], list[ListedGroup]] = lambda states: []
        self.is_other_group: Callable[[str], bool] = lambda name: False
        self.delete_other_group: Callable[[str], Awaitable[ErrorCode]] | None = None

    async def join_group(
        self,
        request: JoinGroupRequest,
        *,
        api_version: int,
        client_id: str,
        client_host: str = DEFAULT_CLIENT_HOST,
    ) -> JoinGroupResponse:
        """JoinGroup: refused for a consumer-protocol group that stays one, else classic."""
        error = self.coordinator.downgrade(request.group_id)
        if error is not None:
            return JoinGroupResponse(
                throttle_time=NO_THROTTLE,
                error_code=error,
                protocol_name=join_protocol_name(None, api_version),
                leader="",
                member_id=request.member_id,
                members=(),
            )
        return await self.classic.join_group(
            request, api_version=api_version, client_id=client_id, client_host=client_host
        )

    # --- ConsumerGroupHeartbeat, ConsumerGroupDescribe -------------------------------------

    async def heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        *,
        api_version: int,
        client_id: str,
        client_host: str = DEFAULT_CLIENT_HOST,
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat; answers once the group's records are written."""
        decoded = HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            subscribed_topic_names=(
                None
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            owned=_owned(request),
            client_id=client_id,
            client_host=client_host,
            member_id_required=api_version >= _CLIENT_MEMBER_ID_VERSION,
        )
        answer: _Answer[HeartbeatResult] = _Answer()
        self.coordinator.handle_heartbeat(decoded, answer.deliver)
        result = await answer.wait()
        return ConsumerGroupHeartbeatResponse(
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            error_message=result.error_message,
            member_id=result.member_id,
            member_epoch=i32(result.member_epoch),
            heartbeat_interval=i32Timedelta.parse(
                datetime.timedelta(milliseconds=result.heartbeat_interval_ms)
            ),
            assignment=(None if result.assignment is None else _wire_assignment(result.assignment)),
        )

    def _described_assignment(self, assignment: Assignment) -> DescribedAssignment:
        return DescribedAssignment(
            topic_partitions=tuple(
                DescribedTopicPartitions(
                    topic_id=topic_id,
                    topic_name=TopicName(self._topics.topic_name(topic_id) or ""),
                    partitions=tuple(i32(p) for p in sorted(partitions)),
                )
                for topic_id, partitions in sorted(assignment.items())
            )
        )

    def describe(self, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
        """ConsumerGroupDescribe: members, epochs, current and target assignments."""
        groups = []
        for group_id in request.group_ids:
            described = self.coordinator.describe(group_id)
            groups.append(
                ConsumerDescribedGroup(
                    error_code=described.error,
                    group_id=group_id,
                    group_state=described.state,
                    group_epoch=i32(described.group_epoch),
                    assignment_epoch=i32(described.assignment_epoch),
                    assignor_name=described.assignor_name,
                    members=tuple(
                        Member(
                            member_id=m.member.member_id,
                            instance_id=m.member.instance_id,
                            rack_id=m.member.rack_id,
                            member_epoch=i32(m.member.member_epoch),
                            client_id=m.member.client_id,
                            client_host=m.member.client_host,
                            subscribed_topic_names=tuple(
                                TopicName(name) for name in m.member.subscribed_topic_names
                            ),
                            subscribed_topic_regex=m.member.subscribed_topic_regex,
                            assignment=self._described_assignment(m.member.assigned_partitions),
                            target_assignment=self._described_assignment(m.target),
                            member_type=_CONSUMER_MEMBER_TYPE,
                        )
                        for m in described.members
                    ),
                )
            )
        return ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))

    # --- the classic APIs, for consumer-protocol groups ------------------------------------

    async def offset_commit(
        self, request: OffsetCommitRequest, *, api_version: int
    ) -> OffsetCommitResponse:
        """OffsetCommit: a consumer-protocol member's epoch is checked first."""
        error = self.coordinator.validate_offset_commit(
            request.group_id,
            request.member_id,
            request.generation_id_or_member_epoch,
            api_version=api_version,
        )
        if error is None:
            return await self.classic.offset_commit(request)
        if error is not ErrorCode.none:
            return offset_commit_response(asked_partitions(request.topics), lambda _tp: error)
        # Validated here: the offsets manager stores them as for a group without members.
        as_admin = dataclasses.replace(
            request, member_id="", generation_id_or_member_epoch=i32(-1), group_instance_id=None
        )
        return await self.classic.offset_commit(as_admin)

    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, *, api_version: int
    ) -> TxnOffsetCommitResponse:
        """TxnOffsetCommit: a consumer-protocol member's epoch is checked first."""
        error = self.coordinator.validate_offset_commit(
            request.group_id,
            request.member_id,
            request.generation_id,
            api_version=api_version,
            transactional=True,
        )
        if error is None:
            return await self.classic.txn_offset_commit(request, api_version=api_version)
        if error is not ErrorCode.none:
            return txn_offset_commit_response(asked_partitions(request.topics), lambda _tp: error)
        as_producer = dataclasses.replace(
            request, member_id="", generation_id=i32(-1), group_instance_id=None
        )
        return await self.classic.txn_offset_commit(as_producer, api_version=api_version)

    def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        """OffsetFetch v8+: each named group's offsets; from v9 a consumer-protocol
        member's epoch is checked (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). Earlier
        versions name one group and no member: the classic ``offset_fetch`` answers them."""
        groups = []
        for asked in request.groups:
            wanted = (
                None
                if asked.topics is None
                else [(t.name, int(p)) for t in asked.topics for p in t.partition_indexes]
            )
            error = self.coordinator.validate_offset_fetch(
                asked.group_id, asked.member_id, asked.member_epoch
            )
            fetched: dict[tuple[str, int], FetchedOffset] = {}
            if error is None or error is ErrorCode.none:
                error, fetched = self.classic.coordinator.handle_fetch_offsets(
                    asked.group_id, wanted, require_stable=request.require_stable
                )
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=asked.group_id,
                    error_code=error,
                    topics=tuple(
                        convert(OffsetFetchResponseTopics, topic)
                        for topic in fetched_topics(fetched)
                    ),
                )
            )
        return OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))

    def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """OffsetDelete: a consumer-protocol group keeps the offsets of subscribed topics."""
        subscribed = self.coordinator.subscribed_topics(request.group_id)
        if not subscribed:
            return self.classic.offset_delete(request)
        classic = self.classic.offset_delete(
            dataclasses.replace(
                request, topics=tuple(t for t in request.topics if t.name not in subscribed)
            )
        )
        if classic.error_code is not ErrorCode.none:
            return classic
        kept = tuple(
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.group_subscribed_to_topic,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
            if t.name in subscribed
        )
        return dataclasses.replace(classic, topics=classic.topics + kept)

    def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        """ListGroups of both group types, with ``types_filter`` and ``states_filter``."""
        types = {t.lower() for t in request.types_filter}
        states = {s.lower() for s in request.states_filter}
        error, overviews = self.classic.coordinator.handle_list_groups()
        consumer = dict(self.coordinator.groups())
        listed: list[tuple[str, str, str, str]] = []
        if not types or _CLASSIC_GROUP_TYPE in types:
            listed += [
                (o.group_id, o.protocol_type, o.state.value, _CLASSIC_GROUP_TYPE)
                for o in overviews
                if o.group_id not in consumer
            ]
        if not types or CONSUMER_GROUP_TYPE in types:
            listed += [
                (group_id, CONSUMER_PROTOCOL_TYPE, state.value, CONSUMER_GROUP_TYPE)
                for group_id, state in consumer.items()
            ]
        # The share groups.
        listed += [
            (g.group_id, g.protocol_type, g.group_state, g.group_type)
            for g in self.other_groups(frozenset(states))
            if not types or g.group_type in types
        ]
        return ListGroupsResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            groups=tuple(
                ListedGroup(
                    group_id=GroupId(group_id),
                    protocol_type=protocol_type,
                    group_state=state,
                    group_type=group_type,
                )
                for group_id, protocol_type, state, group_type in listed
                if not states or state.lower() in states
            ),
        )

    def describe_groups(self, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        """DescribeGroups: a consumer-protocol group reads "Dead" (it is not classic)."""
        if not any(self.coordinator.has_group(g) for g in request.groups):
            return self.classic.describe_groups(request)
        classic_response = self.classic.describe_groups(
            dataclasses.replace(
                request,
                groups=tuple(g for g in request.groups if not self.coordinator.has_group(g)),
            )
        )
        classic = {g.group_id: g for g in classic_response.groups}
        described = tuple(
            classic.get(group_id)
            or DescribedGroup(
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=_DEAD,
                protocol_type="",
                protocol_data="",
                members=(),
            )
            for group_id in request.groups
        )
        return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=described)

    async def delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        """DeleteGroups: an empty consumer-protocol group goes with its offsets; a group of
        another protocol (a share group) is deleted by its owner."""
        delete_other = self.delete_other_group
        others: dict[str, ErrorCode] = {}
        for group_id in request.groups_names:
            if delete_other is not None and self.is_other_group(group_id):
                others[group_id] = await delete_other(group_id)
        consumer: dict[str, ErrorCode] = {}
        for group_id in request.groups_names:
            if group_id in others:
                continue
            error = self.coordinator.delete(group_id)
            if error is not None:
                consumer[group_id] = error
        classic_ids = [
            g
            for g in request.groups_names
            if g not in others and consumer.get(g, ErrorCode.none) is ErrorCode.none
        ]
        results = {**self.classic.coordinator.handle_delete_groups(classic_ids), **others}
        for consumer_id, error in consumer.items():
            if error is ErrorCode.none and results.get(consumer_id) is ErrorCode.group_id_not_found:
                results[consumer_id] = ErrorCode.none  # a group without offsets
            elif error is not ErrorCode.none:
                results[consumer_id] = error
        return delete_groups_response((g, results[g]) for g in request.groups_names)
