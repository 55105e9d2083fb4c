"""The share-group APIs (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
ShareAcknowledge.

=====================  ===  ========  ==================================================
API                    key  versions  answered by
=====================  ===  ========  ==================================================
ShareGroupHeartbeat    76   1         ``ShareGroupCoordinator`` (membership, assignment)
ShareGroupDescribe     77   1         ``ShareGroupCoordinator``
ShareFetch             78   1-2       ``ShareSessionCache`` + ``SharePartitionManager``
ShareAcknowledge       79   1-2       ``ShareSessionCache`` + ``SharePartitionManager``
=====================  ===  ========  ==================================================

``start_share`` builds both services at broker start-up, on the broker's timers: the
share-partition manager, which keeps its state through the share coordinator's durable
persister (``__share_group_state``, ``tickwheel.coordinator.share_state``), and the
share-group coordinator, whose members' departures release their records (and close
the share session of one that timed out). Both read the group configs
(``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ...) at each use.
The manager listens to the replica manager's high-watermark moves to wake its ShareFetch
purgatory.

A ShareFetch first applies the acknowledgements it carries, then acquires from every
share-partition of its session (waiting up to ``max_wait`` when there is nothing); at
the final epoch it only acknowledges, then closes the session and releases what the
member still holds; one that only renews locks (v2 ``is_renew_ack``) acquires nothing.
Records go out as the log stores them, with ``acquired_records`` saying which offsets
the member holds and their delivery counts. Share sessions and share-partitions are
kept by every broker for the partitions it leads; share-group membership by the group's
coordinator (the leader of its ``__consumer_offsets`` partition; any other broker
answers NOT_COORDINATOR).
The group coordinator is told of share groups through hooks: ListGroups lists them
(type ``share``), a JoinGroup or a consumer-protocol heartbeat for a share group's id is
refused, and DeleteGroups of one goes to the share-group admin (``_share_admin``), which
deletes its state too.

Each handler reads its request as the newest version's kio class (ShareGroupHeartbeat
v1, ShareGroupDescribe v1, ShareFetch v2, ShareAcknowledge v2; a v1 ShareFetch reads
``is_renew_ack`` false) and builds that version's response, which ``reply`` converts to
the version the client sent.

Authorization (Kafka's): ShareGroupHeartbeat needs READ on the group and DESCRIBE on
the subscribed topics, ShareGroupDescribe DESCRIBE on each group, ShareFetch and
ShareAcknowledge READ on the group (else the whole request GROUP_AUTHORIZATION_FAILED)
and READ on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED, left out of the
session and of the acknowledgements).

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import datetime
import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v2 import response as acknowledge_v2
from kio.schema.share_acknowledge.v2.request import ShareAcknowledgeRequest
from kio.schema.share_acknowledge.v2.response import ShareAcknowledgeResponse
from kio.schema.share_fetch.v2 import response as fetch_v2
from kio.schema.share_fetch.v2.request import ShareFetchRequest
from kio.schema.share_fetch.v2.response import ShareFetchResponse
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_describe.v1.response import (
    DescribedGroup,
    ShareGroupDescribeResponse,
)
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

from tickwheel.coordinator.group import GroupService
from tickwheel.coordinator.group.share import (
    ShareGroupAdmin,
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupTopology,
)
from tickwheel.coordinator.share_state import ShareCoordinatorService
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorized_names
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import (
    ApiSpec,
    Response,
    refuse_whole,
    reply,
    to_ms,
)
from tickwheel.server.net._connection_id import current_connection_id
from tickwheel.share_delivery import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    AcknowledgementBatch,
    ShareConfig,
    ShareFetchPartitionResult,
    SharePartitionKey,
    SharePartitionManager,
    ShareSessionError,
)

_NO_LEADER = -1


def group_coordinator_error(groups: GroupService, group_id: str) -> ErrorCode | None:
    """Why this broker cannot answer for share group ``group_id`` (None: it coordinates
    it, as the leader of the group's ``__consumer_offsets`` partition)."""
    owner = groups.coordinator.manager
    if owner.is_group_loading(group_id):
        return ErrorCode.coordinator_load_in_progress
    if not owner.is_group_local(group_id):
        return ErrorCode.not_coordinator
    return None


def start_share(
    context: BrokerState,
    broker_time: BrokerTime,
    groups: GroupService,
    share_coordinator: ShareCoordinatorService,
) -> tuple[ShareGroupCoordinator, SharePartitionManager, ShareGroupAdmin]:
    """This broker's share-group coordinator, share-partition manager and share-group
    admin, hooked into ``groups``."""
    properties = context.config.as_properties()
    manager = SharePartitionManager(
        ShareConfig.from_properties(properties),
        context.replica_manager,
        share_coordinator.persister,
        timers=broker_time.timers,
        topic_name=context.topic_name,
        group_configs=context.group_configs.overrides_of,
        broker_id=context.broker_id,
        clock_ms=broker_time.wall_clock_ms,
    )
    context.replica_manager.high_watermark_listener = manager.on_high_watermark

    def partition_count(topic: str) -> int:
        info = context.topics.topics.get(topic)
        return 0 if info is None else info.num_partitions

    def other_group_exists(group_id: str) -> bool:
        """A classic or consumer group has this id (one namespace for every protocol)."""
        classic = groups.coordinator.manager.get_group(group_id)
        return classic is not None or groups.consumer_groups.has_group(group_id)

    coordinator = ShareGroupCoordinator(
        ShareGroupConfig.from_properties(properties),
        broker_time.timers.new_timer("ShareGroupHeartbeat"),
        topic_id=context.topic_id,
        partition_count=partition_count,
        member_left=manager.member_left,
        classic_group_exists=other_group_exists,
        group_configs=context.group_configs.overrides_of,
        coordinator_error=functools.partial(group_coordinator_error, groups),
    )

    def high_watermark(topic: str, partition: int) -> int | None:
        replica = context.replica_manager.get_partition(TopicPartition(topic, partition))
        return replica.log.high_watermark if replica is not None and replica.is_leader else None

    admin = ShareGroupAdmin(
        coordinator,
        share_coordinator.persister,
        ShareGroupTopology(
            topic_id=context.topic_id,
            topic_name=context.topic_name,
            partition_count=partition_count,
            high_watermark=high_watermark,
        ),
        stored_keys=share_coordinator.coordinator.keys_of_group,
        forget=manager.forget,
        other_group_exists=other_group_exists,
    )
    groups.coordinator.share_group_exists = admin.is_share_group
    groups.consumer_groups.share_group_exists = admin.is_share_group
    groups.apis.other_groups = coordinator.list_groups
    groups.apis.is_other_group = admin.is_share_group
    groups.apis.delete_other_group = admin.delete_group
    return coordinator, manager, admin


# -- ShareGroupHeartbeat, ShareGroupDescribe ------------------------------------------


async def handle_share_group_heartbeat(context: BrokerContext, request: DecodedRequest) -> Response:
    """Join, stay in or leave a share group; the member's assignment when it changed."""
    body = request.body_as(ShareGroupHeartbeatRequest)
    if context.authorizer is not None:
        names = body.subscribed_topic_names or ()
        refusal = _heartbeat_refusal(context, request, body.group_id, names)
        if refusal is not None:
            return refuse_whole(request, refusal)
    answer = context.share_groups.heartbeat(body, client_id=request.header.client_id or "")
    return reply(request, answer)


def _heartbeat_refusal(
    context: BrokerContext, request: DecodedRequest, group_id: str, names: Sequence[str]
) -> ErrorCode | None:
    """READ on the group, DESCRIBE on every subscribed topic (Kafka's rule)."""
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if set(names) - allowed:
        return ErrorCode.topic_authorization_failed
    return None


async def handle_share_group_describe(context: BrokerContext, request: DecodedRequest) -> Response:
    """Each named share group: state, epochs, assignor and members (DESCRIBE on each
    group, else GROUP_AUTHORIZATION_FAILED)."""
    body = request.body_as(ShareGroupDescribeRequest)
    ids = body.group_ids
    allowed = authorized_names(context, request, AclOperation.DESCRIBE, ResourceType.GROUP, ids)
    groups = context.share_groups.describe([g for g in ids if g in allowed])
    groups += [
        DescribedGroup(
            error_code=ErrorCode.group_authorization_failed,
            error_message="Authorization failed.",
            group_id=group_id,
            group_state="",
            group_epoch=i32(0),
            assignment_epoch=i32(0),
            assignor_name="",
            members=(),
        )
        for group_id in ids
        if group_id not in allowed
    ]
    return reply(
        request, ShareGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))
    )


# -- ShareFetch, ShareAcknowledge ------------------------------------------------------


class _SentBatch(Protocol):
    """An acknowledgement batch as ShareFetch and ShareAcknowledge both carry it."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


class _SentPartition(Protocol):
    """A partition of ShareFetch's or ShareAcknowledge's topics."""

    @property
    def partition_index(self) -> int: ...
    @property
    def acknowledgement_batches(self) -> Sequence[_SentBatch]: ...


class _SentTopic(Protocol):
    """A topic of ShareFetch's or ShareAcknowledge's request."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[_SentPartition]: ...


SentTopic = TypeVar("SentTopic", bound=_SentTopic)
Entry = TypeVar("Entry")


def _readable_topics(
    context: BrokerContext, request: DecodedRequest, group_id: str, topics: Sequence[SentTopic]
) -> tuple[list[SentTopic], list[SharePartitionKey]]:
    """The topics of a ShareFetch/ShareAcknowledge the principal may READ, and the
    share-partitions of those it may not (answered TOPIC_AUTHORIZATION_FAILED)."""
    if context.authorizer is None:
        return list(topics), []
    names = {t.topic_id: context.topic_name(t.topic_id or uuid.UUID(int=0)) for t in topics}
    allowed = authorized_names(
        context,
        request,
        AclOperation.READ,
        ResourceType.TOPIC,
        (name for name in names.values() if name is not None),
    )
    kept = [t for t in topics if names[t.topic_id] is None or names[t.topic_id] in allowed]
    refused = [
        _key(group_id, t.topic_id, p.partition_index)
        for t in topics
        if t not in kept
        for p in t.partitions
    ]
    return kept, refused


def _acknowledgements(
    group_id: str, topics: Sequence[_SentTopic]
) -> dict[SharePartitionKey, list[AcknowledgementBatch]]:
    acks: dict[SharePartitionKey, list[AcknowledgementBatch]] = {}
    for topic in topics:
        for p in topic.partitions:
            if p.acknowledgement_batches:
                acks[_key(group_id, topic.topic_id, p.partition_index)] = [
                    AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                    for b in p.acknowledgement_batches
                ]
    return acks


def _key(group_id: str, topic_id: uuid.UUID | None, partition: int) -> SharePartitionKey:
    return SharePartitionKey(group_id, topic_id or uuid.UUID(int=0), partition)


def _leader(context: BrokerContext, key: SharePartitionKey) -> tuple[i32, i32]:
    """The leader id and epoch of the share-partition's topic partition (-1, -1: none)."""
    name = context.topic_name(key.topic_id)
    partition = (
        None
        if name is None
        else context.replica_manager.get_partition(TopicPartition(name, key.partition))
    )
    if partition is None:
        return i32(_NO_LEADER), i32(-1)
    return i32(partition.leader_id), i32(partition.leader_epoch)


def _by_topic(entries: Mapping[SharePartitionKey, Entry]) -> dict[uuid.UUID, tuple[Entry, ...]]:
    topics: dict[uuid.UUID, list[Entry]] = {}
    for key, entry in entries.items():
        topics.setdefault(key.topic_id, []).append(entry)
    return {topic_id: tuple(parts) for topic_id, parts in topics.items()}


def _lock_timeout(lock_ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=lock_ms))


def _fetch_reply(
    request: DecodedRequest,
    error: ErrorCode,
    lock_ms: int,
    responses: tuple[fetch_v2.ShareFetchableTopicResponse, ...] = (),
) -> bytes:
    """A ShareFetch response (no partitions: a request-level error)."""
    return reply(
        request,
        ShareFetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            acquisition_lock_timeout=_lock_timeout(lock_ms),
            responses=responses,
            node_endpoints=(),
        ),
    )


def _acknowledge_reply(
    request: DecodedRequest,
    error: ErrorCode,
    lock_ms: int,
    responses: tuple[acknowledge_v2.ShareAcknowledgeTopicResponse, ...] = (),
) -> bytes:
    """A ShareAcknowledge response (no partitions: a request-level error)."""
    return reply(
        request,
        ShareAcknowledgeResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            acquisition_lock_timeout=_lock_timeout(lock_ms),
            responses=responses,
            node_endpoints=(),
        ),
    )


def _fetched_partition(
    context: BrokerContext,
    key: SharePartitionKey,
    result: ShareFetchPartitionResult,
    ack_error: ErrorCode,
) -> fetch_v2.PartitionData:
    leader_id, leader_epoch = _leader(context, key)
    return fetch_v2.PartitionData(
        partition_index=i32(key.partition),
        error_code=result.error_code,
        acknowledge_error_code=i16(ack_error.value),
        current_leader=fetch_v2.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
        records=Records(result.records or b""),
        acquired_records=tuple(
            fetch_v2.AcquiredRecords(
                first_offset=i64(a.first_offset),
                last_offset=i64(a.last_offset),
                delivery_count=i16(a.delivery_count),
            )
            for a in result.acquired
        ),
    )


async def handle_share_fetch(context: BrokerContext, request: DecodedRequest) -> Response:
    """Acknowledge, then acquire records for the member from its session's partitions."""
    body = request.body_as(ShareFetchRequest)
    manager = context.share_partitions
    group_id, member_id = body.group_id or "", body.member_id or ""
    lock_ms = manager.lock_duration_ms(group_id)
    if not group_id or not member_id:
        return _fetch_reply(request, ErrorCode.invalid_request, lock_ms)
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, group_id):
        return _fetch_reply(request, ErrorCode.group_authorization_failed, lock_ms)
    topics, refused = _readable_topics(context, request, group_id, body.topics)
    epoch = body.share_session_epoch
    acks = _acknowledgements(group_id, topics)
    try:
        session = manager.sessions.for_fetch(
            group_id,
            member_id,
            epoch,
            [
                (t.topic_id or uuid.UUID(int=0), p.partition_index)
                for t in topics
                for p in t.partitions
            ],
            [
                (t.topic_id or uuid.UUID(int=0), p)
                for t in body.forgotten_topics_data
                for p in t.partitions
            ],
            acknowledging=bool(acks),
            connection_id=current_connection_id(),
        )
    except ShareSessionError as exc:
        return _fetch_reply(request, exc.error_code, lock_ms)
    # Read before the first await: the session may be closed or replaced meanwhile.
    session_partitions = list(session.partitions)
    ack_errors = await manager.acknowledge(group_id, member_id, acks) if acks else {}
    fetched: dict[SharePartitionKey, ShareFetchPartitionResult] = {}
    if epoch == FINAL_EPOCH:
        manager.sessions.remove(group_id, member_id)
        await manager.release_member(group_id, member_id)
    elif not body.is_renew_ack:
        keys = [_key(group_id, tid, p) for tid, p in session_partitions]
        fetched = await manager.fetch(
            group_id,
            member_id,
            keys,
            max_wait_ms=to_ms(body.max_wait),
            max_records=body.max_records,
            max_bytes=body.max_bytes,
        )
    entries: dict[SharePartitionKey, fetch_v2.PartitionData] = {}
    for key in [*fetched, *(k for k in ack_errors if k not in fetched)]:
        result = fetched.get(key, ShareFetchPartitionResult())
        if (
            epoch != INITIAL_EPOCH
            and key not in ack_errors
            and not result.acquired
            and result.error_code == ErrorCode.none
        ):
            continue  # an incremental response leaves out partitions with nothing new
        entries[key] = _fetched_partition(context, key, result, ack_errors.get(key, ErrorCode.none))
    for key in refused:
        entries[key] = fetch_v2.PartitionData(
            partition_index=i32(key.partition),
            error_code=ErrorCode.topic_authorization_failed,
            acknowledge_error_code=i16(ErrorCode.none.value),
            current_leader=fetch_v2.LeaderIdAndEpoch(
                leader_id=i32(_NO_LEADER), leader_epoch=i32(-1)
            ),
            records=Records(b""),
            acquired_records=(),
        )
    responses = tuple(
        fetch_v2.ShareFetchableTopicResponse(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in _by_topic(entries).items()
    )
    return _fetch_reply(request, ErrorCode.none, lock_ms, responses)


async def handle_share_acknowledge(context: BrokerContext, request: DecodedRequest) -> Response:
    """Apply the member's acknowledgements; at the final epoch, close its session."""
    body = request.body_as(ShareAcknowledgeRequest)
    manager = context.share_partitions
    group_id, member_id = body.group_id or "", body.member_id or ""
    lock_ms = manager.lock_duration_ms(group_id)
    if not group_id or not member_id:
        return _acknowledge_reply(request, ErrorCode.invalid_request, lock_ms)
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, group_id):
        return _acknowledge_reply(request, ErrorCode.group_authorization_failed, lock_ms)
    topics, refused = _readable_topics(context, request, group_id, body.topics)
    epoch = body.share_session_epoch
    try:
        manager.sessions.for_acknowledge(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return _acknowledge_reply(request, exc.error_code, lock_ms)
    errors = await manager.acknowledge(group_id, member_id, _acknowledgements(group_id, topics))
    errors.update(dict.fromkeys(refused, ErrorCode.topic_authorization_failed))
    if epoch == FINAL_EPOCH:
        manager.sessions.remove(group_id, member_id)
        await manager.release_member(group_id, member_id)
    entries: dict[SharePartitionKey, acknowledge_v2.PartitionData] = {}
    for key, error in errors.items():
        leader_id, leader_epoch = _leader(context, key)
        entries[key] = acknowledge_v2.PartitionData(
            partition_index=i32(key.partition),
            error_code=error,
            current_leader=acknowledge_v2.LeaderIdAndEpoch(
                leader_id=leader_id, leader_epoch=leader_epoch
            ),
        )
    responses = tuple(
        acknowledge_v2.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=partitions)
        for topic_id, partitions in _by_topic(entries).items()
    )
    return _acknowledge_reply(request, ErrorCode.none, lock_ms, responses)


SHARE_SPECS: tuple[ApiSpec, ...] = (
    ApiSpec(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        "ShareGroupHeartbeat",
        VersionRange(1, 1),
        handle_share_group_heartbeat,
    ),
    ApiSpec(
        ApiKey.SHARE_GROUP_DESCRIBE,
        "ShareGroupDescribe",
        VersionRange(1, 1),
        handle_share_group_describe,
    ),
    ApiSpec(ApiKey.SHARE_FETCH, "ShareFetch", VersionRange(1, 2), handle_share_fetch),
    ApiSpec(
        ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", VersionRange(1, 2), handle_share_acknowledge
    ),
)
