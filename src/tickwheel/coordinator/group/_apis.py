"""``GroupApis``: the group coordinator's requests as kio entities in and out.

One method per API (``async`` where the answer waits) takes the kio request of the
newest version the table below gives (the broker reads whatever version the client sent
as that one, the fields it lacks at Kafka's defaults) and returns the kio response of
that version, which the broker carries down to the version asked; ``mypy --strict``
checks every field read and written. Where a version changes behaviour and not only
fields, the method takes the version sent (``api_version``): JoinGroup (before v1 the
session timeout serves as rebalance timeout; from v4 a new member must rejoin with its
id; before v7 a null protocol name reads ""), LeaveGroup (before v3 the one member's
error is the answer's; such a request is read with ``one_member_leaving``), OffsetFetch
(v1 has no top-level error) and TxnOffsetCommit (below). FindCoordinator is answered as
v6, one key or many (the broker's ``_find_coordinator`` carries a one-key version to v6
and back).

=================  ===  ========  =================================================
API                key  versions  waits for
=================  ===  ========  =================================================
OffsetCommit        8   2-9       the append to ``__consumer_offsets``
OffsetFetch         9   1-7       --
FindCoordinator    10   0-6       --
JoinGroup          11   0-7       DelayedJoin (the rebalance)
Heartbeat          12   0-4       --
LeaveGroup         13   0-5       --
SyncGroup          14   0-5       the leader's assignment, then its append
DescribeGroups     15   0-5       --
ListGroups         16   0-5       --
TxnOffsetCommit    28   0-5       the append to ``__consumer_offsets``
DeleteGroups       42   0-2       --
OffsetDelete       47   0         --
=================  ===  ========  =================================================

TxnOffsetCommit v4 adds only TRANSACTION_ABORTABLE and v5 the implicit add of the
offsets partition to the transaction (KIP-890 part 2); the broker asks the transaction
coordinator before this coordinator sees the request
(``server.apis._txn_offset_verification``). Before v3 it names no member or
generation, and before v2 COORDINATOR_LOAD_IN_PROGRESS reads COORDINATOR_NOT_AVAILABLE
(clients older than KAFKA-7296 would fail on it; Kafka's KafkaApis maps it the same way).
OffsetFetch v7 carries ``require_stable`` (KIP-447): librdkafka sets it for a
read_committed consumer and retries the partitions answered UNSTABLE_OFFSET_COMMIT.

OffsetDelete and TxnOffsetCommit, like Kafka's KafkaApis, first answer
UNKNOWN_TOPIC_OR_PARTITION for the partitions that do not exist (``PartitionChecker``,
from the broker's topics) and hand the rest to the coordinator. The tombstones of
DeleteGroups and OffsetDelete are not waited for (Kafka's choice too; see
``GroupMetadataManager``).

Concurrency contract: the methods run on one asyncio event loop (the broker's). The
coordinator may answer from another thread (threaded purgatories): ``_Answer`` hands the
value to the loop with ``call_soon_threadsafe`` then, and sets it directly on the loop.

The answers of OffsetCommit, TxnOffsetCommit, OffsetFetch and DeleteGroups are built by
module functions (``offset_commit_response`` ...) that the consumer-protocol layer and
the broker's authorization use for their own answers too.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v7.request import JoinGroupRequest
from kio.schema.join_group.v7.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse, MemberResponse
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListedGroup, ListGroupsResponse
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_commit.v9.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i32, i64

from tickwheel.coordinator._locator import FIND_COORDINATOR_KEY, CoordinatorLocator
from tickwheel.coordinator.group._coordinator import GroupCoordinator, JoinRequest, LeavingMember
from tickwheel.coordinator.group._group import JoinGroupResult, SyncGroupResult, TopicPartition
from tickwheel.coordinator.group._manager import FetchedOffset
from tickwheel.coordinator.group._records import NO_LEADER_EPOCH, OffsetValue
from tickwheel.protocol import NO_THROTTLE, ApiKey, CoordinatorType, VersionRange

T = TypeVar("T")

OFFSET_COMMIT_KEY = ApiKey.OFFSET_COMMIT
OFFSET_FETCH_KEY = ApiKey.OFFSET_FETCH
JOIN_GROUP_KEY = ApiKey.JOIN_GROUP
HEARTBEAT_KEY = ApiKey.HEARTBEAT
LEAVE_GROUP_KEY = ApiKey.LEAVE_GROUP
SYNC_GROUP_KEY = ApiKey.SYNC_GROUP
DESCRIBE_GROUPS_KEY = ApiKey.DESCRIBE_GROUPS
LIST_GROUPS_KEY = ApiKey.LIST_GROUPS
DELETE_GROUPS_KEY = ApiKey.DELETE_GROUPS
OFFSET_DELETE_KEY = ApiKey.OFFSET_DELETE
TXN_OFFSET_COMMIT_KEY = ApiKey.TXN_OFFSET_COMMIT

GROUP_API_VERSIONS: Mapping[int, VersionRange] = {
    OFFSET_COMMIT_KEY: VersionRange(2, 9),
    OFFSET_FETCH_KEY: VersionRange(1, 7),
    FIND_COORDINATOR_KEY: VersionRange(0, 6),
    JOIN_GROUP_KEY: VersionRange(0, 7),
    HEARTBEAT_KEY: VersionRange(0, 4),
    LEAVE_GROUP_KEY: VersionRange(0, 5),
    SYNC_GROUP_KEY: VersionRange(0, 5),
    DESCRIBE_GROUPS_KEY: VersionRange(0, 5),
    LIST_GROUPS_KEY: VersionRange(0, 5),
    DELETE_GROUPS_KEY: VersionRange(0, 2),
    OFFSET_DELETE_KEY: VersionRange(0, 0),
    TXN_OFFSET_COMMIT_KEY: VersionRange(0, 5),
}
"""The group APIs and the versions ``GroupApis`` handles (what every client here uses)."""

GROUP_API_NAMES: Mapping[int, str] = {
    OFFSET_COMMIT_KEY: "OffsetCommit",
    OFFSET_FETCH_KEY: "OffsetFetch",
    FIND_COORDINATOR_KEY: "FindCoordinator",
    JOIN_GROUP_KEY: "JoinGroup",
    HEARTBEAT_KEY: "Heartbeat",
    LEAVE_GROUP_KEY: "LeaveGroup",
    SYNC_GROUP_KEY: "SyncGroup",
    DESCRIBE_GROUPS_KEY: "DescribeGroups",
    LIST_GROUPS_KEY: "ListGroups",
    DELETE_GROUPS_KEY: "DeleteGroups",
    OFFSET_DELETE_KEY: "OffsetDelete",
    TXN_OFFSET_COMMIT_KEY: "TxnOffsetCommit",
}

# Version thresholds, from Kafka's message definitions.
_JOIN_REBALANCE_TIMEOUT = 1  # before, the session timeout serves
_JOIN_REQUIRES_KNOWN_MEMBER_ID = 4  # KIP-394
_JOIN_NULLABLE_PROTOCOL_NAME = 7
LEAVE_GROUP_BATCHED = 3
"""The first LeaveGroup version naming several members (read older ones with
``one_member_leaving``)."""
_OFFSET_FETCH_ALL_PARTITIONS = 2
_TXN_OFFSET_COMMIT_LOAD_ERROR = 2  # from v2, COORDINATOR_LOAD_IN_PROGRESS is understood
_NO_NODE = BrokerId(-1)  # node id and port of "no coordinator"
_NO_PORT = i32(-1)
_NO_OFFSET = -1  # nothing committed
_CLASSIC_GROUP_TYPE = "classic"
_ONE_MS = datetime.timedelta(milliseconds=1)
# Kafka prefixes the client address with a slash (InetAddress.toString()).
DEFAULT_CLIENT_HOST = "/127.0.0.1"


PartitionChecker = Callable[[str, int], bool]
"""True if the topic has that partition (Kafka's metadata cache lookup in KafkaApis)."""


def _every_partition_exists(_topic: str, _partition: int) -> bool:
    return True


class _Answer(Generic[T]):
    """A value that a coordinator callback delivers, possibly from another thread."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._future: asyncio.Future[T] = self._loop.create_future()

    def _set(self, value: T) -> None:
        if not self._future.done():  # the connection may have gone and cancelled us
            self._future.set_result(value)

    def deliver(self, value: T) -> None:
        """Resolve the awaited value (once)."""
        if threading.get_ident() == self._thread:
            self._set(value)
        else:
            self._loop.call_soon_threadsafe(self._set, value)

    async def wait(self) -> T:
        """The delivered value."""
        return await self._future


def _no_coordinator(key: str, error: ErrorCode) -> Coordinator:
    return Coordinator(
        key=key,
        node_id=_NO_NODE,
        host="",
        port=_NO_PORT,
        error_code=error,
        error_message=None,
    )


def _ms(duration: datetime.timedelta) -> int:
    return duration // _ONE_MS


class CommittedPartition(Protocol):
    """A partition's offset in an OffsetCommit or TxnOffsetCommit request."""

    @property
    def partition_index(self) -> i32: ...
    @property
    def committed_offset(self) -> i64: ...
    @property
    def committed_leader_epoch(self) -> i32: ...
    @property
    def committed_metadata(self) -> str | None: ...


class CommitTopic(Protocol):
    """A topic's offsets in an OffsetCommit or TxnOffsetCommit request."""

    @property
    def name(self) -> TopicName: ...
    @property
    def partitions(self) -> Sequence[CommittedPartition]: ...


AskedPartitions = Sequence[tuple[TopicName, Sequence[i32]]]
"""The partitions a request names, topic by topic, in its order."""
PartitionError = Callable[[TopicPartition], ErrorCode]


def asked_partitions(topics: Iterable[CommitTopic]) -> AskedPartitions:
    """The partitions named by an (Txn)OffsetCommit request's ``topics``."""
    return [(topic.name, [p.partition_index for p in topic.partitions]) for topic in topics]


def offset_commit_response(
    asked: AskedPartitions, error_of: PartitionError
) -> OffsetCommitResponse:
    """The OffsetCommit answer: each asked partition with ``error_of`` it."""
    return OffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    OffsetCommitResponsePartition(
                        partition_index=index, error_code=error_of((name, int(index)))
                    )
                    for index in indexes
                ),
            )
            for name, indexes in asked
        ),
    )


def txn_offset_commit_response(
    asked: AskedPartitions, error_of: PartitionError
) -> TxnOffsetCommitResponse:
    """The TxnOffsetCommit answer: each asked partition with ``error_of`` it."""
    return TxnOffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TxnOffsetCommitResponseTopic(
                name=name,
                partitions=tuple(
                    TxnOffsetCommitResponsePartition(
                        partition_index=index, error_code=error_of((name, int(index)))
                    )
                    for index in indexes
                ),
            )
            for name, indexes in asked
        ),
    )


def fetched_topics(
    fetched: Mapping[TopicPartition, FetchedOffset],
) -> tuple[OffsetFetchResponseTopic, ...]:
    """OffsetFetch's answer for ``fetched`` offsets, topic by topic in name order."""
    by_topic: dict[str, list[OffsetFetchResponsePartition]] = {}
    for (topic, partition), offset in sorted(fetched.items()):
        by_topic.setdefault(topic, []).append(
            OffsetFetchResponsePartition(
                partition_index=i32(partition),
                committed_offset=i64(offset.offset),
                committed_leader_epoch=i32(offset.leader_epoch),
                metadata=offset.metadata,
                error_code=offset.error,
            )
        )
    return tuple(
        OffsetFetchResponseTopic(name=TopicName(name), partitions=tuple(partitions))
        for name, partitions in by_topic.items()
    )


def delete_groups_response(results: Iterable[tuple[str, ErrorCode]]) -> DeleteGroupsResponse:
    """The DeleteGroups answer: each group with its error code."""
    return DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            DeletableGroupResult(group_id=GroupId(group_id), error_code=error)
            for group_id, error in results
        ),
    )


def join_protocol_name(protocol_name: str | None, api_version: int) -> str | None:
    """JoinGroup's protocol name at ``api_version``: null reads "" before v7."""
    if protocol_name is None and api_version < _JOIN_NULLABLE_PROTOCOL_NAME:
        return ""
    return protocol_name


def one_member_leaving(request: LeaveGroupRequestV2) -> LeaveGroupRequest:
    """A LeaveGroup request before v3 (one member, by id) in v5's shape."""
    return LeaveGroupRequest(
        group_id=request.group_id, members=(MemberIdentity(member_id=request.member_id),)
    )


class GroupApis:
    """Request handlers for the group APIs over one ``GroupCoordinator``."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        locate: CoordinatorLocator,
        *,
        partition_exists: PartitionChecker = _every_partition_exists,
    ) -> None:
        self.coordinator = coordinator
        self._locate = locate
        self._partition_exists = partition_exists

    # --- FindCoordinator ---------------------------------------------------------------

    def _find(self, key: str, key_type: int) -> Coordinator:
        if key_type != CoordinatorType.GROUP or not key:
            # Kafka's answer to a coordinator type it does not know (transactional ids
            # go to tickwheel.coordinator.transaction before reaching this).
            return _no_coordinator(key, ErrorCode.invalid_request)
        node = self._locate(self.coordinator.partition_for(key))
        if node is None:
            return _no_coordinator(key, ErrorCode.coordinator_not_available)
        return Coordinator(
            key=key,
            node_id=BrokerId(node.node_id),
            host=node.host,
            port=i32(node.port),
            error_code=ErrorCode.none,
            error_message=None,
        )

    def find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """The broker that coordinates each group named (a request before v4 names one)."""
        return FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                self._find(key, request.key_type) for key in request.coordinator_keys
            ),
        )

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------

    async def join_group(
        self,
        request: JoinGroupRequest,
        *,
        api_version: int,
        client_id: str,
        client_host: str = DEFAULT_CLIENT_HOST,
    ) -> JoinGroupResponse:
        """Join the group; answers when the rebalance completes."""
        session_timeout_ms = _ms(request.session_timeout)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            require_known_member_id=api_version >= _JOIN_REQUIRES_KNOWN_MEMBER_ID,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=(
                session_timeout_ms
                if api_version < _JOIN_REBALANCE_TIMEOUT
                else _ms(request.rebalance_timeout)
            ),
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        )
        answer: _Answer[JoinGroupResult] = _Answer()
        self.coordinator.handle_join_group(join, answer.deliver)
        result = await answer.wait()
        return JoinGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            generation_id=i32(result.generation_id),
            protocol_type=result.protocol_type,
            protocol_name=join_protocol_name(result.protocol_name, api_version),
            leader=result.leader_id,
            member_id=result.member_id,
            members=tuple(
                JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata,
                )
                for m in result.members
            ),
        )

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        """Send (leader) or await (everyone) the assignment of the current generation."""
        answer: _Answer[SyncGroupResult] = _Answer()
        self.coordinator.handle_sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            request.protocol_type,
            request.protocol_name,
            {a.member_id: bytes(a.assignment) for a in request.assignments},
            answer.deliver,
        )
        result = await answer.wait()
        return SyncGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """A member's sign of life."""
        answer: _Answer[ErrorCode] = _Answer()
        self.coordinator.handle_heartbeat(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            request.generation_id,
            answer.deliver,
        )
        return HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=await answer.wait())

    async def leave_group(
        self, request: LeaveGroupRequest, *, api_version: int
    ) -> LeaveGroupResponse:
        """Members leave the group at once (before v3 the one of ``one_member_leaving``,
        whose error is the answer's)."""
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
        answer: _Answer[tuple[ErrorCode, list[LeavingMember]]] = _Answer()
        self.coordinator.handle_leave_group(
            request.group_id, leaving, lambda error, members: answer.deliver((error, members))
        )
        error, members = await answer.wait()
        if api_version < LEAVE_GROUP_BATCHED and error is ErrorCode.none and members:
            error = members[0].error
        return LeaveGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            members=tuple(
                MemberResponse(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
                )
                for m in members
            ),
        )

    # --- offsets -------------------------------------------------------------------------

    def _split_offsets(
        self, topics: Iterable[CommitTopic], commit_timestamp_ms: int
    ) -> tuple[dict[TopicPartition, OffsetValue], dict[TopicPartition, ErrorCode]]:
        """The offsets to store of the partitions that exist, and the others'
        UNKNOWN_TOPIC_OR_PARTITION (Kafka's ``handleOffsetCommitRequest`` does not store
        them)."""
        offsets: dict[TopicPartition, OffsetValue] = {}
        unknown: dict[TopicPartition, ErrorCode] = {}
        for topic in topics:
            for partition in topic.partitions:
                tp = (topic.name, int(partition.partition_index))
                if not self._partition_exists(*tp):
                    unknown[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                offsets[tp] = OffsetValue(
                    offset=partition.committed_offset,
                    leader_epoch=partition.committed_leader_epoch,
                    metadata=partition.committed_metadata or "",
                    commit_timestamp_ms=commit_timestamp_ms,
                )
        return offsets, unknown

    async def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """Commit offsets; answers once they are written (a partition that does not
        exist: UNKNOWN_TOPIC_OR_PARTITION, its offset not stored)."""
        offsets, errors = self._split_offsets(request.topics, self.coordinator.manager.clock_ms())
        if offsets:
            answer: _Answer[dict[TopicPartition, ErrorCode]] = _Answer()
            self.coordinator.handle_commit_offsets(
                request.group_id,
                request.member_id,
                request.group_instance_id,
                request.generation_id_or_member_epoch,
                offsets,
                answer.deliver,
            )
            errors.update(await answer.wait())
        return offset_commit_response(asked_partitions(request.topics), errors.__getitem__)

    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, *, api_version: int
    ) -> TxnOffsetCommitResponse:
        """Commit offsets in a transaction; answers once they are written (pending until
        the transaction ends)."""
        offsets, errors = self._split_offsets(request.topics, self.coordinator.manager.clock_ms())
        if offsets:
            answer: _Answer[dict[TopicPartition, ErrorCode]] = _Answer()
            self.coordinator.handle_txn_commit_offsets(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                request.member_id,
                request.group_instance_id,
                request.generation_id,
                offsets,
                answer.deliver,
            )
            errors.update(await answer.wait())
        if api_version < _TXN_OFFSET_COMMIT_LOAD_ERROR:
            errors = {
                tp: ErrorCode.coordinator_not_available
                if error is ErrorCode.coordinator_load_in_progress
                else error
                for tp, error in errors.items()
            }
        return txn_offset_commit_response(asked_partitions(request.topics), errors.__getitem__)

    def offset_fetch(self, request: OffsetFetchRequest, *, api_version: int) -> OffsetFetchResponse:
        """Committed offsets of the asked partitions (from v2, None asks for all; v1 has
        no top-level error: every partition asked for carries it)."""
        wanted: list[TopicPartition] | None = None
        if request.topics is not None:
            wanted = [
                (topic.name, int(index))
                for topic in request.topics
                for index in topic.partition_indexes
            ]
        error, fetched = self.coordinator.handle_fetch_offsets(
            request.group_id, wanted, require_stable=request.require_stable
        )
        if api_version < _OFFSET_FETCH_ALL_PARTITIONS and error is not ErrorCode.none:
            fetched = dict.fromkeys(
                wanted or (), FetchedOffset(_NO_OFFSET, NO_LEADER_EPOCH, "", error)
            )
        return OffsetFetchResponse(
            throttle_time=NO_THROTTLE, error_code=error, topics=fetched_topics(fetched)
        )

    # --- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------

    def list_groups(self, request: ListGroupsRequest) -> ListGroupsResponse:
        """The groups this broker coordinates (v4: filtered by state, v5: by type)."""
        types = {t.lower() for t in request.types_filter}
        error, overviews = self.coordinator.handle_list_groups(frozenset(request.states_filter))
        if types and _CLASSIC_GROUP_TYPE not in types:
            overviews = []
        return ListGroupsResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            groups=tuple(
                ListedGroup(
                    group_id=GroupId(o.group_id),
                    protocol_type=o.protocol_type,
                    group_state=o.state.value,
                    group_type=_CLASSIC_GROUP_TYPE,
                )
                for o in overviews
            ),
        )

    def describe_groups(self, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        """State, protocol and members of each named group."""
        described = []
        for group_id in request.groups:
            error, summary = self.coordinator.handle_describe_group(group_id)
            described.append(
                DescribedGroup(
                    error_code=error,
                    group_id=group_id,
                    group_state=summary.state,
                    protocol_type=summary.protocol_type,
                    protocol_data=summary.protocol_name,
                    members=tuple(
                        DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in summary.members
                    ),
                )
            )
        return DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(described))

    def delete_groups(self, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        """Delete empty groups and their committed offsets."""
        results = self.coordinator.handle_delete_groups(list(request.groups_names))
        return delete_groups_response(results.items())

    def offset_delete(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        """Delete a group's committed offsets of the named partitions."""
        errors: dict[TopicPartition, ErrorCode] = {}
        known: list[TopicPartition] = []
        for topic in request.topics:
            for partition in topic.partitions:
                tp = (topic.name, int(partition.partition_index))
                if self._partition_exists(*tp):
                    known.append(tp)
                else:
                    errors[tp] = ErrorCode.unknown_topic_or_partition
        error, deleted = self.coordinator.handle_delete_offsets(request.group_id, known)
        errors.update(deleted)
        by_topic: dict[str, list[OffsetDeleteResponsePartition]] = {}
        for (topic_name, partition_index), partition_error in errors.items():
            by_topic.setdefault(topic_name, []).append(
                OffsetDeleteResponsePartition(
                    partition_index=i32(partition_index), error_code=partition_error
                )
            )
        return OffsetDeleteResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            topics=tuple(
                OffsetDeleteResponseTopic(name=TopicName(name), partitions=tuple(partitions))
                for name, partitions in by_topic.items()
            ),
        )
