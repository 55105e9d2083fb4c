"""The group coordinator: Kafka's classic group protocol over two purgatories.

``GroupCoordinator`` implements JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
TxnOffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete
the way Kafka's GroupCoordinator.scala does, with callbacks for the answers that must
wait (a JoinGroup waits for the rebalance, a SyncGroup for the leader's assignment, an
OffsetCommit for its append). Requests arrive already decoded
(``tickwheel.coordinator.GroupApis`` turns kio entities into these calls); the waits
are DelayedJoin / InitialDelayedJoin in the "Rebalance" purgatory and DelayedHeartbeat
in the "Heartbeat" purgatory.

TxnOffsetCommit stores a transactional producer's offsets as pending in the group; the
transaction's marker, once appended to the group's ``__consumer_offsets`` partition,
reaches ``on_transaction_completed`` (the broker installs it as the ReplicaManager's
``txn_completion_listener``), which commits or drops them.

``cleanup_group_metadata`` is Kafka's "delete-expired-group-metadata" task, which its
owner runs every ``offsets.retention.check.interval.ms`` (``GroupService`` does, on the
broker's loop): offsets whose retention ran out are removed, and so is every group left
Empty without offsets, so groups that clients create and abandon do not pile up.

Heartbeats complete the member's DelayedHeartbeat by flag, not by time: whoever sees a
sign of life sets ``heartbeat_satisfied``, completes the pending operation through the
purgatory, clears the flag and watches a new one for another session timeout (Kafka
2.6+). A member that is rejoining or awaiting its assignment counts as alive.

Concurrency contract: every method may be called from any thread; each takes the lock
of the group it concerns (see the package docstring for the full lock story) and never
a second group's while holding it (DeleteGroups and the cleanup visit several groups,
one lock after the other). Callbacks are invoked after that lock is released, on the
thread that released it: a handler's own thread, or the thread that completed a delayed
operation or an append (the event loop, in the broker).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group._config import GroupConfig
from tickwheel.coordinator.group._consumer_protocol import CONSUMER_PROTOCOL_TYPE
from tickwheel.coordinator.group._delayed import DelayedHeartbeat, DelayedJoin, InitialDelayedJoin
from tickwheel.coordinator.group._group import (
    NO_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinGroupResult,
    MemberMetadata,
    Protocols,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
)
from tickwheel.coordinator.group._manager import (
    FetchedOffset,
    GroupMetadataManager,
    OffsetsCallback,
)
from tickwheel.coordinator.group._offsets_log import OFFSETS_TOPIC
from tickwheel.coordinator.group._records import OffsetValue
from tickwheel.purgatory import DelayedOperationPurgatory, GroupJoinKey, MemberKey
from tickwheel.replica import TopicPartition as ReplicaTopicPartition
from tickwheel.timer import SystemTimer

_log = logging.getLogger(__name__)

# A new member cannot heartbeat before its first JoinGroup answer; if its client gives up
# (and retries with a fresh id) the old id must not linger for ever. Kafka: 5 minutes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
HEARTBEAT_PURGATORY = "Heartbeat"
REBALANCE_PURGATORY = "Rebalance"


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup request, decoded."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """One member named in a LeaveGroup request, and the answer for it."""

    member_id: str
    group_instance_id: str | None
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """A group as ListGroups shows it."""

    group_id: str
    protocol_type: str
    state: GroupState


@dataclass(frozen=True, slots=True)
class MemberSummary:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group as DescribeGroups shows it; state "Dead" for an unknown group."""

    state: str
    protocol_type: str
    protocol_name: str
    members: tuple[MemberSummary, ...]


_DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "", ())
_NO_GROUP = GroupSummary("", "", "", ())
# APIs that accept the empty group id: offset storage for clients without group
# management, and describing or deleting such a group (Kafka's isValidGroupId).
_EMPTY_ID_ALLOWED = frozenset({"offset_commit", "offset_fetch", "describe_groups", "delete_groups"})


def _validate_current_member(
    group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int
) -> ErrorCode | None:
    """The error for a request from a member of ``group`` at ``generation_id``, if any.

    Kafka's validateCurrentMember (fenced static member, unknown member) with the Dead
    and generation checks that SyncGroup, Heartbeat and OffsetCommit put around it.
    Called with the group's lock held.
    """
    if group.is_in(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if group.is_static_member_fenced(member_id, group_instance_id):
        return ErrorCode.fenced_instance_id
    if not group.has(member_id):
        return ErrorCode.unknown_member_id
    if generation_id != group.generation_id:
        return ErrorCode.illegal_generation
    return None


def _txn_commit_error(
    group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int
) -> ErrorCode | None:
    """Kafka's validateOffsetCommit for a transactional commit, under the group's lock.

    A commit without a generation to an Empty group is accepted (a producer whose
    consumer does not use group management), and so is one naming no member at all
    (TxnOffsetCommit before v3 cannot); one that names a member or a generation must be
    from the current generation's member.
    """
    if group.is_in(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.is_in(GroupState.EMPTY):
        return None
    if generation_id >= 0 or member_id != NO_MEMBER_ID or group_instance_id is not None:
        return _validate_current_member(group, member_id, group_instance_id, generation_id)
    return None


class GroupCoordinator:
    """Kafka's GroupCoordinator for the groups of the ``__consumer_offsets`` partitions it leads."""

    def __init__(
        self,
        config: GroupConfig,
        manager: GroupMetadataManager,
        *,
        timer_for: Callable[[str], SystemTimer] | None = None,
        broker_id: int = 0,
        reaper_enabled: bool = True,
    ) -> None:
        self.config = config
        self.manager = manager

        def timer(name: str) -> SystemTimer | None:
            return None if timer_for is None else timer_for(name)

        # One timer per purgatory, as in Kafka (a purgatory owns and closes its timer).
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = (
            DelayedOperationPurgatory(
                HEARTBEAT_PURGATORY,
                timer(HEARTBEAT_PURGATORY),
                broker_id=broker_id,
                reaper_enabled=reaper_enabled,
            )
        )
        self.join_purgatory: DelayedOperationPurgatory[DelayedJoin] = DelayedOperationPurgatory(
            REBALANCE_PURGATORY,
            timer(REBALANCE_PURGATORY),
            broker_id=broker_id,
            reaper_enabled=reaper_enabled,
        )
        self._active = False
        # Whether a share group has this id (group ids are one namespace): set by the
        # broker to ask its share-group coordinator; a JoinGroup for one is refused.
        self.share_group_exists: Callable[[str], bool] = lambda group_id: False

    # --- lifecycle ---------------------------------------------------------------------

    def startup(self) -> None:
        """Start answering requests."""
        self._active = True

    def shutdown(self) -> None:
        """Stop answering requests and shut both purgatories down."""
        self._active = False
        self.heartbeat_purgatory.shutdown()
        self.join_purgatory.shutdown()

    def on_elected(self, partition: int) -> None:
        """This broker now leads ``__consumer_offsets`` ``partition``: load its groups."""
        self.manager.load_partition(partition, self._on_group_loaded)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads ``partition``: drop its groups."""
        self.manager.unload_partition(partition, self._on_group_unloaded)

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
        return self.manager.partition_for(group_id)

    def _now_ms(self) -> int:
        return self.manager.clock_ms()

    def _validate(self, group_id: str, api: str) -> ErrorCode | None:
        """Kafka's validateGroupStatus: the error that stops a request before the group."""
        if not group_id and api not in _EMPTY_ID_ALLOWED:
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        if self.manager.is_group_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self.manager.is_group_local(group_id):
            return ErrorCode.not_coordinator
        return None

    # --- JoinGroup -----------------------------------------------------------------------

    def handle_join_group(self, request: JoinRequest, callback: JoinCallback) -> None:
        """Join (or rejoin) a group; ``callback`` gets the answer once the rebalance completes."""
        error = self._validate(request.group_id, "join_group")
        if error is not None:
            callback(JoinGroupResult(error, request.member_id))
            return
        if not (
            self.config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            callback(JoinGroupResult(ErrorCode.invalid_session_timeout, request.member_id))
            return
        if self.manager.get_group(request.group_id) is None and self.share_group_exists(
            request.group_id
        ):
            # Kafka's answer to a classic join of a share group's id.
            callback(JoinGroupResult(ErrorCode.inconsistent_group_protocol, NO_MEMBER_ID))
            return
        is_unknown_member = request.member_id == NO_MEMBER_ID
        group = (
            self.manager.get_or_add_group(request.group_id)
            if is_unknown_member
            else self.manager.get_group(request.group_id)
        )
        if group is None:
            # A member id for a group we do not know: it must start over.
            callback(JoinGroupResult(ErrorCode.unknown_member_id, request.member_id))
            return
        with group.lock:
            if not self._accepts_joining_member(group, request.member_id):
                self._reject_over_capacity(group, request, callback)
            elif is_unknown_member:
                self._join_unknown_member(group, request, callback)
            else:
                self._join_known_member(group, request, callback)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self.join_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _accepts_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Kafka's acceptJoiningMember, the group.max.size rule.

        An Empty or Dead group takes anyone. While rebalancing, the members already
        rejoined are counted, not the members: a group over the limit (it was lowered)
        keeps the first ``group.max.size`` to rejoin and turns the rest away. A
        Completing or Stable group takes its members, and new ones while it has room.
        """
        max_size = self.config.group_max_size
        if group.state in {GroupState.EMPTY, GroupState.DEAD}:
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (
                member is not None and member.is_awaiting_join
            ) or group.num_members_awaiting_join < max_size
        return group.has(member_id) or len(group.members) < max_size

    def _reject_over_capacity(
        self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback
    ) -> None:
        group.remove(request.member_id)
        result = JoinGroupResult(ErrorCode.group_max_size_reached, NO_MEMBER_ID)
        group.lock.defer(lambda: callback(result))

    def _join_unknown_member(
        self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback
    ) -> None:
        def answer(result: JoinGroupResult) -> None:
            group.lock.defer(lambda: callback(result))

        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            answer(JoinGroupResult(ErrorCode.coordinator_not_available, NO_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, names):
            answer(JoinGroupResult(ErrorCode.inconsistent_group_protocol, NO_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static_member(group, request, instance_id, new_member_id, callback)
        elif request.require_known_member_id and instance_id is None:
            # Hand out an id and have the client come back with it, so a client that
            # times out and retries does not leave a stray member behind (KIP-394).
            group.pending_members.add(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            answer(JoinGroupResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, callback)

    def _replace_static_member(
        self,
        group: GroupMetadata,
        request: JoinRequest,
        instance_id: str,
        new_member_id: str,
        callback: JoinCallback,
    ) -> None:
        old_member_id = group.static_members[instance_id]
        old_leader = group.leader_id
        member = group.replace_static_member(old_member_id, new_member_id)
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        protocols_changed = not member.matches(request.protocols)
        group.update_member(member, request.protocols, callback)
        settled = group.state in {GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
        if settled and not protocols_changed:
            # The restarted instance takes its old place without a rebalance. It is told
            # the old leader id, so a returning leader does not compute a new assignment
            # that a stable group would never hand out.
            group.invoke_join_callback(
                member,
                JoinGroupResult(
                    ErrorCode.none,
                    new_member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    old_leader or "",
                ),
            )
        elif settled:
            self._maybe_prepare_rebalance(group, f"static member {instance_id} changed")

    def _join_known_member(
        self, group: GroupMetadata, request: JoinRequest, callback: JoinCallback
    ) -> None:
        def answer(result: JoinGroupResult) -> None:
            group.lock.defer(lambda: callback(result))

        member_id = request.member_id
        names = [name for name, _ in request.protocols]
        if group.is_in(GroupState.DEAD):
            answer(JoinGroupResult(ErrorCode.coordinator_not_available, member_id))
        elif not group.supports_protocols(request.protocol_type, names):
            answer(JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id))
        elif group.is_pending(member_id):
            self._add_member_and_rebalance(group, request, member_id, callback)
        elif group.is_static_member_fenced(member_id, request.group_instance_id):
            answer(JoinGroupResult(ErrorCode.fenced_instance_id, member_id))
        elif not group.has(member_id) or (
            request.group_instance_id is not None
            and request.group_instance_id not in group.static_members
        ):
            answer(JoinGroupResult(ErrorCode.unknown_member_id, member_id))
        else:
            self._rejoin(group, group.members[member_id], request, callback)

    def _rejoin(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        request: JoinRequest,
        callback: JoinCallback,
    ) -> None:
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request.protocols, callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # It lost our JoinGroup answer: give it again for the current generation.
                result = self._join_result(group, member)
                group.lock.defer(lambda: callback(result))
            else:
                self._update_member_and_rebalance(group, member, request.protocols, callback)
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id) or not member.matches(request.protocols):
                # A leader's rejoin asks for a rebalance (its topics' metadata changed).
                self._update_member_and_rebalance(group, member, request.protocols, callback)
            else:
                result = self._join_result(group, member, with_members=False)
                group.lock.defer(lambda: callback(result))
        else:
            result = JoinGroupResult(ErrorCode.unknown_member_id, member.member_id)
            group.lock.defer(lambda: callback(result))

    def _join_result(
        self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool = True
    ) -> JoinGroupResult:
        leader = group.is_leader(member.member_id)
        return JoinGroupResult(
            ErrorCode.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if leader and with_members else (),
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        request: JoinRequest,
        member_id: str,
        callback: JoinCallback,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_id=group.group_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: Protocols,
        callback: JoinCallback,
    ) -> None:
        group.update_member(member, protocols, callback)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # Members waiting in SyncGroup must rejoin instead.
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        delay_ms = self.config.group_initial_rebalance_delay_ms
        delayed_join: DelayedJoin
        if group.is_in(GroupState.EMPTY):
            delayed_join = InitialDelayedJoin(
                self,
                self.join_purgatory,
                group,
                configured_delay_ms=delay_ms,
                delay_ms=delay_ms,
                remaining_ms=max(group.rebalance_timeout_ms - delay_ms, 0),
            )
        else:
            delayed_join = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._now_ms())
        _log.info(
            "preparing to rebalance group %s, generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        self.join_purgatory.try_complete_else_watch(delayed_join, [GroupJoinKey(group.group_id)])

    # --- DelayedJoin callbacks -----------------------------------------------------------

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        """DelayedJoin.try_complete: complete once every member has rejoined."""
        with group.lock:
            return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.on_complete: drop members that did not rejoin, start the next generation."""
        with group.lock:
            for failed in group.not_yet_rejoined():
                if not failed.is_static:
                    self._remove_heartbeat_for_leaving_member(group, failed)
                    group.remove(failed.member_id)
            if group.is_in(GroupState.DEAD):
                return
            if not group.maybe_elect_new_joined_leader() and group.members:
                # Nobody rejoined (only static members remain): wait another round; their
                # session timeouts will remove them if they are gone.
                self.join_purgatory.try_complete_else_watch(
                    DelayedJoin(self, group, group.rebalance_timeout_ms),
                    [GroupJoinKey(group.group_id)],
                )
                return
            group.init_next_generation(self._now_ms())
            if group.is_in(GroupState.EMPTY):
                self.manager.store_group(group, {}, self._log_store_failure(group))
                return
            _log.info(
                "group %s stabilised at generation %d with %d members",
                group.group_id,
                group.generation_id,
                len(group.members),
            )
            for member in list(group.members.values()):
                group.invoke_join_callback(member, self._join_result(group, member))
                self._complete_and_schedule_next_heartbeat_expiration(group, member)
                member.is_new = False

    @staticmethod
    def _log_store_failure(group: GroupMetadata) -> Callable[[ErrorCode], None]:
        def stored(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                # Safe to lose: an empty generation has no members to mislead.
                _log.warning("could not store empty group %s: %s", group.group_id, error.name)

        return stored

    # --- SyncGroup -------------------------------------------------------------------------

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        callback: SyncCallback,
    ) -> None:
        """Collect the leader's assignment; ``callback`` gets this member's share."""
        error = self._validate(group_id, "sync_group")
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance in progress was lost with the old coordinator: rejoin.
            callback(SyncGroupResult(ErrorCode.rebalance_in_progress))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.unknown_member_id))
            return
        with group.lock:
            failure = self._sync_error(
                group, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
            if failure is not None:
                result = SyncGroupResult(failure)
                group.lock.defer(lambda: callback(result))
            elif group.is_in(GroupState.COMPLETING_REBALANCE):
                self._await_assignment(group, generation_id, member_id, assignments, callback)
            else:  # Stable: hand out the current assignment again
                member = group.members[member_id]
                result = SyncGroupResult(
                    ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
                )
                group.lock.defer(lambda: callback(result))
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _sync_error(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode | None:
        error = _validate_current_member(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return None

    def _await_assignment(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        callback: SyncCallback,
    ) -> None:
        group.members[member_id].awaiting_sync = callback
        if not group.is_leader(member_id):
            return
        assignment = {mid: assignments.get(mid, b"") for mid in group.members}

        def stored(error: ErrorCode) -> None:
            # Another member may have joined while the generation was being written.
            if not (
                group.is_in(GroupState.COMPLETING_REBALANCE)
                and group.generation_id == generation_id
            ):
                return
            if error is not ErrorCode.none:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, "storing the assignment failed")
            else:
                for mid, member in group.members.items():
                    member.assignment = assignment.get(mid, b"")
                self._propagate_assignment(group, ErrorCode.none)
                group.transition_to(GroupState.STABLE, self._now_ms())

        self.manager.store_group(group, assignment, stored)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            result = SyncGroupResult(
                error, member.assignment, group.protocol_type, group.protocol_name
            )
            if group.invoke_sync_callback(member, result):
                # Its session may have run out while it waited for the leader: start afresh.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    # --- Heartbeat ---------------------------------------------------------------------------

    def handle_heartbeat(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        callback: Callable[[ErrorCode], None],
    ) -> None:
        """A member's sign of life; the answer tells it whether to rejoin."""
        error = self._validate(group_id, "heartbeat")
        if error is not None:
            # While loading, answer blindly: the member's state will be known soon.
            callback(ErrorCode.none if error is ErrorCode.coordinator_load_in_progress else error)
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(ErrorCode.unknown_member_id)
            return
        with group.lock:
            outcome = self._heartbeat(group, member_id, group_instance_id, generation_id)
            group.lock.defer(lambda: callback(outcome))

    def _heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode:
        error = _validate_current_member(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        # In CompletingRebalance too, as Kafka: a member heartbeats between its JoinGroup
        # and SyncGroup answers, and that must keep its session alive (answer NONE).
        self._complete_and_schedule_next_heartbeat_expiration(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --- DelayedHeartbeat callbacks and scheduling ---------------------------------------------

    def _complete_and_schedule_next_heartbeat_expiration(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        heartbeat = DelayedHeartbeat(
            self, group, member.member_id, is_pending=False, timeout_ms=timeout_ms
        )
        self.heartbeat_purgatory.try_complete_else_watch(heartbeat, [key])

    def _add_pending_member_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int
    ) -> None:
        heartbeat = DelayedHeartbeat(self, group, member_id, is_pending=True, timeout_ms=timeout_ms)
        self.heartbeat_purgatory.try_complete_else_watch(
            heartbeat, [MemberKey(group.group_id, member_id)]
        )

    def _remove_heartbeat_for_leaving_member(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        member.is_leaving = True
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member.member_id))

    def try_complete_heartbeat(
        self,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        force_complete: Callable[[], bool],
    ) -> bool:
        """DelayedHeartbeat.try_complete: complete on a sign of life (or when moot)."""
        with group.lock:
            if group.is_in(GroupState.DEAD):
                return force_complete()
            if is_pending:
                # Done once the handed-out id joined -- or, unlike Kafka, left: it then
                # has nothing to expire, and should not hold a timer task meanwhile.
                if group.has(member_id) or not group.is_pending(member_id):
                    return force_complete()
                return False
            member = group.members.get(member_id)
            if member is None or member.has_satisfied_heartbeat() or member.is_leaving:
                return force_complete()
            return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        """DelayedHeartbeat.on_expiration: the session ran out; remove the member."""
        with group.lock:
            if group.is_in(GroupState.DEAD):
                return
            if is_pending:
                _log.info("pending member %s of group %s expired", member_id, group.group_id)
                self._remove_pending_member_and_update_group(group, member_id)
                return
            member = group.members.get(member_id)
            if member is not None and not member.has_satisfied_heartbeat():
                _log.info("member %s of group %s failed its session", member_id, group.group_id)
                self._remove_member_and_update_group(group, member, "heartbeat expired")

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may still wait in JoinGroup: answer it so its client retries.
        group.invoke_join_callback(
            member, JoinGroupResult(ErrorCode.unknown_member_id, NO_MEMBER_ID)
        )
        group.invoke_sync_callback(member, SyncGroupResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in {GroupState.STABLE, GroupState.COMPLETING_REBALANCE}:
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    # --- LeaveGroup ------------------------------------------------------------------------------

    def handle_leave_group(
        self,
        group_id: str,
        leaving: Sequence[LeavingMember],
        callback: Callable[[ErrorCode, list[LeavingMember]], None],
    ) -> None:
        """Members leave at once (no session timeout to wait out); the group rebalances."""
        error = self._validate(group_id, "leave_group")
        if error is not None:
            callback(error, [])
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(
                ErrorCode.none,
                [
                    LeavingMember(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                    for m in leaving
                ],
            )
            return
        with group.lock:
            if group.is_in(GroupState.DEAD):
                group.lock.defer(lambda: callback(ErrorCode.coordinator_not_available, []))
                return
            answers = [self._leave(group, m) for m in leaving]
            group.lock.defer(lambda: callback(ErrorCode.none, answers))

    def _leave(self, group: GroupMetadata, leaving: LeavingMember) -> LeavingMember:
        member_id, instance_id = leaving.member_id, leaving.group_instance_id
        if member_id != NO_MEMBER_ID and group.is_static_member_fenced(member_id, instance_id):
            return LeavingMember(member_id, instance_id, ErrorCode.fenced_instance_id)
        if group.is_pending(member_id):
            self._remove_pending_member_and_update_group(group, member_id)
            self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))
            return LeavingMember(member_id, instance_id, ErrorCode.none)
        if instance_id is not None and instance_id in group.static_members:
            member = group.members[group.static_members[instance_id]]
        elif group.has(member_id):
            member = group.members[member_id]
        else:
            return LeavingMember(member_id, instance_id, ErrorCode.unknown_member_id)
        self._remove_heartbeat_for_leaving_member(group, member)
        self._remove_member_and_update_group(group, member, "left the group")
        return LeavingMember(member_id, instance_id, ErrorCode.none)

    # --- offsets ----------------------------------------------------------------------------------

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetValue],
        callback: OffsetsCallback,
    ) -> None:
        """Commit offsets for a member of the current generation, or for a group without members."""
        error = self._validate(group_id, "offset_commit")
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation of a group we do not know: a stale member.
                callback(dict.fromkeys(offsets, ErrorCode.illegal_generation))
                return
            group = self.manager.get_or_add_group(group_id)
        with group.lock:
            failure = self._commit_error(group, member_id, group_instance_id, generation_id)
            if failure is not None:
                errors = dict.fromkeys(offsets, failure)
                group.lock.defer(lambda: callback(errors))
                return
            member = group.members.get(member_id)
            if member is not None and generation_id >= 0:
                self._complete_and_schedule_next_heartbeat_expiration(group, member)
            self.manager.store_offsets(group, offsets, callback)

    def _commit_error(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> ErrorCode | None:
        if (
            generation_id < 0
            and group.is_in(GroupState.EMPTY)
            and not group.is_static_member_fenced(member_id, group_instance_id)
        ):
            return None  # a group that only stores offsets (no group management)
        error = _validate_current_member(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return error
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # A valid member that has not synced yet: let it finish the rebalance first.
            return ErrorCode.rebalance_in_progress
        return None

    def handle_fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, dict[TopicPartition, FetchedOffset]]:
        """Committed offsets of ``partitions`` (None: all), whatever the group's state;
        with ``require_stable``, UNSTABLE_OFFSET_COMMIT for those with a commit pending."""
        error = self._validate(group_id, "offset_fetch")
        if error is not None:
            return error, {}
        return ErrorCode.none, self.manager.get_offsets(
            group_id, partitions, require_stable=require_stable
        )

    # --- transactional offsets ------------------------------------------------------------

    def handle_txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetValue],
        callback: OffsetsCallback,
    ) -> None:
        """TxnOffsetCommit: store a transactional producer's offsets, pending until its
        transaction ends. ``callback`` gets the per-partition errors past the lock."""
        error = self._validate(group_id, "txn_offset_commit")
        if error is not None:
            callback(dict.fromkeys(offsets, error))
            return
        group = self.manager.get_or_add_group(group_id)
        with group.lock:
            failure = _txn_commit_error(group, member_id, group_instance_id, generation_id)
            if failure is not None:
                errors = dict.fromkeys(offsets, failure)
                group.lock.defer(lambda: callback(errors))
                return
            self.manager.store_offsets(
                group, offsets, callback, producer_id=producer_id, producer_epoch=producer_epoch
            )

    def on_transaction_completed(
        self, producer_id: int, partitions: Sequence[ReplicaTopicPartition], committed: bool
    ) -> None:
        """A marker of ``producer_id`` was appended to these ``__consumer_offsets``
        ``partitions``: commit (``committed``) or drop its pending offsets there.

        The ReplicaManager's ``txn_completion_listener``; call holding no group lock.
        """
        offsets_partitions = {tp.partition for tp in partitions if tp.topic == OFFSETS_TOPIC}
        if offsets_partitions:
            self.manager.handle_txn_completion(producer_id, offsets_partitions, committed)

    # --- ListGroups, DescribeGroups, DeleteGroups ----------------------------------------------

    def handle_list_groups(
        self, states: frozenset[str] = frozenset()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """Every group this broker coordinates (only those in ``states``, when given)."""
        if not self._active:
            return ErrorCode.coordinator_not_available, []
        error = (
            ErrorCode.coordinator_load_in_progress if self.manager.is_loading else ErrorCode.none
        )
        wanted = {s.lower() for s in states}
        overviews = []
        for group in self.manager.current_groups():
            with group.lock:
                overview = GroupOverview(group.group_id, group.protocol_type or "", group.state)
            if not wanted or overview.state.value.lower() in wanted:
                overviews.append(overview)
        return error, overviews

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """A group's state, protocol and members (the "Dead" summary for an unknown group)."""
        error = self._validate(group_id, "describe_groups")
        if error is not None:
            return error, _NO_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.none, _DEAD_GROUP
        with group.lock:
            stable = group.is_in(GroupState.STABLE)
            protocol = group.protocol_name if stable else None
            members = tuple(
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(protocol) if protocol is not None else b"",
                    m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            return ErrorCode.none, GroupSummary(
                group.state.value, group.protocol_type or "", protocol or "", members
            )

    def handle_delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """Delete empty groups and their offsets; NON_EMPTY_GROUP for groups with members."""
        results: dict[str, ErrorCode] = {}
        deleted: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate(group_id, "delete_groups")
            if error is not None:
                results[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None:
                results[group_id] = ErrorCode.group_id_not_found
                continue
            with group.lock:
                if group.is_in(GroupState.DEAD):
                    results[group_id] = ErrorCode.group_id_not_found
                elif not group.is_in(GroupState.EMPTY):
                    results[group_id] = ErrorCode.non_empty_group
                else:
                    group.transition_to(GroupState.DEAD, self._now_ms())
                    deleted.append(group)
                    results[group_id] = ErrorCode.none
        if deleted:
            removed = self.manager.cleanup_group_metadata(deleted, GroupMetadata.remove_all_offsets)
            _log.info("deleted groups %s and %d offsets", [g.group_id for g in deleted], removed)
        return results

    def handle_delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Delete a group's committed offsets of ``partitions`` (Kafka's OffsetDelete).

        An Empty group loses them all (and, left with none, the group itself); a consumer
        group with members keeps those of the topics it subscribes to
        (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others; any other group with members
        answers NON_EMPTY_GROUP. With a group-level error no partition is answered.
        """
        error = self._validate(group_id, "offset_delete")
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, {}
        errors: dict[TopicPartition, ErrorCode] = {}
        with group.lock:
            if group.is_in(GroupState.DEAD):
                return ErrorCode.group_id_not_found, {}
            if group.is_in(GroupState.EMPTY):
                eligible = list(partitions)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
                errors = {
                    tp: ErrorCode.group_subscribed_to_topic
                    for tp in partitions
                    if group.is_subscribed_to_topic(tp[0])
                }
            else:
                return ErrorCode.non_empty_group, {}
        if eligible:
            removed = self.manager.cleanup_group_metadata(
                [group], lambda target: target.remove_offsets(eligible)
            )
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
            _log.info("deleted %d offsets of group %s", removed, group_id)
        return ErrorCode.none, errors

    # --- expiry ----------------------------------------------------------------------------

    def cleanup_group_metadata(self) -> int:
        """Expire offsets whose retention ran out and drop groups left Empty without offsets.

        Kafka's periodic "delete-expired-group-metadata" task; returns how many offsets
        expired. Call holding no group lock.
        """
        now_ms = self._now_ms()
        retention_ms = self.config.offsets_retention_ms
        expired = self.manager.cleanup_group_metadata(
            self.manager.current_groups(),
            lambda group: group.remove_expired_offsets(now_ms, retention_ms),
        )
        if expired:
            _log.info(
                "removed %d expired offsets in %d milliseconds", expired, self._now_ms() - now_ms
            )
        return expired

    # --- emigration and immigration ---------------------------------------------------

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        with group.lock:
            _log.info("loaded group %s at generation %d", group.group_id, group.generation_id)
            if len(group.members) > self.config.group_max_size:
                # group.max.size was lowered: the rebalance keeps the first members to rejoin.
                self._prepare_rebalance(
                    group,
                    f"freshly-loaded group is over capacity ({self.config.group_max_size})",
                )
            for member in list(group.members.values()):
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        with group.lock:
            previous = group.state
            group.transition_to(GroupState.DEAD, self._now_ms())
            if previous is GroupState.PREPARING_REBALANCE:
                for member in group.members.values():
                    group.invoke_join_callback(
                        member, JoinGroupResult(ErrorCode.not_coordinator, member.member_id)
                    )
                self.join_purgatory.check_and_complete(GroupJoinKey(group.group_id))
            elif previous in {GroupState.STABLE, GroupState.COMPLETING_REBALANCE}:
                for member in group.members.values():
                    group.invoke_sync_callback(member, SyncGroupResult(ErrorCode.not_coordinator))
                    self.heartbeat_purgatory.check_and_complete(
                        MemberKey(group.group_id, member.member_id)
                    )
