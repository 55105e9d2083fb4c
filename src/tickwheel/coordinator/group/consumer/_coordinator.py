"""``ConsumerGroupCoordinator``: consumer-protocol groups (KIP-848), driven by heartbeats.

Kafka's GroupMetadataManager.consumerGroupHeartbeat, step by step, for one
ConsumerGroupHeartbeat:

1. Validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION), then find the group: a member joining (epoch 0) creates
   it. A group id is one namespace across the protocols: an *empty* classic group is
   taken over when ``group.consumer.migration.policy`` allows an upgrade (its group
   record gets a tombstone; its offsets stay); a classic group with members answers
   GROUP_ID_NOT_FOUND (Kafka's answer when it does not convert one).
2. Find or create the member: a new member gets an id (v0) or must bring its own (v1,
   KIP-1082: INVALID_REQUEST without one);
   a static member (``instance_id``) replaces the one that left with epoch -2 under the
   same instance id, taking over its epoch and partitions, and is refused
   (UNRELEASED_INSTANCE_ID) while that one is still active. A known member's epoch is
   checked: newer than the coordinator's, or older and not the previous one with a
   subset of its partitions, is FENCED_MEMBER_EPOCH.
3. Update its subscription; recompute the subscribed topics (names and a full match of
   the regex over the broker's non-internal topics, as ids and partition counts). The
   regex is RE2's, as Kafka's RE2/J: its matching time is linear in the topic name,
   whatever pattern a client sends (Python's ``re`` backtracks, and a pattern such as
   ``(a|a)*b`` would hold the event loop for seconds). A
   changed subscription, or changed topic metadata (a topic created, deleted or
   grown), bumps the group epoch.
4. If the group epoch is ahead of the target-assignment epoch, the assignor (the
   members' most requested ``server_assignor``, else the first of
   ``group.consumer.assignors``) computes a new target for every member.
5. Reconcile the member towards its target (``_reconciliation``): revocations first,
   then new partitions once nobody holds them.
6. Reset its session timer; answer its epoch, the heartbeat interval, and its
   assignment when it joined, sent a full request, or its partitions changed.

Every change is written to ``__consumer_offsets`` as Kafka's records (``_records``) in
one batch, and the heartbeat is answered once that batch is appended (an append error
is answered as the offset commits' are: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
``replay`` rebuilds the groups of a partition from those records (``_replay``) when this
broker starts leading it; ``unload`` forgets them when it stops.

Timers, on the coordinator's timing wheel (``SystemTimer``; the broker's ``LoopTimers``):
each member has a session task, re-armed by each heartbeat for
``group.consumer.session.timeout.ms`` and cancelled when it leaves; a member in
UNREVOKED_PARTITIONS has a rebalance task for its rebalance timeout, cancelled once it
acknowledges the revocation. When either fires the member is fenced: removed, the group
epoch bumped, and its partitions go to the others on their next heartbeats. A static
member that left with epoch -2 keeps its place (and its partitions) until its session
task fires. After a replay every member gets a fresh session task, as Kafka does.

Leaving (epoch -1) removes the member at once and bumps the group epoch.

Offsets of a consumer group live beside the classic groups' in the offsets manager
(``GroupMetadataManager``); ``validate_offset_commit`` and ``validate_offset_fetch``
answer Kafka's member-epoch checks before the manager stores or reads them.

Concurrency contract: every public method takes the coordinator's one lock (re-entrant),
and the timers' expirations take it too. Records are appended to ``__consumer_offsets``
under it, so they reach the log in the order of the changes they describe; an append's
completion and a heartbeat's answer take no lock (the answer resolves a future), so an
append that completes at once, under the lock, is safe. No other lock is ever held when
this one is taken: the offsets manager's locks (its map lock; a classic group's lock,
in the callback of another request's append that this one completes) are only ever
taken inside it. The broker runs all of this on its event-loop thread.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import re2
from kio.schema.errors import ErrorCode

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator.group._config import GroupConfig
from tickwheel.coordinator.group._group import GroupMetadata, GroupState
from tickwheel.coordinator.group._manager import GroupMetadataManager, client_error
from tickwheel.coordinator.group._offsets_log import OffsetsLog
from tickwheel.coordinator.group._records import (
    GroupKey,
    OtherRecord,
    encode_group_key,
)
from tickwheel.coordinator.group.consumer._assignors import ASSIGNORS, MemberSpec
from tickwheel.coordinator.group.consumer._group import (
    ConsumerGroup,
    ConsumerGroupState,
    TopicMetadata,
)
from tickwheel.coordinator.group.consumer._member import (
    EMPTY_ASSIGNMENT,
    JOIN_MEMBER_EPOCH,
    LEAVE_MEMBER_EPOCH,
    LEAVE_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    is_subset,
)
from tickwheel.coordinator.group.consumer._reconciliation import UnknownMemberStateError, reconcile
from tickwheel.coordinator.group.consumer._records import (
    Entry,
    current_assignment_record,
    group_epoch_record,
    group_tombstones,
    member_metadata_record,
    member_tombstones,
    subscription_metadata_record,
    target_epoch_record,
    target_member_record,
)
from tickwheel.coordinator.group.consumer._replay import rebuild_groups
from tickwheel.timer import SystemTimer, TimerTask

_log = logging.getLogger(__name__)

CONSUMER_GROUP_TYPE = "consumer"
"""The group type ListGroups shows for these groups."""
CONSUMER_PROTOCOL_TYPE = "consumer"
"""The protocol type DescribeGroups and ListGroups show for these groups."""
_INTERNAL_TOPIC_PREFIX = "__"
CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"


class TopicCatalog(Protocol):
    """The broker's topics as the coordinator needs them (injected by the server)."""

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id, or None if there is no such topic."""

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with that id, or None."""

    def partition_count(self, name: str) -> int | None:
        """How many partitions the topic has, or None if there is no such topic."""

    def topic_names(self) -> Iterable[str]:
        """Every topic's name."""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, decoded (None: "unchanged", as on the wire)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    # From ConsumerGroupHeartbeat v1 the client names itself (KIP-1082), even to join.
    member_id_required: bool = True


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The answer to a ConsumerGroupHeartbeat."""

    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = LEAVE_MEMBER_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


HeartbeatCallback = Callable[[HeartbeatResult], None]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """A member as ConsumerGroupDescribe shows it."""

    member: ConsumerGroupMember
    target: Assignment


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """A group as ConsumerGroupDescribe shows it."""

    group_id: str
    error: ErrorCode
    state: str = ConsumerGroupState.DEAD.value
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


class _HeartbeatError(Exception):
    """Stops a heartbeat with a Kafka error code (and its message)."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(slots=True)
class _MemberTimers:
    session: TimerTask | None = None
    rebalance: TimerTask | None = None

    def cancel(self) -> None:
        for task in (self.session, self.rebalance):
            if task is not None:
                task.cancel()
        self.session = self.rebalance = None


class ConsumerGroupCoordinator:
    """Consumer-protocol groups of the partitions this broker coordinates."""

    def __init__(
        self,
        config: GroupConfig,
        manager: GroupMetadataManager,
        offsets_log: OffsetsLog,
        topics: TopicCatalog,
        *,
        timer: SystemTimer,
    ) -> None:
        self.config = config
        self._manager = manager
        self._offsets_log = offsets_log
        self._topics = topics
        self._timer = timer
        self._lock = threading.RLock()
        self._groups: dict[str, ConsumerGroup] = {}
        self._timers: dict[tuple[str, str], _MemberTimers] = {}
        # Whether a group id is a share group's (set by the broker): group ids are one
        # namespace across the protocols.
        self.share_group_exists: Callable[[str], bool] = lambda group_id: False
        # A group's config overrides (``consumer.session.timeout.ms``,
        # ``consumer.heartbeat.interval.ms``), set by the broker; already validated
        # against the group.consumer.* bounds when they were set.
        self.group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {}

    # --- queries used by the classic side ----------------------------------------------

    def has_group(self, group_id: str) -> bool:
        """True if ``group_id`` is a consumer-protocol group here."""
        with self._lock:
            return group_id in self._groups

    def group_state(self, group_id: str) -> ConsumerGroupState | None:
        """The group's state, or None if it is not a consumer-protocol group here."""
        with self._lock:
            group = self._groups.get(group_id)
            return None if group is None else group.state

    def subscribed_topics(self, group_id: str) -> frozenset[str] | None:
        """The topics the group's members subscribe to (by name or regex), or None if
        ``group_id`` is not a consumer-protocol group here."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            return group.subscribed_topic_names() | frozenset(group.subscription_metadata)

    def groups(self) -> list[tuple[str, ConsumerGroupState]]:
        """Every consumer-protocol group here, with its state."""
        with self._lock:
            return [(g.group_id, g.state) for g in self._groups.values()]

    # --- ConsumerGroupHeartbeat ----------------------------------------------------------

    def handle_heartbeat(self, request: HeartbeatRequest, callback: HeartbeatCallback) -> None:
        """Answer one heartbeat through ``callback`` (after its records are appended)."""
        error = self._coordinator_error(request.group_id)
        if error is not None:
            callback(HeartbeatResult(error))
            return
        records: list[Entry] = []
        failure: HeartbeatResult | None = None
        with self._lock:
            try:
                self._validate(request)
                result = self._heartbeat(request, records)
            except _HeartbeatError as exc:
                failure = HeartbeatResult(exc.error, str(exc))
            else:
                self._append_then(request.group_id, records, result, callback)
        if failure is not None:
            callback(failure)

    def _coordinator_error(self, group_id: str) -> ErrorCode | None:
        if self._manager.is_group_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self._manager.is_group_local(group_id):
            return ErrorCode.not_coordinator
        return None

    def _validate(self, request: HeartbeatRequest) -> None:
        invalid = ErrorCode.invalid_request
        if not request.group_id:
            raise _HeartbeatError(invalid, "GroupId can't be empty.")
        if request.instance_id == "":
            raise _HeartbeatError(invalid, "InstanceId can't be empty.")
        if request.rack_id == "":
            raise _HeartbeatError(invalid, "RackId can't be empty.")
        self._validate_epoch(request)
        assignors = self.config.consumer_assignors
        if request.server_assignor is not None and request.server_assignor not in assignors:
            raise _HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.",
            )
        if request.subscribed_topic_regex is not None:
            try:
                re2.compile(request.subscribed_topic_regex)
            except re2.error as exc:
                raise _HeartbeatError(
                    ErrorCode.invalid_regular_expression, f"SubscribedTopicRegex is invalid: {exc}"
                ) from exc

    @staticmethod
    def _validate_epoch(request: HeartbeatRequest) -> None:
        """The checks that depend on the member epoch (join, leave, static leave)."""
        invalid = ErrorCode.invalid_request
        epoch = request.member_epoch
        if request.member_id_required and not request.member_id:
            raise _HeartbeatError(invalid, "MemberId can't be empty.")
        if epoch > 0 or epoch == LEAVE_MEMBER_EPOCH:
            if not request.member_id:
                raise _HeartbeatError(invalid, "MemberId can't be empty.")
        elif epoch == JOIN_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise _HeartbeatError(
                    invalid, "RebalanceTimeoutMs must be provided in first request."
                )
            if request.owned is None or request.owned:
                raise _HeartbeatError(invalid, "TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and request.subscribed_topic_regex is None:
                raise _HeartbeatError(
                    invalid,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif epoch == LEAVE_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise _HeartbeatError(invalid, "MemberId can't be empty.")
            if request.instance_id is None:
                raise _HeartbeatError(invalid, "InstanceId can't be null.")
        else:
            raise _HeartbeatError(invalid, "MemberEpoch is invalid.")

    def _group_for(self, request: HeartbeatRequest, records: list[Entry]) -> ConsumerGroup:
        group = self._groups.get(request.group_id)
        if group is not None:
            return group
        if self.share_group_exists(request.group_id):
            raise _HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a consumer group."
            )
        classic = self._manager.get_group(request.group_id)
        if classic is not None and classic.state not in {GroupState.EMPTY, GroupState.DEAD}:
            raise _HeartbeatError(
                ErrorCode.group_id_not_found,
                f"Group {request.group_id} is not a consumer group.",
            )
        if request.member_epoch != JOIN_MEMBER_EPOCH:
            raise _HeartbeatError(
                ErrorCode.group_id_not_found, f"Group {request.group_id} not found."
            )
        if classic is not None and not self.config.consumer_migration_allows("upgrade"):
            raise _HeartbeatError(
                ErrorCode.group_id_not_found,
                f"Group {request.group_id} is not a consumer group "
                "(group.consumer.migration.policy does not allow an upgrade).",
            )
        if classic is not None:
            self._take_over(classic, records)
        group = ConsumerGroup(request.group_id)
        self._groups[request.group_id] = group
        records.append(group_epoch_record(group.group_id, group.group_epoch))
        return group

    @staticmethod
    def _take_over(classic: GroupMetadata, records: list[Entry]) -> None:
        """Convert an empty classic group: its group record goes (a tombstone) and it
        stays in the offsets manager only as the holder of the group's offsets, so that
        they expire by their commit times rather than from when the classic group
        emptied."""
        with classic.lock:
            if classic.generation_id > 0 or classic.protocol_type is not None:
                records.append((encode_group_key(GroupKey(classic.group_id)), None))
            classic.generation_id = 0
            classic.protocol_type = None
            classic.protocol_name = None
            classic.leader_id = None
            classic.subscribed_topics = None

    def _heartbeat(self, request: HeartbeatRequest, records: list[Entry]) -> HeartbeatResult:
        group = self._group_for(request, records)
        if request.member_epoch == LEAVE_MEMBER_EPOCH:
            return self._leave(group, request, records)
        if request.member_epoch == LEAVE_STATIC_MEMBER_EPOCH:
            return self._leave_static(group, request, records)
        member = self._member_for(group, request, records)
        updated = dataclasses.replace(
            member,
            instance_id=request.instance_id or member.instance_id,
            rack_id=request.rack_id or member.rack_id,
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if request.rebalance_timeout_ms == -1
                else request.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor or member.server_assignor,
            subscribed_topic_names=(
                member.subscribed_topic_names
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            subscribed_topic_regex=(
                member.subscribed_topic_regex
                if request.subscribed_topic_regex is None
                else request.subscribed_topic_regex or None
            ),
            client_id=request.client_id,
            client_host=request.client_host,
        )
        new_member = member.member_id not in group.members
        bump = new_member or (
            member.subscribed_topic_names,
            member.subscribed_topic_regex,
            member.server_assignor,
        ) != (
            updated.subscribed_topic_names,
            updated.subscribed_topic_regex,
            updated.server_assignor,
        )
        if new_member or not member.same_metadata(updated):
            records.append(member_metadata_record(group.group_id, updated))
        group.put_member(updated)
        if self._refresh_subscription_metadata(group, records, recompute=bump):
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(group_epoch_record(group.group_id, group.group_epoch))
            _log.info("[GroupId %s] bumped group epoch to %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.target_assignment_epoch:
            self._update_target_assignment(group, records)
        reconciled = self._reconcile(group, updated, request.owned, records)
        self._schedule_session(group, reconciled.member_id)
        full = request.member_epoch == JOIN_MEMBER_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        changed = dict(member.assigned_partitions) != dict(reconciled.assigned_partitions)
        return HeartbeatResult(
            ErrorCode.none,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._group_ms(
                group.group_id,
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                self.config.group_consumer_heartbeat_interval_ms,
            ),
            assignment=reconciled.assigned_partitions if full or changed else None,
        )

    def _member_for(
        self, group: ConsumerGroup, request: HeartbeatRequest, records: list[Entry]
    ) -> ConsumerGroupMember:
        member_id = request.member_id or uuid.uuid4().hex
        if request.member_epoch == JOIN_MEMBER_EPOCH:
            if request.instance_id is not None:
                previous = group.static_member(request.instance_id)
                if previous is not None:
                    return self._replace_static_member(group, previous, member_id, request, records)
            existing = group.members.get(member_id)
            if existing is not None:
                # A member rejoining under its id starts over: it gives up what it held.
                self._remove_member(group, existing.member_id, records)
            elif len(group.members) >= self.config.group_consumer_max_size:
                raise _HeartbeatError(
                    ErrorCode.group_max_size_reached,
                    f"The consumer group has reached its maximum capacity of "
                    f"{self.config.group_consumer_max_size} members.",
                )
            return ConsumerGroupMember(member_id=member_id)
        member = group.members.get(member_id)
        if member is None:
            raise _HeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        self._check_epoch(member, request)
        return member

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, request: HeartbeatRequest) -> None:
        received = request.member_epoch
        if received > member.member_epoch or (
            received < member.member_epoch
            and (
                received != member.previous_member_epoch
                or request.owned is None
                or not is_subset(request.owned, member.assigned_partitions)
            )
        ):
            raise _HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has epoch {received} but the coordinator "
                f"expects {member.member_epoch}. The member must abandon all its "
                "partitions and rejoin.",
            )

    def _replace_static_member(
        self,
        group: ConsumerGroup,
        previous: ConsumerGroupMember,
        member_id: str,
        request: HeartbeatRequest,
        records: list[Entry],
    ) -> ConsumerGroupMember:
        if not previous.has_left_temporarily:
            raise _HeartbeatError(
                ErrorCode.unreleased_instance_id,
                f"Static member {previous.member_id} with instance id {request.instance_id} "
                "is still active in the group.",
            )
        target = group.target_assignment.get(previous.member_id, EMPTY_ASSIGNMENT)
        self._cancel_timers(group.group_id, previous.member_id)
        group.remove_member(previous.member_id)
        records.extend(member_tombstones(group.group_id, previous.member_id))
        replacement = dataclasses.replace(
            previous,
            member_id=member_id,
            member_epoch=previous.previous_member_epoch,
        )
        group.target_assignment[member_id] = target
        records.append(target_member_record(group.group_id, member_id, target))
        records.append(current_assignment_record(group.group_id, replacement))
        group.put_member(replacement)
        return replacement

    def _leave(
        self, group: ConsumerGroup, request: HeartbeatRequest, records: list[Entry]
    ) -> HeartbeatResult:
        member = group.members.get(request.member_id)
        if member is None:
            raise _HeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        _log.info("[GroupId %s] member %s left", group.group_id, member.member_id)
        self._fence(group, member.member_id, records)
        return HeartbeatResult(
            ErrorCode.none, member_id=member.member_id, member_epoch=LEAVE_MEMBER_EPOCH
        )

    def _leave_static(
        self, group: ConsumerGroup, request: HeartbeatRequest, records: list[Entry]
    ) -> HeartbeatResult:
        member = group.members.get(request.member_id)
        if member is None:
            raise _HeartbeatError(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        left = dataclasses.replace(
            member,
            member_epoch=LEAVE_STATIC_MEMBER_EPOCH,
            previous_member_epoch=member.member_epoch,
        )
        group.put_member(left)
        records.append(current_assignment_record(group.group_id, left))
        timers = self._timers.setdefault((group.group_id, member.member_id), _MemberTimers())
        if timers.rebalance is not None:
            timers.rebalance.cancel()
            timers.rebalance = None
        self._schedule_session(group, member.member_id)
        return HeartbeatResult(
            ErrorCode.none, member_id=member.member_id, member_epoch=LEAVE_STATIC_MEMBER_EPOCH
        )

    def _fence(self, group: ConsumerGroup, member_id: str, records: list[Entry]) -> None:
        """Remove a member and bump the group epoch: its partitions go to the others."""
        self._remove_member(group, member_id, records)
        group.group_epoch += 1
        records.append(group_epoch_record(group.group_id, group.group_epoch))
        self._refresh_subscription_metadata(group, records)

    def _remove_member(self, group: ConsumerGroup, member_id: str, records: list[Entry]) -> None:
        self._cancel_timers(group.group_id, member_id)
        group.remove_member(member_id)
        records.extend(member_tombstones(group.group_id, member_id))

    # --- subscriptions and the target assignment -----------------------------------------

    def _subscribed_names(self, member: ConsumerGroupMember, all_topics: Sequence[str]) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            pattern = re2.compile(member.subscribed_topic_regex)
            names.update(
                name
                for name in all_topics
                if not name.startswith(_INTERNAL_TOPIC_PREFIX) and pattern.fullmatch(name)
            )
        return names

    def _refresh_subscription_metadata(
        self, group: ConsumerGroup, records: list[Entry], *, recompute: bool = True
    ) -> bool:
        """Bring the subscribed topics' metadata up to date; True (and a record) if it
        changed. Without ``recompute`` (a heartbeat that changed no subscription) only the
        names resolved last time are looked up again, unless a member uses a regex."""
        quick = (
            not recompute
            and group.subscribed_names  # empty after a load: resolved again at once
            and not any(m.subscribed_topic_regex for m in group.members.values())
        )
        if quick:
            names: Iterable[str] = group.subscribed_names
        else:
            all_topics = sorted(self._topics.topic_names())
            resolved: set[str] = set()
            for member in group.members.values():
                resolved |= self._subscribed_names(member, all_topics)
            group.subscribed_names = frozenset(resolved)
            names = resolved
        metadata: dict[str, TopicMetadata] = {}
        for name in names:
            topic_id = self._topics.topic_id(name)
            count = self._topics.partition_count(name)
            if topic_id is not None and count is not None:
                metadata[name] = TopicMetadata(topic_id, name, count)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        records.append(subscription_metadata_record(group.group_id, metadata.values()))
        return True

    def _assignor_name(self, group: ConsumerGroup) -> str:
        wanted = collections.Counter(
            m.server_assignor for m in group.members.values() if m.server_assignor is not None
        )
        if wanted:
            return min(wanted, key=lambda name: (-wanted[name], name))
        return self.config.consumer_assignors[0]

    def _update_target_assignment(self, group: ConsumerGroup, records: list[Entry]) -> None:
        all_topics = sorted(self._topics.topic_names())
        specs = {
            member.member_id: MemberSpec(
                frozenset(
                    group.subscription_metadata[name].topic_id
                    for name in self._subscribed_names(member, all_topics)
                    if name in group.subscription_metadata
                ),
                group.target_assignment.get(member.member_id, EMPTY_ASSIGNMENT),
            )
            for member in group.members.values()
        }
        partitions = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
        assignor = ASSIGNORS[self._assignor_name(group)]
        target = assignor(specs, partitions)
        for member_id, assignment in target.items():
            if dict(group.target_assignment.get(member_id, EMPTY_ASSIGNMENT)) != dict(assignment):
                records.append(target_member_record(group.group_id, member_id, assignment))
        group.target_assignment = dict(target)
        group.target_assignment_epoch = group.group_epoch
        records.append(target_epoch_record(group.group_id, group.target_assignment_epoch))

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: Assignment | None,
        records: list[Entry],
    ) -> ConsumerGroupMember:
        target = group.target_assignment.get(member.member_id, EMPTY_ASSIGNMENT)
        settled = (
            member.state is MemberState.STABLE
            and member.member_epoch == group.target_assignment_epoch
        )
        try:
            # A member settled at the target has nothing to reconcile: spare the O(partitions)
            # walk over who owns what.
            owners = {} if settled else group.partition_owners()
            reconciled = reconcile(member, group.target_assignment_epoch, target, owned, owners)
        except UnknownMemberStateError as exc:
            raise _HeartbeatError(
                ErrorCode.fenced_member_epoch,
                "The consumer group member is in an unknown state. "
                "The member must abandon all its partitions and rejoin.",
            ) from exc
        if not reconciled.same_assignment(member) or member.member_epoch == JOIN_MEMBER_EPOCH:
            records.append(current_assignment_record(group.group_id, reconciled))
        group.put_member(reconciled)
        timers = self._timers.setdefault((group.group_id, member.member_id), _MemberTimers())
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if timers.rebalance is None or member.state is not MemberState.UNREVOKED_PARTITIONS:
                if timers.rebalance is not None:
                    timers.rebalance.cancel()
                timers.rebalance = self._timer.schedule(
                    max(reconciled.rebalance_timeout_ms, 0),
                    self._expire_rebalance,
                    group.group_id,
                    member.member_id,
                    reconciled.member_epoch,
                )
        elif timers.rebalance is not None:
            timers.rebalance.cancel()
            timers.rebalance = None
        return reconciled

    # --- timers -------------------------------------------------------------------------

    def _group_ms(self, group_id: str, name: str, default_ms: int) -> int:
        """The group's override of the duration ``name``, else the broker's."""
        raw = self.group_configs(group_id).get(name)
        return default_ms if raw is None or not raw.isdigit() else int(raw)

    def _schedule_session(self, group: ConsumerGroup, member_id: str) -> None:
        timers = self._timers.setdefault((group.group_id, member_id), _MemberTimers())
        if timers.session is not None:
            timers.session.cancel()
        timers.session = self._timer.schedule(
            self._group_ms(
                group.group_id,
                CONSUMER_SESSION_TIMEOUT_MS,
                self.config.group_consumer_session_timeout_ms,
            ),
            self._expire_session,
            group.group_id,
            member_id,
        )

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        timers = self._timers.pop((group_id, member_id), None)
        if timers is not None:
            timers.cancel()

    def _expire_session(self, group_id: str, member_id: str) -> None:
        records: list[Entry] = []
        with self._lock:
            group = self._groups.get(group_id)
            if group is None or member_id not in group.members:
                return
            _log.info("[GroupId %s] member %s fenced: session timeout", group_id, member_id)
            self._fence(group, member_id, records)
            self._append_then(group_id, records, None, None)

    def _expire_rebalance(self, group_id: str, member_id: str, member_epoch: int) -> None:
        records: list[Entry] = []
        with self._lock:
            group = self._groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if (
                group is None
                or member is None
                or member.state is not MemberState.UNREVOKED_PARTITIONS
                or member.member_epoch != member_epoch
            ):
                return
            _log.info(
                "[GroupId %s] member %s fenced: it did not revoke its partitions within its "
                "rebalance timeout",
                group_id,
                member_id,
            )
            self._fence(group, member_id, records)
            self._append_then(group_id, records, None, None)

    # --- writing -------------------------------------------------------------------------

    def _append_then(
        self,
        group_id: str,
        records: list[Entry],
        result: HeartbeatResult | None,
        callback: HeartbeatCallback | None,
    ) -> None:
        if not records:
            if callback is not None and result is not None:
                callback(result)
            return

        def appended(error: ErrorCode, _base_offset: int) -> None:
            if error is not ErrorCode.none:
                _log.warning(
                    "[GroupId %s] could not write consumer group records: %s",
                    group_id,
                    error.name,
                )
            if callback is None or result is None:
                return
            if error is ErrorCode.none:
                callback(result)
            else:
                callback(HeartbeatResult(client_error(error)))

        batch = build_batch(records, self._manager.clock_ms())
        self._offsets_log.append(self._manager.partition_for(group_id), batch, appended)

    # --- offsets --------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        api_version: int,
        transactional: bool = False,
    ) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: None if ``group_id`` is not a
        consumer-protocol group here, else the error (``none``: commit). A
        non-transactional commit of a member must come as OffsetCommit v9 or later."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            if member_epoch < 0 and not group.members:
                return ErrorCode.none
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.unknown_member_id
            if not transactional and api_version < _OFFSET_COMMIT_CONSUMER_PROTOCOL_VERSION:
                return ErrorCode.unsupported_version
            if member_epoch != member.member_epoch:
                return ErrorCode.stale_member_epoch
            return ErrorCode.none

    def validate_offset_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetFetch: None if ``group_id`` is not a
        consumer-protocol group here, else the error (``none``: fetch)."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            if member_id is None and member_epoch < 0:
                return ErrorCode.none
            member = group.members.get(member_id or "")
            if member is None:
                return ErrorCode.unknown_member_id
            if member_epoch != member.member_epoch:
                return ErrorCode.stale_member_epoch
            return ErrorCode.none

    # --- describe, delete, downgrade ------------------------------------------------------

    def describe(self, group_id: str) -> DescribedGroup:
        """ConsumerGroupDescribe of one group."""
        error = self._coordinator_error(group_id)
        if error is not None:
            return DescribedGroup(group_id, error)
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return DescribedGroup(group_id, ErrorCode.group_id_not_found)
            return DescribedGroup(
                group_id,
                ErrorCode.none,
                state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.target_assignment_epoch,
                assignor_name=self._assignor_name(group),
                members=tuple(
                    DescribedMember(m, group.target_assignment.get(m.member_id, EMPTY_ASSIGNMENT))
                    for m in group.members.values()
                ),
            )

    def delete(self, group_id: str) -> ErrorCode | None:
        """Delete an empty consumer-protocol group (its records get tombstones): None if
        ``group_id`` is not one here, NON_EMPTY_GROUP if it has members."""
        records: list[Entry] = []
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            if group.members:
                return ErrorCode.non_empty_group
            self._drop(group, records)
            self._append_then(group_id, records, None, None)
        return ErrorCode.none

    def delete_empty_groups(self, has_offsets: Callable[[str], bool]) -> int:
        """Delete every empty group without committed offsets (Kafka's cleanupGroupMetadata,
        run after the offsets' expiry); returns how many went."""
        records: dict[str, list[Entry]] = {}
        with self._lock:
            for group in list(self._groups.values()):
                if not group.members and not has_offsets(group.group_id):
                    self._drop(group, records.setdefault(group.group_id, []))
            for group_id, group_records in records.items():
                self._append_then(group_id, group_records, None, None)
        return len(records)

    def downgrade(self, group_id: str) -> ErrorCode | None:
        """A classic JoinGroup for ``group_id``: None if the classic protocol may go on
        (no consumer group, or an empty one that is converted, per
        ``group.consumer.migration.policy``), else the error to answer."""
        records: list[Entry] = []
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return None
            if group.members or not self.config.consumer_migration_allows("downgrade"):
                return ErrorCode.inconsistent_group_protocol
            _log.info("[GroupId %s] empty consumer group converted to a classic group", group_id)
            self._drop(group, records)
            self._append_then(group_id, records, None, None)
        return None

    def _drop(self, group: ConsumerGroup, records: list[Entry]) -> None:
        for member_id in list(group.members):
            self._remove_member(group, member_id, records)
        records.extend(group_tombstones(group.group_id))
        group.dead = True
        del self._groups[group.group_id]

    # --- loading --------------------------------------------------------------------------

    def replay(self, partition: int, others: Sequence[OtherRecord]) -> None:
        """Rebuild the consumer groups of offsets ``partition`` from its records."""
        groups = rebuild_groups(others)
        with self._lock:
            for group in groups.values():
                self._groups[group.group_id] = group
                for member_id in group.members:
                    self._schedule_session(group, member_id)
        for group in groups.values():
            _log.info(
                "[GroupId %s] loaded consumer group at epoch %d from partition %d",
                group.group_id,
                group.group_epoch,
                partition,
            )

    def unload(self, partition: int) -> None:
        """Forget the consumer groups of offsets ``partition`` (another broker leads it)."""
        with self._lock:
            for group_id in [
                g for g in self._groups if self._manager.partition_for(g) == partition
            ]:
                group = self._groups.pop(group_id)
                group.dead = True
                for member_id in group.members:
                    self._cancel_timers(group_id, member_id)

    def shutdown(self) -> None:
        """Cancel every timer."""
        with self._lock:
            for timers in self._timers.values():
                timers.cancel()
            self._timers.clear()


_OFFSET_COMMIT_CONSUMER_PROTOCOL_VERSION = 9
"""OffsetCommit from v9 carries a consumer-protocol member's epoch (Kafka refuses older)."""
