"""Authorization of the group coordinator's APIs, as Kafka's ``KafkaApis`` does it.

The coordinator (``tickwheel.coordinator.group``) knows nothing of principals; with an
authorizer configured, the rule of each API (``authorized_group_handler``, chosen once
when the broker's API table is built) checks a group API request here first, hands the
coordinator's handler only what the principal may touch, then puts the refusals into
its answer:

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
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group import GroupService
from tickwheel.coordinator.group.consumer import GroupApiHandler
from tickwheel.protocol import (
    ApiKey,
    DecodedRequest,
    build_entity,
    encode_response,
    response_schema,
)
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorize_cluster, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import Response, refuse_whole

_OFFSET_COMMIT = ApiKey.OFFSET_COMMIT
_OFFSET_FETCH = ApiKey.OFFSET_FETCH
_JOIN_GROUP = ApiKey.JOIN_GROUP
_HEARTBEAT = ApiKey.HEARTBEAT
_LEAVE_GROUP = ApiKey.LEAVE_GROUP
_SYNC_GROUP = ApiKey.SYNC_GROUP
_DESCRIBE_GROUPS = ApiKey.DESCRIBE_GROUPS
_LIST_GROUPS = ApiKey.LIST_GROUPS
_DELETE_GROUPS = ApiKey.DELETE_GROUPS
_OFFSET_DELETE = 47
_TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT
_OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION = 2
_CONSUMER_GROUP_HEARTBEAT = ApiKey.CONSUMER_GROUP_HEARTBEAT
_CONSUMER_GROUP_DESCRIBE = ApiKey.CONSUMER_GROUP_DESCRIBE
_MEMBER_GROUP_APIS = frozenset({_JOIN_GROUP, _HEARTBEAT, _LEAVE_GROUP, _SYNC_GROUP})
_GROUP_DENIED = ErrorCode.group_authorization_failed
_TOPIC_DENIED = ErrorCode.topic_authorization_failed

_Rule = Callable[
    [BrokerContext, GroupService, DecodedRequest, GroupApiHandler], Coroutine[Any, Any, Response]
]
AuthorizedHandler = Callable[[BrokerContext, GroupService, DecodedRequest], Awaitable[Response]]


def _with(entity: Any, **values: Any) -> Any:
    """``entity`` with some fields replaced (nested values may be plain mappings)."""
    current = {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}
    return build_entity(type(entity), {**current, **values})


async def _delegate(
    groups: GroupService, request: DecodedRequest, handler: GroupApiHandler, body: Any
) -> Any:
    return await handler(groups.apis, body, request.header.client_id or "")


async def _answer(
    groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    return _encode(request, await _delegate(groups, request, handler, request.body))


def _group_allowed(
    context: BrokerContext, request: DecodedRequest, operation: AclOperation, group_id: str
) -> bool:
    return authorize(context, request, operation, ResourceType.GROUP, group_id)


def _topics_allowed(
    context: BrokerContext, request: DecodedRequest, operation: AclOperation, names: Iterable[str]
) -> set[str]:
    return authorized_names(context, request, operation, ResourceType.TOPIC, names)


def _partition_errors(
    topics: Iterable[tuple[str, Iterable[int]]], error_code: ErrorCode, **extra: Any
) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "partitions": [
                {"partition_index": index, "error_code": error_code, **extra} for index in indexes
            ],
        }
        for name, indexes in topics
    ]


async def _member_api(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    if not _group_allowed(context, request, AclOperation.READ, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    return await _answer(groups, request, handler)


async def _consumer_group_heartbeat(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    if not _group_allowed(context, request, AclOperation.READ, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    subscribed = body.subscribed_topic_names or ()
    if set(subscribed) - _topics_allowed(context, request, AclOperation.DESCRIBE, subscribed):
        return refuse_whole(request, _TOPIC_DENIED)
    return await _answer(groups, request, handler)


async def _commit(
    context: BrokerContext,
    groups: GroupService,
    request: DecodedRequest,
    handler: GroupApiHandler,
    refusal: ErrorCode | None,
) -> Response:
    """OffsetCommit or TxnOffsetCommit: every partition answered ``refusal`` if set, else
    the topics the principal may not READ answered TOPIC_AUTHORIZATION_FAILED."""
    body: Any = request.body
    asked = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    if refusal is not None:
        values = {"throttle_time": 0, "topics": _partition_errors(asked, refusal)}
        return _encode(request, build_entity(_response_class(request), values))
    allowed = _topics_allowed(context, request, AclOperation.READ, (n for n, _ in asked))
    refused = _partition_errors([(n, i) for n, i in asked if n not in allowed], _TOPIC_DENIED)
    if not refused:
        return await _answer(groups, request, handler)
    kept = tuple(t for t in body.topics if t.name in allowed)
    if not kept:
        values = {"throttle_time": 0, "topics": refused}
        return _encode(request, build_entity(_response_class(request), values))
    answered = await _delegate(groups, request, handler, dataclasses.replace(body, topics=kept))
    return _encode(request, _with(answered, topics=[*answered.topics, *refused]))


async def _offset_commit(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    allowed = _group_allowed(context, request, AclOperation.READ, body.group_id)
    return await _commit(context, groups, request, handler, None if allowed else _GROUP_DENIED)


async def _txn_offset_commit(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    refusal = None
    if not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        refusal = ErrorCode.transactional_id_authorization_failed
    elif not _group_allowed(context, request, AclOperation.READ, body.group_id):
        refusal = _GROUP_DENIED
    return await _commit(context, groups, request, handler, refusal)


_NO_OFFSET = {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}


def _fetch_topics(
    context: BrokerContext, request: DecodedRequest, topics: Any
) -> tuple[Any, list[dict[str, Any]], Callable[[Any], bool]]:
    """What an OffsetFetch of ``topics`` (None: all) may ask the coordinator, the
    refused topics' answers, and which answered topics to keep."""
    if topics is None:
        allowed_answer = set[str]()

        def keep(topic: Any) -> bool:
            if topic.name not in allowed_answer and authorize(
                context,
                request,
                AclOperation.DESCRIBE,
                ResourceType.TOPIC,
                topic.name,
                log_if_denied=False,
            ):
                allowed_answer.add(topic.name)
            return topic.name in allowed_answer

        return None, [], keep
    allowed = _topics_allowed(context, request, AclOperation.DESCRIBE, (t.name for t in topics))
    refused = _partition_errors(
        [(t.name, t.partition_indexes) for t in topics if t.name not in allowed],
        _TOPIC_DENIED,
        **_NO_OFFSET,
    )
    return tuple(t for t in topics if t.name in allowed), refused, lambda _topic: True


async def _offset_fetch(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    if not hasattr(body, "groups"):
        if not _group_allowed(context, request, AclOperation.DESCRIBE, body.group_id):
            if request.api_version >= _OFFSET_FETCH_TOP_LEVEL_ERROR_VERSION:
                return refuse_whole(request, _GROUP_DENIED)
            # v1 has no request-level error: every partition asked for carries it.
            asked = [(t.name, t.partition_indexes) for t in body.topics or ()]
            topics = _partition_errors(asked, _GROUP_DENIED, **_NO_OFFSET)
            response = build_entity(
                _response_class(request), {"throttle_time": 0, "topics": topics}
            )
            return _encode(request, response)
        kept, refused, keep = _fetch_topics(context, request, body.topics)
        answered = await _delegate(groups, request, handler, dataclasses.replace(body, topics=kept))
        topics = [*(t for t in answered.topics if keep(t)), *refused]
        return _encode(request, _with(answered, topics=topics))
    allowed_groups = []
    refused_by_group: dict[str, list[dict[str, Any]]] = {}
    keep_by_group: dict[str, Callable[[Any], bool]] = {}
    denied_groups = []
    for group in body.groups:
        if not _group_allowed(context, request, AclOperation.DESCRIBE, group.group_id):
            denied_groups.append(
                {"group_id": group.group_id, "topics": [], "error_code": _GROUP_DENIED}
            )
            continue
        kept, refused, keep = _fetch_topics(context, request, group.topics)
        allowed_groups.append(dataclasses.replace(group, topics=kept))
        refused_by_group[group.group_id] = refused
        keep_by_group[group.group_id] = keep
    answered_groups: list[Any] = []
    answered = None
    if allowed_groups:
        answered = await _delegate(
            groups, request, handler, dataclasses.replace(body, groups=tuple(allowed_groups))
        )
        answered_groups = [
            _with(
                g,
                topics=[
                    *(t for t in g.topics if keep_by_group.get(g.group_id, bool)(t)),
                    *refused_by_group.get(g.group_id, ()),
                ],
            )
            for g in answered.groups
        ]
    values = {"groups": [*answered_groups, *denied_groups]}
    if answered is None:
        response = build_entity(_response_class(request), {"throttle_time": 0, **values})
    else:
        response = _with(answered, **values)
    return _encode(request, response)


async def _per_group(
    context: BrokerContext,
    groups: GroupService,
    request: DecodedRequest,
    handler: GroupApiHandler,
    operation: AclOperation,
    ids_field: str,
    results_field: str,
    denied_entry: Callable[[str], dict[str, Any]],
) -> Response:
    """A request naming groups in ``ids_field`` whose answer lists one entry per group
    in ``results_field``: the groups refused get ``denied_entry``."""
    body: Any = request.body
    ids = list(getattr(body, ids_field))
    allowed = [g for g in ids if _group_allowed(context, request, operation, g)]
    denied = [denied_entry(g) for g in ids if g not in allowed]
    if not denied:
        return await _answer(groups, request, handler)
    if not allowed:
        values = {"throttle_time": 0, results_field: denied}
        return _encode(request, build_entity(_response_class(request), values))
    answered = await _delegate(
        groups, request, handler, dataclasses.replace(body, **{ids_field: tuple(allowed)})
    )
    results = [*getattr(answered, results_field), *denied]
    return _encode(request, _with(answered, **{results_field: results}))


async def _describe_groups(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    def denied(group_id: str) -> dict[str, Any]:
        return {
            "error_code": _GROUP_DENIED,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }

    return await _per_group(
        context, groups, request, handler, AclOperation.DESCRIBE, "groups", "groups", denied
    )


async def _consumer_group_describe(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    def denied(group_id: str) -> dict[str, Any]:
        return {
            "error_code": _GROUP_DENIED,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
        }

    return await _per_group(
        context, groups, request, handler, AclOperation.DESCRIBE, "group_ids", "groups", denied
    )


async def _delete_groups(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    def denied(group_id: str) -> dict[str, Any]:
        return {"group_id": group_id, "error_code": _GROUP_DENIED}

    return await _per_group(
        context, groups, request, handler, AclOperation.DELETE, "groups_names", "results", denied
    )


async def _list_groups(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    if authorize_cluster(context, request, AclOperation.DESCRIBE, log_if_denied=False):
        return await _answer(groups, request, handler)
    answered = await _delegate(groups, request, handler, request.body)
    listed = [
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
    ]
    return _encode(request, _with(answered, groups=listed))


async def _offset_delete(
    context: BrokerContext, groups: GroupService, request: DecodedRequest, handler: GroupApiHandler
) -> Response:
    body: Any = request.body
    if not _group_allowed(context, request, AclOperation.DELETE, body.group_id):
        return refuse_whole(request, _GROUP_DENIED)
    asked = [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
    allowed = _topics_allowed(context, request, AclOperation.READ, (n for n, _ in asked))
    refused = _partition_errors([(n, i) for n, i in asked if n not in allowed], _TOPIC_DENIED)
    if not refused:
        return await _answer(groups, request, handler)
    kept = tuple(t for t in body.topics if t.name in allowed)
    answered = await _delegate(groups, request, handler, dataclasses.replace(body, topics=kept))
    return _encode(request, _with(answered, topics=[*answered.topics, *refused]))


def _response_class(request: DecodedRequest) -> type[Any]:
    return response_schema(request.api_key, request.api_version)


def _encode(request: DecodedRequest, response: Any) -> bytes:
    return encode_response(request.correlation_id, response)


_RULES: Mapping[int, _Rule] = {
    **dict.fromkeys(_MEMBER_GROUP_APIS, _member_api),
    _CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    _OFFSET_COMMIT: _offset_commit,
    _TXN_OFFSET_COMMIT: _txn_offset_commit,
    _OFFSET_FETCH: _offset_fetch,
    _DESCRIBE_GROUPS: _describe_groups,
    _CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    _DELETE_GROUPS: _delete_groups,
    _LIST_GROUPS: _list_groups,
    _OFFSET_DELETE: _offset_delete,
}


def authorized_group_handler(api_key: int, handler: GroupApiHandler) -> AuthorizedHandler:
    """API ``api_key``'s handler behind its authorization rule (see the module docstring)."""
    rule = _RULES.get(api_key)
    if rule is None:
        raise RuntimeError(f"no authorization rule for group API {api_key}")

    async def authorized(
        context: BrokerContext, groups: GroupService, request: DecodedRequest
    ) -> Response:
        return await rule(context, groups, request, handler)

    return authorized
