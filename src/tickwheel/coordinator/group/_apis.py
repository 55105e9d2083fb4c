"""``GroupApis``: the group coordinator's requests as kio entities in and out.

One method per API (``async`` where the answer waits) takes the decoded kio request body
of whatever version the client sent (plus, for JoinGroup, the client id from the request
header) and returns the kio response body of the same version. Version differences are
handled here, once: fields a version lacks are read with Kafka's defaults (JoinGroup v0
has no rebalance timeout, so the session timeout serves; LeaveGroup before v3 names one
member; OffsetFetch v1 cannot ask for "all"), and responses are built with
``tickwheel.protocol.build_entity``, which keeps only the fields the version has.

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
TxnOffsetCommit    28   0-3       the append to ``__consumer_offsets``
DeleteGroups       42   0-2       --
OffsetDelete       47   0         --
=================  ===  ========  =================================================

TxnOffsetCommit stops at 3, as the transaction protocol here does (v4 adds only
TRANSACTION_ABORTABLE, v5 is KIP-890 part 2); before v3 it names no member or
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

kio has one class per version with no common base for a request's fields, so the
handlers take the request as ``Any`` and read fields by name.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator._locator import FIND_COORDINATOR_KEY, CoordinatorLocator
from tickwheel.coordinator.group._coordinator import GroupCoordinator, JoinRequest, LeavingMember
from tickwheel.coordinator.group._group import JoinGroupResult, SyncGroupResult, TopicPartition
from tickwheel.coordinator.group._records import NO_LEADER_EPOCH, OffsetValue
from tickwheel.protocol import ApiKey, VersionRange, build_entity, response_schema

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
    TXN_OFFSET_COMMIT_KEY: VersionRange(0, 3),
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
_JOIN_REQUIRES_KNOWN_MEMBER_ID = 4  # KIP-394
_JOIN_NULLABLE_PROTOCOL_NAME = 7
_LEAVE_BATCHED = 3
_OFFSET_FETCH_ALL_PARTITIONS = 2
_FIND_COORDINATOR_BATCHED = 4
_TXN_OFFSET_COMMIT_LOAD_ERROR = 2  # from v2, COORDINATOR_LOAD_IN_PROGRESS is understood
_COORDINATOR_TYPE_GROUP = ApiKey.PRODUCE
_NO_NODE = -1  # node id and port of "no coordinator"
_NO_OFFSET = -1  # nothing committed
# Kafka's "authorized operations were not asked for" marker in DescribeGroups.
_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
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


def _version(request: RequestPayload) -> int:
    return int(type(request).__version__)


def _respond(request: RequestPayload, values: Mapping[str, Any]) -> ResponsePayload:
    cls = response_schema(int(type(request).__api_key__), _version(request))
    return build_entity(cls, {"throttle_time": 0, **values})


def _ms(duration: datetime.timedelta) -> int:
    return duration // _ONE_MS


def _partition_errors(
    request: Any, errors: dict[TopicPartition, ErrorCode]
) -> list[dict[str, Any]]:
    """Each requested topic's partitions with their error code (OffsetCommit and
    TxnOffsetCommit answer in this shape)."""
    return [
        {
            "name": topic.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": errors[(topic.name, int(p.partition_index))],
                }
                for p in topic.partitions
            ],
        }
        for topic in request.topics
    ]


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

    def _find(self, key: str, key_type: int) -> dict[str, Any]:
        if key_type != _COORDINATOR_TYPE_GROUP:
            # Kafka's answer to a coordinator type it does not know (transactional ids
            # go to tickwheel.coordinator.transaction before reaching this).
            return {"error_code": ErrorCode.invalid_request, "node_id": _NO_NODE}
        if not key:
            return {"error_code": ErrorCode.invalid_request, "node_id": _NO_NODE}
        node = self._locate(self.coordinator.partition_for(key))
        if node is None:
            return {"error_code": ErrorCode.coordinator_not_available, "node_id": _NO_NODE}
        return {
            "error_code": ErrorCode.none,
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
        }

    def find_coordinator(self, request: Any) -> ResponsePayload:
        """The broker that coordinates a group (v4: several groups at once)."""
        key_type = int(getattr(request, "key_type", _COORDINATOR_TYPE_GROUP))
        defaults = {"host": "", "port": _NO_NODE, "error_message": None}
        if _version(request) >= _FIND_COORDINATOR_BATCHED:
            coordinators = [
                {**defaults, "key": key, **self._find(key, key_type)}
                for key in getattr(request, "coordinator_keys", ())
            ]
            return _respond(request, {"coordinators": coordinators})
        return _respond(request, {**defaults, **self._find(request.key, key_type)})

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------

    async def join_group(
        self, request: Any, *, client_id: str, client_host: str = DEFAULT_CLIENT_HOST
    ) -> ResponsePayload:
        """Join the group; answers when the rebalance completes."""
        version = _version(request)
        session_timeout_ms = _ms(request.session_timeout)
        rebalance_timeout = getattr(request, "rebalance_timeout", None)
        join = JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            require_known_member_id=version >= _JOIN_REQUIRES_KNOWN_MEMBER_ID,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=(
                session_timeout_ms if rebalance_timeout is None else _ms(rebalance_timeout)
            ),
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        )
        answer: _Answer[JoinGroupResult] = _Answer()
        self.coordinator.handle_join_group(join, answer.deliver)
        result = await answer.wait()
        protocol_name = result.protocol_name
        if protocol_name is None and version < _JOIN_NULLABLE_PROTOCOL_NAME:
            protocol_name = ""
        return _respond(
            request,
            {
                "error_code": result.error,
                "generation_id": result.generation_id,
                "protocol_type": result.protocol_type,
                "protocol_name": protocol_name,
                "leader": result.leader_id,
                "member_id": result.member_id,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata,
                    }
                    for m in result.members
                ],
            },
        )

    async def sync_group(self, request: Any) -> ResponsePayload:
        """Send (leader) or await (everyone) the assignment of the current generation."""
        answer: _Answer[SyncGroupResult] = _Answer()
        self.coordinator.handle_sync_group(
            request.group_id,
            int(request.generation_id),
            request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments},
            answer.deliver,
        )
        result = await answer.wait()
        return _respond(
            request,
            {
                "error_code": result.error,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment,
            },
        )

    async def heartbeat(self, request: Any) -> ResponsePayload:
        """A member's sign of life."""
        answer: _Answer[ErrorCode] = _Answer()
        self.coordinator.handle_heartbeat(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            int(request.generation_id),
            answer.deliver,
        )
        return _respond(request, {"error_code": await answer.wait()})

    async def leave_group(self, request: Any) -> ResponsePayload:
        """Members leave the group at once."""
        batched = _version(request) >= _LEAVE_BATCHED
        leaving = (
            [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
            if batched
            else [LeavingMember(request.member_id, None)]
        )
        answer: _Answer[tuple[ErrorCode, list[LeavingMember]]] = _Answer()
        self.coordinator.handle_leave_group(
            request.group_id, leaving, lambda error, members: answer.deliver((error, members))
        )
        error, members = await answer.wait()
        if not batched and error is ErrorCode.none and members:
            error = members[0].error  # before v3 the one member's error is the answer
        return _respond(
            request,
            {
                "error_code": error,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "error_code": m.error,
                    }
                    for m in members
                ],
            },
        )

    # --- offsets -------------------------------------------------------------------------

    async def offset_commit(self, request: Any) -> ResponsePayload:
        """Commit offsets; answers once they are written.

        A partition that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION and its
        offset is not stored, as Kafka's ``handleOffsetCommitRequest`` does; the others
        are committed.
        """
        offsets: dict[TopicPartition, OffsetValue] = {}
        unknown: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topics:
            for partition in topic.partitions:
                tp = (topic.name, int(partition.partition_index))
                if not self._partition_exists(*tp):
                    unknown[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                offsets[tp] = OffsetValue(
                    offset=int(partition.committed_offset),
                    leader_epoch=int(getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH)),
                    metadata=partition.committed_metadata or "",
                    commit_timestamp_ms=self.coordinator.manager.clock_ms(),
                )
        answer: _Answer[dict[TopicPartition, ErrorCode]] = _Answer()
        if offsets:
            self.coordinator.handle_commit_offsets(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                int(request.generation_id_or_member_epoch),
                offsets,
                answer.deliver,
            )
            errors = await answer.wait()
        else:
            errors = {}
        errors.update(unknown)
        return _respond(request, {"topics": _partition_errors(request, errors)})

    async def txn_offset_commit(self, request: Any) -> ResponsePayload:
        """Commit offsets in a transaction; answers once they are written (pending until
        the transaction ends)."""
        offsets: dict[TopicPartition, OffsetValue] = {}
        errors: dict[TopicPartition, ErrorCode] = {}
        commit_timestamp_ms = self.coordinator.manager.clock_ms()
        for topic in request.topics:
            for partition in topic.partitions:
                tp = (topic.name, int(partition.partition_index))
                if not self._partition_exists(*tp):
                    errors[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                offsets[tp] = OffsetValue(
                    offset=int(partition.committed_offset),
                    leader_epoch=int(getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH)),
                    metadata=partition.committed_metadata or "",
                    commit_timestamp_ms=commit_timestamp_ms,
                )
        if offsets:
            answer: _Answer[dict[TopicPartition, ErrorCode]] = _Answer()
            self.coordinator.handle_txn_commit_offsets(
                request.group_id,
                int(request.producer_id),
                int(request.producer_epoch),
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
                int(getattr(request, "generation_id", -1)),
                offsets,
                answer.deliver,
            )
            errors.update(await answer.wait())
        if _version(request) < _TXN_OFFSET_COMMIT_LOAD_ERROR:
            errors = {
                tp: ErrorCode.coordinator_not_available
                if error is ErrorCode.coordinator_load_in_progress
                else error
                for tp, error in errors.items()
            }
        return _respond(request, {"topics": _partition_errors(request, errors)})

    def offset_fetch(self, request: Any) -> ResponsePayload:
        """Committed offsets of the asked partitions (from v2, None asks for all)."""
        wanted: list[TopicPartition] | None = None
        if request.topics is not None:
            wanted = [
                (topic.name, int(index))
                for topic in request.topics
                for index in topic.partition_indexes
            ]
        error, fetched = self.coordinator.handle_fetch_offsets(
            request.group_id, wanted, require_stable=bool(getattr(request, "require_stable", False))
        )
        per_partition_error = _version(request) < _OFFSET_FETCH_ALL_PARTITIONS
        if per_partition_error and error is not ErrorCode.none and wanted is not None:
            # v1 has no top-level error: every partition carries it.
            fetched = {}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(fetched.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset.offset,
                    "committed_leader_epoch": offset.leader_epoch,
                    "metadata": offset.metadata,
                    "error_code": offset.error,
                }
            )
        if per_partition_error and error is not ErrorCode.none and wanted is not None:
            for topic, partition in wanted:
                by_topic.setdefault(topic, []).append(
                    {
                        "partition_index": partition,
                        "committed_offset": _NO_OFFSET,
                        "committed_leader_epoch": NO_LEADER_EPOCH,
                        "metadata": "",
                        "error_code": error,
                    }
                )
        return _respond(
            request,
            {
                "error_code": error,
                "topics": [
                    {"name": topic, "partitions": partitions}
                    for topic, partitions in by_topic.items()
                ],
            },
        )

    # --- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------

    def list_groups(self, request: Any) -> ResponsePayload:
        """The groups this broker coordinates (v4: filtered by state)."""
        states = frozenset(getattr(request, "states_filter", ()))
        types = {t.lower() for t in getattr(request, "types_filter", ())}
        error, overviews = self.coordinator.handle_list_groups(states)
        if types and _CLASSIC_GROUP_TYPE not in types:
            overviews = []
        return _respond(
            request,
            {
                "error_code": error,
                "groups": [
                    {
                        "group_id": o.group_id,
                        "protocol_type": o.protocol_type,
                        "group_state": o.state.value,
                        "group_type": _CLASSIC_GROUP_TYPE,
                    }
                    for o in overviews
                ],
            },
        )

    def describe_groups(self, request: Any) -> ResponsePayload:
        """State, protocol and members of each named group."""
        described = []
        for group_id in request.groups:
            error, summary = self.coordinator.handle_describe_group(group_id)
            described.append(
                {
                    "error_code": error,
                    "group_id": group_id,
                    "group_state": summary.state,
                    "protocol_type": summary.protocol_type,
                    "protocol_data": summary.protocol_name,
                    "authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.metadata,
                            "member_assignment": m.assignment,
                        }
                        for m in summary.members
                    ],
                }
            )
        return _respond(request, {"groups": described})

    def delete_groups(self, request: Any) -> ResponsePayload:
        """Delete empty groups and their committed offsets."""
        results = self.coordinator.handle_delete_groups(list(request.groups_names))
        return _respond(
            request,
            {
                "results": [
                    {"group_id": group_id, "error_code": error}
                    for group_id, error in results.items()
                ]
            },
        )

    def offset_delete(self, request: Any) -> ResponsePayload:
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
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic_name, partition_index), partition_error in errors.items():
            by_topic.setdefault(topic_name, []).append(
                {"partition_index": partition_index, "error_code": partition_error}
            )
        return _respond(
            request,
            {
                "error_code": error,
                "topics": [
                    {"name": name, "partitions": partitions}
                    for name, partitions in by_topic.items()
                ],
            },
        )
