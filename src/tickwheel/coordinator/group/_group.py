"""One consumer group's metadata and the state machine of Kafka's classic group protocol.

States and the moves between them (Kafka's GroupState)::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲        │ (no member left)                            │ leader's SyncGroup
      └─────────────────┼────────┘                                             ▼
                        └──────── join, leave, member expired ◀──────────── Stable
    any state ──group deleted or emigrated──▶ Dead

- ``PreparingRebalance``: members rejoin; a DelayedJoin waits for all of them.
- ``CompletingRebalance``: the generation is bumped and the protocol chosen; members
  wait in SyncGroup for the leader's assignment.
- ``Stable``: assignments handed out; members heartbeat.

A generation id counts completed joins. The leader is the first member to join (re-elected
among rejoined members if it did not rejoin); only it receives all members' metadata.
The protocol (assignor) is chosen by vote: among the protocols every member supports,
each member votes for the first of its own list, and the most votes win.

Static members (``group.instance.id``) keep their place across restarts: a rejoin with a
known instance id replaces the old member id instead of rebalancing.

Committed offsets live here too, each with the log offset of the batch that wrote it
(``CommitRecordMetadataAndOffset``), with the commits still being appended
(``pending_offset_commits``), and with the offsets transactional producers committed
(TxnOffsetCommit) that wait for their transaction's end (``pending_txn_offsets``, per
producer id, apart from the committed ones). A commit marker moves a producer's pending
offsets into the committed ones, an abort marker drops them; an offset only ever
replaces one written earlier in the log (Kafka's ``olderThan`` on append offsets), so a
plain commit appended after a transactional one wins whatever order they complete in.
Pending transactional offsets never expire, and keep their group from being removed.
Offsets expire as in Kafka 2.1+ (KIP-211; see
``remove_expired_offsets``): a group's offsets are kept while it has members, and are
dropped ``offsets.retention.minutes`` after it became Empty; a group that only stores
offsets loses each one that long after its commit. A consumer group knows the topics
its members subscribe to (``subscribed_topics``, read from their protocol metadata at
each generation), so that offsets of topics it stopped consuming can expire while it is
Stable (KIP-496) and OffsetDelete can refuse the topics it consumes.

Concurrency contract: every field of a GroupMetadata and of its members is read and
written only while holding ``group.lock``. The lock is re-entrant and is also the lock of
the group's DelayedJoin and DelayedHeartbeat operations, so a purgatory completing one
of them and a request handler touching the group exclude each other. Response callbacks
are never run under the lock: ``GroupLock.defer`` queues them and the outermost release
runs them after the lock is free (see ``tickwheel.coordinator.group`` for the whole lock story).
"""

from __future__ import annotations

import enum
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group._consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    subscription_topics,
)
from tickwheel.coordinator.group._records import OffsetValue

_log = logging.getLogger(__name__)

NO_GENERATION = -1
NO_MEMBER_ID = ""
NO_PROTOCOL = ""
NO_LEADER = ""

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """The states of a classic group, valued with Kafka's names (as DescribeGroups shows)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupState.validPreviousStates.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True, slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and the log offset of the batch that wrote it (None: not yet
    appended, for a pending transactional offset whose append is in flight)."""

    appended_batch_offset: int | None
    value: OffsetValue

    def older_than(self, other: CommitRecordMetadataAndOffset) -> bool:
        """True if this one was appended before ``other`` (both must be appended)."""
        if self.appended_batch_offset is None or other.appended_batch_offset is None:
            raise ValueError("older_than compares appended offsets only")
        return self.appended_batch_offset < other.appended_batch_offset


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """What a JoinGroup request is answered with."""

    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """What a SyncGroup request is answered with."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]
Protocols = tuple[tuple[str, bytes], ...]


class GroupLock:
    """A group's re-entrant lock whose outermost release runs the actions deferred under it.

    ``rlock`` is the ``threading.RLock`` itself, handed to the group's delayed operations
    as their shared lock. The depth count that decides "outermost" sees only sections
    entered through this object, which is sound because the purgatory takes ``rlock``
    only inside such a section: every ``try_complete_else_watch`` and
    ``check_and_complete`` of the coordinator is called with the group locked, and the
    timer's expiry path takes no lock before calling into the coordinator.
    """

    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self._depth = 0  # written only by the holder
        self._deferred: list[Callable[[], None]] = []

    def __enter__(self) -> GroupLock:
        self.rlock.acquire()
        self._depth += 1
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth:
            self.rlock.release()
            return
        deferred, self._deferred = self._deferred, []
        self.rlock.release()
        for action in deferred:
            try:
                action()
            except Exception:
                # One failing response callback must not lose the others.
                _log.exception("deferred group action failed")

    @property
    def held(self) -> bool:
        """True while some thread is inside a section of this lock (for assertions)."""
        return self._depth > 0

    def defer(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the lock is fully released; the caller must hold the lock."""
        if not self._depth:
            raise RuntimeError("GroupLock.defer called without holding the lock")
        self._deferred.append(action)


@dataclass(slots=True, eq=False)
class MemberMetadata:
    """One member of a group. Guarded by its group's lock."""

    member_id: str
    group_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    # Set while a new member waits for its first join to complete: only its join timeout
    # (not the session timeout) can expire it then.
    is_new: bool = False
    is_leaving: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_static(self) -> bool:
        """True for a member with a ``group.instance.id``."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """True while its JoinGroup request waits for the rebalance."""
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """True while its SyncGroup request waits for the leader's assignment."""
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """The protocols it supports, in its order of preference."""
        return tuple(name for name, _ in self.protocols)

    def metadata_for(self, protocol_name: str) -> bytes:
        """Its metadata for ``protocol_name``."""
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def matches(self, protocols: Protocols) -> bool:
        """True if ``protocols`` is exactly what it joined with."""
        return self.protocols == protocols

    def vote(self, candidates: Iterable[str]) -> str:
        """Its first preferred protocol among ``candidates``."""
        allowed = set(candidates)
        for name in self.protocol_names:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

    def has_satisfied_heartbeat(self) -> bool:
        """True if its current DelayedHeartbeat may complete without expiring the member."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            # A member in the middle of a rebalance is alive by definition.
            return True
        return self.heartbeat_satisfied


class GroupMetadata:
    """A classic consumer group: members, generation, protocol, leader and committed offsets.

    Every method must be called with ``lock`` held.
    """

    def __init__(
        self, group_id: str, *, state: GroupState = GroupState.EMPTY, now_ms: int = 0
    ) -> None:
        self.group_id = group_id
        self.lock = GroupLock()
        self.state = state
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        # True while an initial rebalance has seen a new member since its last delay.
        self.new_member_added = False
        self.offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = {}
        # Commits appended but not yet answered, counted per partition: never expired.
        self.pending_offset_commits: Counter[TopicPartition] = Counter()
        # Transactional offsets per producer id, waiting for the transaction's marker.
        self.pending_txn_offsets: dict[
            int, dict[TopicPartition, CommitRecordMetadataAndOffset]
        ] = {}
        # None while unknown: not a consumer group, or a subscription that does not parse.
        self.subscribed_topics: frozenset[str] | None = None

    # --- state -----------------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        """True if the group is in ``state``."""
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state``; raises if Kafka's state machine does not allow the move."""
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        """True if a rebalance may start from the current state."""
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # --- membership ------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        """True if ``member_id`` is a member."""
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        """True if ``member_id`` leads the group."""
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        """True if ``member_id`` was handed out with MEMBER_ID_REQUIRED and has not joined."""
        return member_id in self.pending_members

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """A fresh member id: ``<instance id or client id>-<uuid>`` as Kafka makes them."""
        return f"{group_instance_id or client_id}-{uuid.uuid4()}"

    def supports_protocols(self, protocol_type: str, protocol_names: Iterable[str]) -> bool:
        """True if a member with these protocols may join (same type, one protocol in common)."""
        names = set(protocol_names)
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names
        )

    def add(self, member: MemberMetadata, callback: JoinCallback | None) -> None:
        """Add ``member``; the first member sets the protocol type and leads."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        """Remove a member (and its static mapping); a new leader is picked if it led."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.supported_protocols.subtract(member.protocol_names)
        self.supported_protocols += Counter()  # drop zero counts
        if member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)

    def update_member(
        self, member: MemberMetadata, protocols: Protocols, callback: JoinCallback
    ) -> None:
        """Record a rejoin: new protocols and the JoinGroup callback to answer."""
        self.supported_protocols.subtract(member.protocol_names)
        self.supported_protocols += Counter()
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names)
        if member.awaiting_join is None:
            self.num_members_awaiting_join += 1
        member.awaiting_join = callback

    def replace_static_member(self, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id, answering the old id's waiting requests."""
        member = self.members.pop(old_member_id)
        fenced = JoinGroupResult(ErrorCode.fenced_instance_id, old_member_id)
        self.invoke_join_callback(member, fenced)
        self.invoke_sync_callback(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_member_id
        return member

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """True if ``group_instance_id`` is known under a different member id."""
        if group_instance_id is None:
            return False
        known = self.static_members.get(group_instance_id)
        return known is not None and known != member_id

    def has_all_members_joined(self) -> bool:
        """True when every member is awaiting join and no handed-out id is still pending."""
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        """Members that have not rejoined the current rebalance."""
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader has rejoined; False if no member has."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of any member: how long a DelayedJoin waits."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer."""
        candidates = [n for n, c in self.supported_protocols.items() if c == len(self.members)]
        if not candidates:
            raise RuntimeError(f"group {self.group_id}: no protocol common to all members")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(candidates, key=lambda name: (votes[name], -candidates.index(name)))

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with members, Empty without."""
        self.generation_id += 1
        self.protocol_name = self.select_protocol() if self.members else None
        self.subscribed_topics = self.compute_subscribed_topics()
        if self.members:
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> tuple[JoinedMember, ...]:
        """Every member's metadata for the chosen protocol: what the leader assigns from."""
        if self.protocol_name is None:
            raise RuntimeError(f"group {self.group_id}: no protocol chosen yet")
        protocol = self.protocol_name
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(protocol))
            for m in self.members.values()
        )

    # --- subscriptions and committed offsets ------------------------------------------

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members of a consumer group subscribe to (None: not known)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscribed = subscription_topics(member.metadata_for(self.protocol_name))
            if subscribed is None:
                _log.warning(
                    "group %s: member %s's %s subscription does not parse; its subscribed "
                    "topics are unknown",
                    self.group_id,
                    member.member_id,
                    self.protocol_name,
                )
                return None
            topics |= subscribed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """True if a member consumes ``topic``, or if the group's subscriptions are unknown."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    @property
    def has_offsets(self) -> bool:
        """True if the group has committed offsets, commits being appended, or pending
        transactional offsets."""
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_txn_offsets)
        )

    def committed_offset(self, tp: TopicPartition) -> OffsetValue | None:
        """The committed offset of ``tp``, if any."""
        committed = self.offsets.get(tp)
        return None if committed is None else committed.value

    def _maybe_put_offset(self, tp: TopicPartition, offset: CommitRecordMetadataAndOffset) -> None:
        current = self.offsets.get(tp)
        if current is None or current.older_than(offset):
            self.offsets[tp] = offset

    def has_pending_offset_commits(self, tp: TopicPartition) -> bool:
        """True if a plain commit of ``tp`` is being appended or a transaction has one pending
        (OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT then)."""
        return tp in self.pending_offset_commits or any(
            tp in offsets for offsets in self.pending_txn_offsets.values()
        )

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        """True if ``producer_id`` has transactional offsets pending in this group."""
        return producer_id in self.pending_txn_offsets

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: Mapping[TopicPartition, OffsetValue]
    ) -> None:
        """Note transactional offsets whose append starts now (pending, not yet appended)."""
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        for tp, value in offsets.items():
            pending[tp] = CommitRecordMetadataAndOffset(None, value)

    def on_txn_offset_commit_append(
        self, producer_id: int, offsets: Mapping[TopicPartition, OffsetValue], batch_offset: int
    ) -> None:
        """Their append succeeded at ``batch_offset``: they wait for the marker now.

        An offset replaced meanwhile by a later TxnOffsetCommit of the same producer, or
        removed (OffsetDelete, the partition emigrated), is left alone.
        """
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for tp, value in offsets.items():
            current = pending.get(tp)
            if current is not None and current.value == value:
                pending[tp] = CommitRecordMetadataAndOffset(batch_offset, value)

    def fail_pending_txn_offset_commit(
        self, producer_id: int, partitions: Iterable[TopicPartition]
    ) -> None:
        """Their append failed: forget them (the client retries)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is None:
            return
        for tp in partitions:
            pending.pop(tp, None)
        if not pending:
            del self.pending_txn_offsets[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        """The producer's transaction ended: on commit its appended offsets become committed
        (each only over an offset appended before it), on abort they are dropped."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None or not is_commit:
            return
        for tp, offset in pending.items():
            if offset.appended_batch_offset is None:
                # Kafka raises here: a marker cannot follow an offset commit whose append
                # has not completed, since EndTxn waits for the TxnOffsetCommit answer.
                _log.error(
                    "group %s: producer %d committed %s before its offset commit was appended",
                    self.group_id,
                    producer_id,
                    tp,
                )
                continue
            self._maybe_put_offset(tp, offset)

    def prepare_offset_commit(self, partitions: Iterable[TopicPartition]) -> None:
        """Note commits whose append starts now (they are pending until it completes)."""
        for tp in partitions:
            self.pending_offset_commits[tp] += 1

    def complete_offset_commit(
        self,
        offsets: Mapping[TopicPartition, OffsetValue],
        committed: bool,
        batch_offset: int | None = None,
    ) -> None:
        """A commit's append finished (at ``batch_offset`` if ``committed``): cache its
        offsets if still wanted, unless an offset appended after them is already cached.

        An offset deleted while its commit was in flight (OffsetDelete, DeleteGroups) is
        no longer pending and is not cached: its tombstone follows the commit in the log.
        """
        for tp, value in offsets.items():
            pending = self.pending_offset_commits[tp]
            if not pending:
                continue
            if pending == 1:
                del self.pending_offset_commits[tp]
            else:
                self.pending_offset_commits[tp] = pending - 1
            if committed and batch_offset is not None and not self.is_in(GroupState.DEAD):
                self._maybe_put_offset(tp, CommitRecordMetadataAndOffset(batch_offset, value))

    def remove_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetValue]:
        """Drop the offsets of ``partitions`` (and their pending commits, transactional ones
        too); return those dropped."""
        removed: dict[TopicPartition, OffsetValue] = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for producer_id, pending in list(self.pending_txn_offsets.items()):
                pending.pop(tp, None)
                if not pending:
                    del self.pending_txn_offsets[producer_id]
            committed = self.offsets.pop(tp, None)
            if committed is not None:
                removed[tp] = committed.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetValue]:
        """Drop every committed offset (DeleteGroups); return them."""
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetValue]:
        """Kafka's removeExpiredOffsets: drop the offsets whose retention ran out; return them.

        - Empty group with a protocol type: retention counts from the moment it became
          Empty (its ``state_timestamp_ms``; a stored -1, Kafka's "unknown", falls back to
          each offset's commit time), so every offset goes at once.
        - Stable consumer group that knows its subscriptions: offsets of topics no member
          subscribes to expire by their commit time; the others are kept.
        - No protocol type (a group that only stores offsets): each offset by its commit time.
        - Anything else (a rebalance in progress): nothing expires.

        An offset whose commit is still being appended never expires; pending transactional
        offsets are not committed offsets, so they cannot.
        """
        excluded: frozenset[str] = frozenset()
        empty_since_ms: int | None = None  # None: each offset counts from its commit
        if self.protocol_type is not None and self.is_in(GroupState.EMPTY):
            if self.state_timestamp_ms >= 0:
                empty_since_ms = self.state_timestamp_ms
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_in(GroupState.STABLE)
        ):
            excluded = self.subscribed_topics
        elif self.protocol_type is not None:
            return {}
        expired = [
            tp
            for tp, committed in self.offsets.items()
            if tp[0] not in excluded
            and tp not in self.pending_offset_commits
            and now_ms
            - (committed.value.commit_timestamp_ms if empty_since_ms is None else empty_since_ms)
            >= retention_ms
        ]
        return {tp: self.offsets.pop(tp).value for tp in expired}

    # --- answering waiting requests (after the lock is released) --------------------

    def invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer ``member``'s waiting JoinGroup, if any; True if there was one."""
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        self.lock.defer(lambda: callback(result))
        return True

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer ``member``'s waiting SyncGroup, if any; True if there was one."""
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        self.lock.defer(lambda: callback(result))
        return True
