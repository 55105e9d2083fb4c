"""Authorization of the group coordinator's APIs, as Kafka's ``KafkaApis`` does it.

The coordinator (``tickwheel.coordinator.group``) knows nothing of principals; with an
authorizer configured, the rule of each API (``authorize_...``, a ``Rule``: the request,
its body read as the newest version, and the coordinator to ``ask``) checks a group API
request here first, asks the coordinator only about what the principal may touch (a
narrowed copy of the typed body), then puts the refusals into its typed answer:

- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else the whole
  request is answered GROUP_AUTHORIZATION_FAILED;
- ConsumerGroupHeartbeat: READ on the group, and DESCRIBE on every subscribed topic
  (else TOPIC_AUTHORIZATION_FAILED);
- OffsetCommit: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED),
  and READ on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED);
  TxnOffsetCommit first needs WRITE on the transactional id (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then the same;
- OffsetFetch: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each
  topic asked for (TOPIC_AUTHORIZATION_FAILED); a fetch of all of a group's offsets
  leaves out the topics the principal may not DESCRIBE;
- DescribeGroups, ConsumerGroupDescribe: DESCRIBE on each group; DeleteGroups: DELETE on
  each group; OffsetDelete: DELETE on the group, READ on each topic;
- ListGroups: everything with DESCRIBE on the cluster, else the groups it may DESCRIBE.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import (
    ConsumerGroupDescribeResponse,
)
from kio.schema.consumer_group_describe.v1.response import (
    DescribedGroup as ConsumerDescribedGroup,
)
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeletableGroupResult, DeleteGroupsResponse
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribedGroup, DescribeGroupsResponse
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_commit.v9.response import OffsetCommitResponse
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_delete.v0.response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse as OffsetFetchResponseV7
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
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
from kio.static.primitive import i32, i64
from kio.static.protocol import ResponsePayload

from tickwheel.coordinator.group import (
    AskedPartitions,
    CommitTopic,
    PartitionError,
    asked_partitions,
    offset_commit_response,
    txn_offset_commit_response,
)
from tickwheel.protocol import NO_THROTTLE, DecodedRequest, convert
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorize_cluster, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import Response, refuse_whole, reply

_OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION = 2
_NO_OFFSET = i64(-1)
_NO_LEADER_EPOCH = i32(-1)
_GROUP_DENIED = ErrorCode.group_authorization_failed
_TOPIC_DENIED = ErrorCode.topic_authorization_failed


class _OfGroup(Protocol):
    @property
    def group_id(self) -> GroupId: ...


class _Named(Protocol):
    @property
    def name(self) -> TopicName: ...


class _FetchTopic(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def partition_indexes(self) -> Sequence[i32]: ...


class _CommitRequest(Protocol):
    @property
    def topics(self) -> Sequence[CommitTopic]: ...


class _PartitionAnswer(Protocol):
    @property
    def partition_index(self) -> i32: ...
    @property
    def error_code(self) -> ErrorCode: ...


class _TopicAnswer(Protocol):
    @property
    def name(self) -> TopicName: ...
    @property
    def partitions(self) -> Sequence[_PartitionAnswer]: ...


class _CommitAnswer(Protocol):
    @property
    def topics(self) -> Sequence[_TopicAnswer]: ...


Req = TypeVar("Req")
Resp = TypeVar("Resp")
GroupRequest = TypeVar("GroupRequest", bound=_OfGroup)
CommitRequest = TypeVar("CommitRequest", bound=_CommitRequest)
FetchTopic = TypeVar("FetchTopic", bound=_FetchTopic)
Ask = Callable[[Req], Awaitable[Resp]]
"""The coordinator's answer to a request body (narrowed to what the principal may touch)."""
Rule = Callable[[BrokerContext, DecodedRequest, Req, Ask[Req, Resp]], Awaitable[Response]]
"""An API's authorization: the request, its body and the coordinator to ask, in; the
response frame out."""


def _group_allowed(
    context: BrokerContext, request: DecodedRequest, operation: AclOperation, group_id: str
) -> bool:
    return authorize(context, request, operation, ResourceType.GROUP, group_id)


def _topics_allowed(
    context: BrokerContext, request: DecodedRequest, operation: AclOperation, names: Iterable[str]
) -> set[str]:
    return authorized_names(context, request, operation, ResourceType.TOPIC, names)


async def authorize_member(
    context: BrokerContext,
    request: DecodedRequest,
    body: GroupRequest,
    ask: Ask[GroupRequest, ResponsePayload],
) -> Response:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group."""
    if not _group_allowed(context, request, AclOperation.READ, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    return reply(request, await ask(body))


async def authorize_consumer_group_heartbeat(
    context: BrokerContext,
    request: DecodedRequest,
    body: ConsumerGroupHeartbeatRequest,
    ask: Ask[ConsumerGroupHeartbeatRequest, ResponsePayload],
) -> Response:
    """ConsumerGroupHeartbeat: READ on the group, DESCRIBE on every subscribed topic."""
    if not _group_allowed(context, request, AclOperation.READ, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    subscribed = body.subscribed_topic_names or ()
    if set(subscribed) - _topics_allowed(context, request, AclOperation.DESCRIBE, subscribed):
        return refuse_whole(request, _TOPIC_DENIED)
    return reply(request, await ask(body))


def _errors_of(answer: _CommitAnswer) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.name, int(p.partition_index)): p.error_code
        for topic in answer.topics
        for p in topic.partitions
    }


async def _commit(
    context: BrokerContext,
    request: DecodedRequest,
    body: CommitRequest,
    ask: Ask[CommitRequest, _CommitAnswer],
    refusal: ErrorCode | None,
    narrow: Callable[[CommitRequest, set[str]], CommitRequest],
    respond: Callable[[AskedPartitions, PartitionError], ResponsePayload],
) -> Response:
    """OffsetCommit or TxnOffsetCommit: every partition answered ``refusal`` if set, else
    the topics the principal may not READ answered TOPIC_AUTHORIZATION_FAILED and the
    others committed (``narrow`` keeps those in the body)."""
    asked = asked_partitions(body.topics)
    if refusal is not None:
        return reply(request, respond(asked, lambda _tp: refusal))
    allowed = _topics_allowed(context, request, AclOperation.READ, (n for n, _ in asked))
    kept = [(name, indexes) for name, indexes in asked if name in allowed]
    refused = [(name, indexes) for name, indexes in asked if name not in allowed]
    errors = _errors_of(await ask(narrow(body, allowed) if refused else body)) if kept else {}
    return reply(request, respond([*kept, *refused], lambda tp: errors.get(tp, _TOPIC_DENIED)))


def _keep_offset_commit_topics(body: OffsetCommitRequest, names: set[str]) -> OffsetCommitRequest:
    return dataclasses.replace(body, topics=tuple(t for t in body.topics if t.name in names))


def _keep_txn_offset_commit_topics(
    body: TxnOffsetCommitRequest, names: set[str]
) -> TxnOffsetCommitRequest:
    return dataclasses.replace(body, topics=tuple(t for t in body.topics if t.name in names))


async def authorize_offset_commit(
    context: BrokerContext,
    request: DecodedRequest,
    body: OffsetCommitRequest,
    ask: Ask[OffsetCommitRequest, OffsetCommitResponse],
) -> Response:
    """OffsetCommit: READ on the group, then READ on each topic."""
    allowed = _group_allowed(context, request, AclOperation.READ, body.group_id)
    refusal = None if allowed else _GROUP_DENIED
    return await _commit(
        context,
        request,
        body,
        ask,
        refusal,
        _keep_offset_commit_topics,
        offset_commit_response,
    )


async def authorize_txn_offset_commit(
    context: BrokerContext,
    request: DecodedRequest,
    body: TxnOffsetCommitRequest,
    ask: Ask[TxnOffsetCommitRequest, TxnOffsetCommitResponse],
) -> Response:
    """TxnOffsetCommit: WRITE on the transactional id, then OffsetCommit's rules."""
    refusal = None
    if not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        refusal = ErrorCode.transactional_id_authorization_failed
    elif not _group_allowed(context, request, AclOperation.READ, body.group_id):
        refusal = _GROUP_DENIED
    return await _commit(
        context,
        request,
        body,
        ask,
        refusal,
        _keep_txn_offset_commit_topics,
        txn_offset_commit_response,
    )


def _refused_fetch(
    topics: Iterable[_FetchTopic], error: ErrorCode
) -> tuple[OffsetFetchResponseTopic, ...]:
    """OffsetFetch's answer of ``error`` for every partition of ``topics``."""
    return tuple(
        OffsetFetchResponseTopic(
            name=topic.name,
            partitions=tuple(
                OffsetFetchResponsePartition(
                    partition_index=index,
                    committed_offset=_NO_OFFSET,
                    committed_leader_epoch=_NO_LEADER_EPOCH,
                    metadata="",
                    error_code=error,
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in topics
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _FetchScope:
    """What one group's OffsetFetch may ask the coordinator (``topics``; None: all),
    the refused topics' answers, and which topics of the coordinator's answer to keep."""

    context: BrokerContext
    request: DecodedRequest
    refused: tuple[OffsetFetchResponseTopic, ...]
    everything: bool

    def keep(self, topic: _Named) -> bool:
        """A fetch of all offsets shows only the topics the principal may DESCRIBE."""
        return not self.everything or authorize(
            self.context,
            self.request,
            AclOperation.DESCRIBE,
            ResourceType.TOPIC,
            topic.name,
            log_if_denied=False,
        )


def _fetch_scope(
    context: BrokerContext, request: DecodedRequest, topics: Sequence[FetchTopic] | None
) -> tuple[tuple[FetchTopic, ...] | None, _FetchScope]:
    """The topics an OffsetFetch of ``topics`` (None: all) may ask for, and its scope."""
    if topics is None:
        return None, _FetchScope(context, request, (), everything=True)
    allowed = _topics_allowed(context, request, AclOperation.DESCRIBE, (t.name for t in topics))
    refused = _refused_fetch((t for t in topics if t.name not in allowed), _TOPIC_DENIED)
    kept = tuple(t for t in topics if t.name in allowed)
    return kept, _FetchScope(context, request, refused, everything=False)


async def authorize_offset_fetch(
    context: BrokerContext,
    request: DecodedRequest,
    body: OffsetFetchRequestV7,
    ask: Ask[OffsetFetchRequestV7, OffsetFetchResponseV7],
) -> Response:
    """OffsetFetch of one group (before v8): DESCRIBE on it, DESCRIBE on each topic."""
    if not _group_allowed(context, request, AclOperation.DESCRIBE, body.group_id):
        if request.api_version >= _OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION:
            return refuse_whole(request, _GROUP_DENIED)
        # v1 has no request-level error: every partition asked for carries it.
        topics = _refused_fetch(body.topics or (), _GROUP_DENIED)
        return reply(request, OffsetFetchResponseV7(throttle_time=NO_THROTTLE, topics=topics))
    kept, scope = _fetch_scope(context, request, body.topics)
    answered = await ask(dataclasses.replace(body, topics=kept))
    shown = tuple(t for t in answered.topics if scope.keep(t))
    return reply(request, dataclasses.replace(answered, topics=shown + scope.refused))


async def authorize_offset_fetch_groups(
    context: BrokerContext,
    request: DecodedRequest,
    body: OffsetFetchRequest,
    ask: Ask[OffsetFetchRequest, OffsetFetchResponse],
) -> Response:
    """OffsetFetch of several groups (v8+): DESCRIBE on each, DESCRIBE on each topic."""
    allowed_groups = []
    scopes: dict[str, _FetchScope] = {}
    denied_groups = []
    for group in body.groups:
        if not _group_allowed(context, request, AclOperation.DESCRIBE, group.group_id):
            denied_groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id, topics=(), error_code=_GROUP_DENIED
                )
            )
            continue
        kept, scopes[group.group_id] = _fetch_scope(context, request, group.topics)
        allowed_groups.append(dataclasses.replace(group, topics=kept))
    answered_groups: tuple[OffsetFetchResponseGroup, ...] = ()
    if allowed_groups:
        answered = await ask(dataclasses.replace(body, groups=tuple(allowed_groups)))
        answered_groups = tuple(
            dataclasses.replace(
                g,
                topics=tuple(t for t in g.topics if scopes[g.group_id].keep(t))
                + tuple(convert(OffsetFetchResponseTopics, t) for t in scopes[g.group_id].refused),
            )
            for g in answered.groups
        )
    groups = answered_groups + tuple(denied_groups)
    return reply(request, OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=groups))


def _split_groups(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    group_ids: Iterable[GroupId],
) -> tuple[tuple[GroupId, ...], tuple[GroupId, ...]]:
    """The groups the principal may ``operation`` and the others, in request order."""
    ids = tuple(group_ids)
    allowed = tuple(g for g in ids if _group_allowed(context, request, operation, g))
    return allowed, tuple(g for g in ids if g not in allowed)


async def authorize_describe_groups(
    context: BrokerContext,
    request: DecodedRequest,
    body: DescribeGroupsRequest,
    ask: Ask[DescribeGroupsRequest, DescribeGroupsResponse],
) -> Response:
    """DescribeGroups: DESCRIBE on each group."""
    allowed, denied = _split_groups(context, request, AclOperation.DESCRIBE, body.groups)
    if not denied:
        return reply(request, await ask(body))
    answered = (await ask(dataclasses.replace(body, groups=allowed))).groups if allowed else ()
    refused = tuple(
        DescribedGroup(
            error_code=_GROUP_DENIED,
            group_id=group_id,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
        )
        for group_id in denied
    )
    return reply(
        request, DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=answered + refused)
    )


async def authorize_consumer_group_describe(
    context: BrokerContext,
    request: DecodedRequest,
    body: ConsumerGroupDescribeRequest,
    ask: Ask[ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse],
) -> Response:
    """ConsumerGroupDescribe: DESCRIBE on each group."""
    allowed, denied = _split_groups(context, request, AclOperation.DESCRIBE, body.group_ids)
    if not denied:
        return reply(request, await ask(body))
    answered = (await ask(dataclasses.replace(body, group_ids=allowed))).groups if allowed else ()
    refused = tuple(
        ConsumerDescribedGroup(
            error_code=_GROUP_DENIED,
            group_id=group_id,
            group_state="",
            group_epoch=i32(0),
            assignment_epoch=i32(0),
            assignor_name="",
            members=(),
        )
        for group_id in denied
    )
    return reply(
        request,
        ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=answered + refused),
    )


async def authorize_delete_groups(
    context: BrokerContext,
    request: DecodedRequest,
    body: DeleteGroupsRequest,
    ask: Ask[DeleteGroupsRequest, DeleteGroupsResponse],
) -> Response:
    """DeleteGroups: DELETE on each group."""
    allowed, denied = _split_groups(context, request, AclOperation.DELETE, body.groups_names)
    if not denied:
        return reply(request, await ask(body))
    answered = (
        (await ask(dataclasses.replace(body, groups_names=allowed))).results if allowed else ()
    )
    refused = tuple(
        DeletableGroupResult(group_id=group_id, error_code=_GROUP_DENIED) for group_id in denied
    )
    return reply(
        request, DeleteGroupsResponse(throttle_time=NO_THROTTLE, results=answered + refused)
    )


async def authorize_list_groups(
    context: BrokerContext,
    request: DecodedRequest,
    body: ListGroupsRequest,
    ask: Ask[ListGroupsRequest, ListGroupsResponse],
) -> Response:
    """ListGroups: everything with DESCRIBE on the cluster, else the groups it may
    DESCRIBE."""
    answered = await ask(body)
    if authorize_cluster(context, request, AclOperation.DESCRIBE, log_if_denied=False):
        return reply(request, answered)
    listed = tuple(
        g
        for g in answered.groups
        if authorize(
            context,
            request,
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            g.group_id,
            log_if_denied=False,
        )
    )
    return reply(request, dataclasses.replace(answered, groups=listed))


async def authorize_offset_delete(
    context: BrokerContext,
    request: DecodedRequest,
    body: OffsetDeleteRequest,
    ask: Ask[OffsetDeleteRequest, OffsetDeleteResponse],
) -> Response:
    """OffsetDelete: DELETE on the group, READ on each topic."""
    if not _group_allowed(context, request, AclOperation.DELETE, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    names = {t.name for t in body.topics}
    allowed = _topics_allowed(context, request, AclOperation.READ, names)
    if names <= allowed:
        return reply(request, await ask(body))
    kept = tuple(t for t in body.topics if t.name in allowed)
    answered = await ask(dataclasses.replace(body, topics=kept))
    refused = tuple(
        OffsetDeleteResponseTopic(
            name=t.name,
            partitions=tuple(
                OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=_TOPIC_DENIED
                )
                for p in t.partitions
            ),
        )
        for t in body.topics
        if t.name not in allowed
    )
    return reply(request, dataclasses.replace(answered, topics=answered.topics + refused))
