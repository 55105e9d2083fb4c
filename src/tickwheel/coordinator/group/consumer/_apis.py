"""``ConsumerGroupApis``: the group APIs with consumer-protocol groups, as kio entities.

ConsumerGroupHeartbeat and ConsumerGroupDescribe are answered here; every other group
API goes to the classic ``GroupApis`` after a look at whether its group id names a
consumer-protocol group (one namespace for every protocol; ListGroups also lists, and
DeleteGroups hands on, the share groups the broker tells it of). ``GROUP_API_HANDLERS``
names the handler of each API, which the broker's API table calls directly:

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
OffsetFetch widened to v9 (the batched versions are answered here, each group through
the classic coordinator's ``handle_fetch_offsets``), and the two new APIs. Topic ids
travel on the wire; ``TopicCatalog`` names them for ConsumerGroupDescribe.

Concurrency contract: the methods run on the broker's event loop, like ``GroupApis``;
a heartbeat's answer, given when its append completes (on whatever thread that is),
reaches the loop through ``GroupApis``' ``_Answer``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator.group._apis import (
    DEFAULT_CLIENT_HOST,
    DELETE_GROUPS_KEY,
    DESCRIBE_GROUPS_KEY,
    GROUP_API_NAMES,
    GROUP_API_VERSIONS,
    HEARTBEAT_KEY,
    JOIN_GROUP_KEY,
    LEAVE_GROUP_KEY,
    LIST_GROUPS_KEY,
    OFFSET_COMMIT_KEY,
    OFFSET_DELETE_KEY,
    OFFSET_FETCH_KEY,
    SYNC_GROUP_KEY,
    TXN_OFFSET_COMMIT_KEY,
    GroupApis,
    _Answer,
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
from tickwheel.protocol import ApiKey, VersionRange, build_entity, response_schema

CONSUMER_GROUP_HEARTBEAT_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
CONSUMER_GROUP_DESCRIBE_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE

CONSUMER_GROUP_API_VERSIONS: Mapping[int, VersionRange] = {
    CONSUMER_GROUP_HEARTBEAT_KEY: VersionRange(0, 1),
    CONSUMER_GROUP_DESCRIBE_KEY: VersionRange(0, 1),
}
_OFFSET_FETCH_BATCHED = 8  # OffsetFetch names several groups from v8 (KIP-709)
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
_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
_CONSUMER_MEMBER_TYPE = 1  # KIP-1099: -1 unknown, 0 classic, 1 consumer protocol
_DEAD = GroupState.DEAD.value
_JOIN_NULLABLE = 7  # JoinGroup's protocol name is nullable from v7
_CLIENT_MEMBER_ID_VERSION = 1  # ConsumerGroupHeartbeat v1: the client names its member


def _respond(request: RequestPayload, values: Mapping[str, Any]) -> ResponsePayload:
    cls = response_schema(int(type(request).__api_key__), int(type(request).__version__))
    return build_entity(cls, {"throttle_time": 0, **values})


def _refuse_offsets(request: Any, error: ErrorCode) -> ResponsePayload:
    """An (Txn)OffsetCommit response with ``error`` for every partition."""
    return _respond(
        request,
        {
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "error_code": error}
                        for p in topic.partitions
                    ],
                }
                for topic in request.topics
            ]
        },
    )


def _owned(request: Any) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    return normalized(
        {
            tp.topic_id: [int(p) for p in tp.partitions]
            for tp in request.topic_partitions
            if tp.topic_id is not None
        }
    )


def _wire_assignment(assignment: Assignment) -> list[dict[str, Any]]:
    return [
        {"topic_id": topic_id, "partitions": sorted(partitions)}
        for topic_id, partitions in sorted(assignment.items())
    ]


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
        self.other_groups: Callable[[frozenset[str]], list[dict[str, Any]]] = lambda states: []
        self.is_other_group: Callable[[str], bool] = lambda name: False
        self.delete_other_group: Callable[[str], Awaitable[ErrorCode]] | None = None

    async def join_group(
        self, request: Any, client_id: str, client_host: str = DEFAULT_CLIENT_HOST
    ) -> ResponsePayload:
        """JoinGroup: refused for a consumer-protocol group that stays one, else classic."""
        refused = self._refuse_join(request)
        if refused is not None:
            return refused
        return await self.classic.join_group(request, client_id=client_id, client_host=client_host)

    def _refuse_join(self, request: Any) -> ResponsePayload | None:
        """The answer to a classic JoinGroup for a consumer-protocol group that stays one."""
        error = self.coordinator.downgrade(request.group_id)
        if error is None:
            return None
        return _respond(
            request,
            {
                "error_code": error,
                "generation_id": -1,
                "protocol_name": None if int(type(request).__version__) >= _JOIN_NULLABLE else "",
                "leader": "",
                "member_id": request.member_id,
                "members": [],
            },
        )

    # --- ConsumerGroupHeartbeat, ConsumerGroupDescribe -------------------------------------

    async def heartbeat(
        self, request: Any, client_id: str, client_host: str = DEFAULT_CLIENT_HOST
    ) -> ResponsePayload:
        """ConsumerGroupHeartbeat; answers once the group's records are written."""
        decoded = HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            subscribed_topic_names=(
                None
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=_owned(request),
            client_id=client_id,
            client_host=client_host,
            member_id_required=int(type(request).__version__) >= _CLIENT_MEMBER_ID_VERSION,
        )
        answer: _Answer[HeartbeatResult] = _Answer()
        self.coordinator.handle_heartbeat(decoded, answer.deliver)
        result = await answer.wait()
        return _respond(
            request,
            {
                "error_code": result.error,
                "error_message": result.error_message,
                "member_id": result.member_id,
                "member_epoch": result.member_epoch,
                "heartbeat_interval": result.heartbeat_interval_ms,
                "assignment": (
                    None
                    if result.assignment is None
                    else {"topic_partitions": _wire_assignment(result.assignment)}
                ),
            },
        )

    def _described_assignment(self, assignment: Assignment) -> dict[str, Any]:
        return {
            "topic_partitions": [
                {
                    "topic_id": topic_id,
                    "topic_name": self._topics.topic_name(topic_id) or "",
                    "partitions": sorted(partitions),
                }
                for topic_id, partitions in sorted(assignment.items())
            ]
        }

    def describe(self, request: Any) -> ResponsePayload:
        """ConsumerGroupDescribe: members, epochs, current and target assignments."""
        groups = []
        for group_id in request.group_ids:
            described = self.coordinator.describe(group_id)
            groups.append(
                {
                    "error_code": described.error,
                    "group_id": group_id,
                    "group_state": described.state,
                    "group_epoch": described.group_epoch,
                    "assignment_epoch": described.assignment_epoch,
                    "assignor_name": described.assignor_name,
                    "authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
                    "members": [
                        {
                            "member_id": m.member.member_id,
                            "instance_id": m.member.instance_id,
                            "rack_id": m.member.rack_id,
                            "member_epoch": m.member.member_epoch,
                            "client_id": m.member.client_id,
                            "client_host": m.member.client_host,
                            "subscribed_topic_names": list(m.member.subscribed_topic_names),
                            "subscribed_topic_regex": m.member.subscribed_topic_regex,
                            "assignment": self._described_assignment(m.member.assigned_partitions),
                            "target_assignment": self._described_assignment(m.target),
                            "member_type": _CONSUMER_MEMBER_TYPE,
                        }
                        for m in described.members
                    ],
                }
            )
        return _respond(request, {"groups": groups})

    # --- the classic APIs, for consumer-protocol groups ------------------------------------

    async def offset_commit(self, request: Any) -> ResponsePayload:
        """OffsetCommit: a consumer-protocol member's epoch is checked first."""
        error = self.coordinator.validate_offset_commit(
            request.group_id,
            request.member_id,
            int(request.generation_id_or_member_epoch),
            api_version=int(type(request).__version__),
        )
        if error is None:
            return await self.classic.offset_commit(request)
        if error is not ErrorCode.none:
            return _refuse_offsets(request, error)
        # Validated here: the offsets manager stores them as for a group without members.
        as_admin = dataclasses.replace(
            request, member_id="", generation_id_or_member_epoch=-1, group_instance_id=None
        )
        return await self.classic.offset_commit(as_admin)

    async def txn_offset_commit(self, request: Any) -> ResponsePayload:
        """TxnOffsetCommit: a consumer-protocol member's epoch is checked first."""
        error = self.coordinator.validate_offset_commit(
            request.group_id,
            getattr(request, "member_id", ""),
            int(getattr(request, "generation_id", -1)),
            api_version=int(type(request).__version__),
            transactional=True,
        )
        if error is None:
            return await self.classic.txn_offset_commit(request)
        if error is not ErrorCode.none:
            return _refuse_offsets(request, error)
        as_producer = dataclasses.replace(
            request,
            **{
                name: value
                for name, value in (
                    ("member_id", ""),
                    ("generation_id", -1),
                    ("group_instance_id", None),
                )
                if hasattr(request, name)
            },
        )
        return await self.classic.txn_offset_commit(as_producer)

    def offset_fetch(self, request: Any) -> ResponsePayload:
        """OffsetFetch v8+: each named group's offsets; from v9 a consumer-protocol
        member's epoch is checked (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). Earlier
        versions name one group and no member: the classic handler answers them."""
        if int(type(request).__version__) < _OFFSET_FETCH_BATCHED:
            return self.classic.offset_fetch(request)
        require_stable = bool(request.require_stable)
        groups = []
        for asked in request.groups:
            wanted = (
                None
                if asked.topics is None
                else [(t.name, int(p)) for t in asked.topics for p in t.partition_indexes]
            )
            error = self.coordinator.validate_offset_fetch(
                asked.group_id,
                getattr(asked, "member_id", None),
                int(getattr(asked, "member_epoch", -1)),
            )
            fetched: dict[tuple[str, int], FetchedOffset] = {}
            if error is None or error is ErrorCode.none:
                error, fetched = self.classic.coordinator.handle_fetch_offsets(
                    asked.group_id, wanted, require_stable=require_stable
                )
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
            groups.append(
                {
                    "group_id": asked.group_id,
                    "error_code": error,
                    "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()],
                }
            )
        return _respond(request, {"groups": groups})

    def offset_delete(self, request: Any) -> ResponsePayload:
        """OffsetDelete: a consumer-protocol group keeps the offsets of subscribed topics."""
        subscribed = self.coordinator.subscribed_topics(request.group_id)
        if not subscribed:
            return self.classic.offset_delete(request)
        kept = [t for t in request.topics if t.name in subscribed]
        classic = self.classic.offset_delete(
            dataclasses.replace(
                request, topics=tuple(t for t in request.topics if t.name not in subscribed)
            )
        )
        response: Any = classic
        if response.error_code is not ErrorCode.none:
            return classic
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": p.error_code}
                    for p in t.partitions
                ],
            }
            for t in response.topics
        ] + [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.group_subscribed_to_topic,
                    }
                    for p in t.partitions
                ],
            }
            for t in kept
        ]
        return _respond(request, {"error_code": ErrorCode.none, "topics": topics})

    def list_groups(self, request: Any) -> ResponsePayload:
        """ListGroups of both group types, with ``types_filter`` and ``states_filter``."""
        types = {t.lower() for t in getattr(request, "types_filter", ())}
        states = {s.lower() for s in getattr(request, "states_filter", ())}
        error, overviews = self.classic.coordinator.handle_list_groups()
        consumer = dict(self.coordinator.groups())
        groups: list[dict[str, Any]] = []
        if not types or _CLASSIC_GROUP_TYPE in types:
            groups += [
                {
                    "group_id": o.group_id,
                    "protocol_type": o.protocol_type,
                    "group_state": o.state.value,
                    "group_type": _CLASSIC_GROUP_TYPE,
                }
                for o in overviews
                if o.group_id not in consumer
            ]
        if not types or CONSUMER_GROUP_TYPE in types:
            groups += [
                {
                    "group_id": group_id,
                    "protocol_type": CONSUMER_PROTOCOL_TYPE,
                    "group_state": state.value,
                    "group_type": CONSUMER_GROUP_TYPE,
                }
                for group_id, state in consumer.items()
            ]
        # The share groups.
        groups += [
            g for g in self.other_groups(frozenset(states)) if not types or g["group_type"] in types
        ]
        if states:
            groups = [g for g in groups if g["group_state"].lower() in states]
        return _respond(request, {"error_code": error, "groups": groups})

    def describe_groups(self, request: Any) -> ResponsePayload:
        """DescribeGroups: a consumer-protocol group reads "Dead" (it is not classic)."""
        if not any(self.coordinator.has_group(g) for g in request.groups):
            return self.classic.describe_groups(request)
        classic_response: Any = self.classic.describe_groups(
            dataclasses.replace(
                request,
                groups=tuple(g for g in request.groups if not self.coordinator.has_group(g)),
            )
        )
        classic = {g.group_id: g for g in classic_response.groups}
        described = [
            classic.get(group_id)
            or {
                "error_code": ErrorCode.none,
                "group_id": group_id,
                "group_state": _DEAD,
                "protocol_type": "",
                "protocol_data": "",
                "authorized_operations": _AUTHORIZED_OPERATIONS_OMITTED,
                "members": [],
            }
            for group_id in request.groups
        ]
        return _respond(request, {"groups": described})

    async def delete_groups(self, request: Any) -> ResponsePayload:
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
        for group_id, error in consumer.items():
            if error is ErrorCode.none and results.get(group_id) is ErrorCode.group_id_not_found:
                results[group_id] = ErrorCode.none  # a group without offsets
            elif error is not ErrorCode.none:
                results[group_id] = error
        return _respond(
            request,
            {
                "results": [
                    {"group_id": group_id, "error_code": results[group_id]}
                    for group_id in request.groups_names
                ]
            },
        )


GroupApiHandler = Callable[[ConsumerGroupApis, Any, str], Awaitable[ResponsePayload]]
"""One group API's handler: the broker's ``ConsumerGroupApis``, a request body and the
client id in, the response body out."""


def _waiting(
    method: Callable[[ConsumerGroupApis, Any], Awaitable[ResponsePayload]],
) -> GroupApiHandler:
    """``method`` as a handler (it needs no client id)."""

    async def handle(apis: ConsumerGroupApis, request: Any, _client_id: str) -> ResponsePayload:
        return await method(apis, request)

    return handle


def _immediate(method: Callable[[ConsumerGroupApis, Any], ResponsePayload]) -> GroupApiHandler:
    """``method``, which answers without waiting, as a handler."""

    async def handle(apis: ConsumerGroupApis, request: Any, _client_id: str) -> ResponsePayload:
        return method(apis, request)

    return handle


def _classic(method: Callable[[GroupApis, Any], Awaitable[ResponsePayload]]) -> GroupApiHandler:
    """The classic ``GroupApis``' ``method`` as a handler (an API of classic groups only)."""

    async def handle(apis: ConsumerGroupApis, request: Any, _client_id: str) -> ResponsePayload:
        return await method(apis.classic, request)

    return handle


GROUP_API_HANDLERS: Mapping[int, GroupApiHandler] = {
    OFFSET_COMMIT_KEY: _waiting(ConsumerGroupApis.offset_commit),
    OFFSET_FETCH_KEY: _immediate(ConsumerGroupApis.offset_fetch),
    JOIN_GROUP_KEY: ConsumerGroupApis.join_group,
    HEARTBEAT_KEY: _classic(GroupApis.heartbeat),
    LEAVE_GROUP_KEY: _classic(GroupApis.leave_group),
    SYNC_GROUP_KEY: _classic(GroupApis.sync_group),
    DESCRIBE_GROUPS_KEY: _immediate(ConsumerGroupApis.describe_groups),
    LIST_GROUPS_KEY: _immediate(ConsumerGroupApis.list_groups),
    TXN_OFFSET_COMMIT_KEY: _waiting(ConsumerGroupApis.txn_offset_commit),
    DELETE_GROUPS_KEY: _waiting(ConsumerGroupApis.delete_groups),
    OFFSET_DELETE_KEY: _immediate(ConsumerGroupApis.offset_delete),
    CONSUMER_GROUP_HEARTBEAT_KEY: ConsumerGroupApis.heartbeat,
    CONSUMER_GROUP_DESCRIBE_KEY: _immediate(ConsumerGroupApis.describe),
}
"""The handler of each group API but FindCoordinator (which the broker routes by key
type to ``GroupApis.find_coordinator``), which the broker's API table calls directly."""
