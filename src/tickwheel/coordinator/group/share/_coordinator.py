"""``ShareGroupCoordinator``: share-group membership (ShareGroupHeartbeat, ShareGroupDescribe).

Kafka's share groups (KIP-932) as the group coordinator keeps them: members join,
stay and leave only through ``ShareGroupHeartbeat``; the coordinator assigns partitions
itself (``_assignor``, Kafka's ``simple`` assignor: every partition of a subscribed
topic to at least one member; several members share a partition when there are more
members than partitions). Share groups never revoke: a member's new assignment takes
effect at once, so its member epoch is the group epoch of its last assignment.

The heartbeat, as Kafka answers it:

- ``member_epoch`` 0 joins (``subscribed_topic_names`` required and non-empty, else
  INVALID_REQUEST; a group already at ``group.share.max.size`` members answers
  GROUP_MAX_SIZE_REACHED); -1 leaves; any other must be the member's current epoch
  (FENCED_MEMBER_EPOCH otherwise; an unknown member gets UNKNOWN_MEMBER_ID).
- The group epoch moves when a member joins or leaves, a subscription changes, or a
  subscribed topic appears, disappears or grows; then every member's assignment is
  computed again, and each member hears its own with its next heartbeat (the response
  carries ``assignment`` only when it changed, or on joining).
- An empty or blank group id or member id is INVALID_REQUEST; a group id that is a
  classic group's is GROUP_ID_NOT_FOUND ("not a share group"): group ids share one
  namespace. A group whose ``__consumer_offsets`` partition this broker does not lead
  (``coordinator_error``) gets NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while
  it loads, as the classic groups do.

The heartbeat and the describe take and build kio's ShareGroupHeartbeat and
ShareGroupDescribe v1 entities (the newest; the broker converts them to the version
sent).

Sessions: each member has one task on the broker's timing wheel, due
``group.share.session.timeout.ms`` (or the group config ``share.session.timeout.ms``)
after its last heartbeat; each heartbeat cancels it and adds a fresh one, both O(1). A
task that fires removes the member as if it had left. Every removal tells
``member_left`` (the share-partition manager releases the records the member held, and
closes its share session if it timed out: a member that leaves closes its own with a
final ShareAcknowledge, which may reach the broker after its leave heartbeat).

Groups live in memory on this broker: a share group's membership is rebuilt from its
members' heartbeats after a restart, as the members rejoin (Kafka keeps it in
``__consumer_offsets``; the records' delivery state, which is what must survive, is the
share-partitions' and is written through the persister).

Concurrency: the broker's event loop only; session tasks run there too.
"""

from __future__ import annotations

import datetime
import enum
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.response import ListedGroup
from kio.schema.share_group_describe.v1 import response as describe_v1
from kio.schema.share_group_describe.v1.response import DescribedGroup
from kio.schema.share_group_heartbeat.v1 import response as heartbeat_v1
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta

from tickwheel.coordinator.group.share._assignor import assign
from tickwheel.coordinator.group.share._config import ShareGroupConfig
from tickwheel.protocol import NO_THROTTLE
from tickwheel.timer import SystemTimer, TimerTask

_log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"
SIMPLE_ASSIGNOR = "simple"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"


class ShareGroupState(enum.Enum):
    """A share group's state, as ListGroups and ShareGroupDescribe name it."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    """One member: its epoch, subscription, assignment and session task."""

    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: frozenset[str]
    member_epoch: int = 0
    assignment: dict[str, list[int]] = field(default_factory=dict)
    session: TimerTask | None = None


@dataclass(slots=True)
class ShareGroup:
    """A share group: its members, group epoch and the topic metadata it assigned from."""

    group_id: str
    group_epoch: int = 0
    # The group epoch the members' assignments were last computed at.
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # Topic name -> partition count the current assignment was computed from.
    assigned_metadata: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        """Empty without members, Stable with (share groups never rebalance)."""
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


class ShareGroupCoordinator:
    """Share groups by id, their members' sessions on the timing wheel, and assignment."""

    def __init__(
        self,
        config: ShareGroupConfig,
        timer: SystemTimer,
        *,
        topic_id: Callable[[str], uuid.UUID | None],
        partition_count: Callable[[str], int],
        member_left: Callable[[str, str, bool], None] = lambda group_id, member_id, expired: None,
        classic_group_exists: Callable[[str], bool] = lambda group_id: False,
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
        coordinator_error: Callable[[str], ErrorCode | None] = lambda group_id: None,
    ) -> None:
        self.config = config
        self._timer = timer
        self._topic_id = topic_id
        self._partition_count = partition_count
        self._member_left = member_left
        self._classic_group_exists = classic_group_exists
        self._group_configs = group_configs
        self._coordinator_error = coordinator_error
        self.groups: dict[str, ShareGroup] = {}

    # -- ShareGroupHeartbeat ----------------------------------------------------------

    def heartbeat(
        self, request: ShareGroupHeartbeatRequest, *, client_id: str = "", client_host: str = ""
    ) -> ShareGroupHeartbeatResponse:
        """Answer a heartbeat that client ``client_id`` at ``client_host`` sent."""
        interval_ms = self._group_setting(
            request.group_id,
            SHARE_HEARTBEAT_INTERVAL_MS,
            self.config.group_share_heartbeat_interval_ms,
            self.config.group_share_min_heartbeat_interval_ms,
            self.config.group_share_max_heartbeat_interval_ms,
        )
        base = ShareGroupHeartbeatResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval=i32Timedelta.parse(datetime.timedelta(milliseconds=interval_ms)),
        )
        error = self._validate(request)
        if error is not None:
            code, message = error
            return replace(base, error_code=code, error_message=message)
        group = self.groups.get(request.group_id)
        if request.member_epoch == LEAVE_EPOCH:
            if group is not None and request.member_id in group.members:
                self._remove_member(group, request.member_id, "left the group")
            return replace(base, member_epoch=i32(LEAVE_EPOCH))
        if group is None:
            group = self.groups.setdefault(request.group_id, ShareGroup(request.group_id))
        member = group.members.get(request.member_id)
        joined = False
        if request.member_epoch == JOIN_EPOCH:
            if member is None:
                if len(group.members) >= self.config.group_share_max_size:
                    return replace(
                        base,
                        error_code=ErrorCode.group_max_size_reached,
                        error_message=f"share group {group.group_id} is full",
                    )
                member = ShareMember(
                    request.member_id,
                    client_id,
                    client_host,
                    request.rack_id,
                    frozenset(request.subscribed_topic_names or ()),
                )
                group.members[member.member_id] = member
                group.group_epoch += 1
                _log.info("member %s joined share group %s", member.member_id, group.group_id)
            joined = True
        elif member is None:
            return replace(
                base,
                error_code=ErrorCode.unknown_member_id,
                error_message=f"member {request.member_id} is not in share group "
                f"{request.group_id}",
            )
        elif request.member_epoch != member.member_epoch:
            return replace(
                base,
                error_code=ErrorCode.fenced_member_epoch,
                error_message=f"member epoch {request.member_epoch} is not {member.member_epoch}",
            )
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed_topic_names is not None:
            subscription = frozenset(request.subscribed_topic_names)
            if subscription != member.subscribed_topic_names:
                member.subscribed_topic_names = subscription
                group.group_epoch += 1
        self._maybe_reassign(group)
        self._reset_session(group, member)
        changed = joined or member.member_epoch != group.group_epoch
        member.member_epoch = group.group_epoch
        return replace(
            base,
            member_epoch=i32(member.member_epoch),
            assignment=self._wire_assignment(member) if changed else None,
        )

    def _validate(self, request: ShareGroupHeartbeatRequest) -> tuple[ErrorCode, str] | None:
        """Kafka's checks of a heartbeat before it reaches the group, in its order."""
        group_id = request.group_id
        not_here = self._coordinator_error(group_id) if group_id.strip() else None
        checks = (
            (not group_id.strip(), ErrorCode.invalid_request, "GroupId can't be empty."),
            (not request.member_id.strip(), ErrorCode.invalid_request, "MemberId can't be empty."),
            (
                not_here is not None,
                not_here or ErrorCode.none,
                f"this broker does not coordinate group {group_id}",
            ),
            (
                request.member_epoch < LEAVE_EPOCH,
                ErrorCode.invalid_request,
                f"MemberEpoch is invalid: {request.member_epoch}",
            ),
            (
                request.member_epoch == JOIN_EPOCH and not request.subscribed_topic_names,
                ErrorCode.invalid_request,
                "SubscribedTopicNames must be set in first request.",
            ),
            (
                group_id not in self.groups and self._classic_group_exists(group_id),
                ErrorCode.group_id_not_found,
                f"Group {group_id} is not a share group.",
            ),
        )
        return next(((code, message) for failed, code, message in checks if failed), None)

    def _maybe_reassign(self, group: ShareGroup) -> None:
        """Assign again if the group epoch moved or a subscribed topic changed."""
        topics = {t for m in group.members.values() for t in m.subscribed_topic_names}
        metadata = {topic: self._partition_count(topic) for topic in sorted(topics)}
        metadata = {topic: count for topic, count in metadata.items() if count > 0}
        if metadata != group.assigned_metadata:
            group.group_epoch += 1
        elif group.assignment_epoch == group.group_epoch:
            return
        group.assigned_metadata = metadata
        group.assignment_epoch = group.group_epoch
        subscriptions = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        for member_id, assignment in assign(subscriptions, metadata).items():
            group.members[member_id].assignment = {t: sorted(p) for t, p in assignment.items()}

    def _wire_assignment(self, member: ShareMember) -> heartbeat_v1.Assignment:
        return heartbeat_v1.Assignment(
            topic_partitions=tuple(
                heartbeat_v1.TopicPartitions(
                    topic_id=topic_id, partitions=tuple(i32(p) for p in partitions)
                )
                for topic, partitions in sorted(member.assignment.items())
                if (topic_id := self._topic_id(topic)) is not None
            )
        )

    # -- sessions ---------------------------------------------------------------------

    def _reset_session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session is not None:
            member.session.cancel()
        timeout_ms = self._group_setting(
            group.group_id,
            SHARE_SESSION_TIMEOUT_MS,
            self.config.group_share_session_timeout_ms,
            self.config.group_share_min_session_timeout_ms,
            self.config.group_share_max_session_timeout_ms,
        )
        member.session = self._timer.schedule(
            timeout_ms, self._session_expired, group.group_id, member.member_id
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove_member(group, member_id, "session timed out", expired=True)

    def _remove_member(
        self, group: ShareGroup, member_id: str, reason: str, *, expired: bool = False
    ) -> None:
        member = group.members.pop(member_id)
        if member.session is not None:
            member.session.cancel()
        group.group_epoch += 1
        self._maybe_reassign(group)
        _log.info("member %s of share group %s removed: %s", member_id, group.group_id, reason)
        self._member_left(group.group_id, member_id, expired)

    def _group_setting(
        self, group_id: str, name: str, default: int, least: int, greatest: int
    ) -> int:
        """A group config override of ``name`` within its broker bounds, else ``default``."""
        raw = self._group_configs(group_id).get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            return default
        return value if least <= value <= greatest else default

    # -- ShareGroupDescribe, ListGroups -----------------------------------------------

    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """Each named group as ShareGroupDescribe answers it."""
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            not_here = self._coordinator_error(group_id)
            if group is None or not_here is not None:
                described.append(
                    DescribedGroup(
                        error_code=not_here or ErrorCode.group_id_not_found,
                        error_message=f"Group {group_id} not found.",
                        group_id=GroupId(group_id),
                        group_state=ShareGroupState.DEAD.value,
                        group_epoch=i32(-1),
                        assignment_epoch=i32(-1),
                        assignor_name="",
                        members=(),
                    )
                )
                continue
            described.append(
                DescribedGroup(
                    error_code=ErrorCode.none,
                    group_id=GroupId(group_id),
                    group_state=group.state.value,
                    group_epoch=i32(group.group_epoch),
                    assignment_epoch=i32(group.assignment_epoch),
                    assignor_name=SIMPLE_ASSIGNOR,
                    members=tuple(self._describe_member(m) for m in group.members.values()),
                )
            )
        return described

    def _describe_member(self, member: ShareMember) -> describe_v1.Member:
        topic_partitions = tuple(
            describe_v1.TopicPartitions(
                topic_id=topic_id,
                topic_name=TopicName(topic),
                partitions=tuple(i32(p) for p in partitions),
            )
            for topic, partitions in sorted(member.assignment.items())
            if (topic_id := self._topic_id(topic)) is not None
        )
        return describe_v1.Member(
            member_id=member.member_id,
            rack_id=member.rack_id,
            member_epoch=i32(member.member_epoch),
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(
                TopicName(t) for t in sorted(member.subscribed_topic_names)
            ),
            assignment=describe_v1.Assignment(topic_partitions=topic_partitions),
        )

    def list_groups(self, states: frozenset[str]) -> list[ListedGroup]:
        """The share groups as ListGroups shows them, filtered by state (case-insensitive)."""
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(
                group_id=GroupId(group.group_id),
                protocol_type=SHARE_PROTOCOL_TYPE,
                group_state=group.state.value,
                group_type=SHARE_GROUP_TYPE,
            )
            for group in self.groups.values()
            if not wanted or group.state.value.lower() in wanted
        ]

    def is_share_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group's id."""
        return group_id in self.groups

    def delete_group(self, group_id: str) -> None:
        """Forget ``group_id`` (DeleteGroups of an empty share group)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member in group.members.values():
                if member.session is not None:
                    member.session.cancel()

    def shutdown(self) -> None:
        """Cancel every member's session task."""
        for group in self.groups.values():
            for member in group.members.values():
                if member.session is not None:
                    member.session.cancel()
