"""The group coordinator's delayed operations: DelayedJoin, InitialDelayedJoin, DelayedHeartbeat.

Each is a purgatory operation whose lock is its group's ``GroupLock``, so the purgatory's
``try_complete`` and the coordinator's request handlers never interleave on one group.
The operations hold no logic of their own: they call back into the coordinator, which
takes the group lock itself (re-entrantly) because the timer's expiry path calls
``on_complete`` through ``force_complete`` without the operation's lock.

- **DelayedJoin** (purgatory "Rebalance", key ``GroupJoinKey``): completes when every
  member has rejoined (``try_complete``), or when the group's rebalance timeout expires;
  either way ``on_complete`` removes the dynamic members that did not rejoin and starts
  the next generation.
- **InitialDelayedJoin**: the first rebalance of an empty group waits
  ``group.initial.rebalance.delay.ms`` so that consumers started together land in one
  generation. It never completes early; each time it expires after a new member joined,
  it waits one more delay, up to the group's rebalance timeout in all (Kafka's rule).
- **DelayedHeartbeat** (purgatory "Heartbeat", key ``MemberKey``): one per member,
  completed by the member's next heartbeat (or by a rejoin, a sync, a leave); if the
  session timeout passes first, the member is removed and the group rebalances. For a
  "pending" member id (handed out with MEMBER_ID_REQUIRED) it completes when that id
  joins, and expiry forgets the id.

Concurrency: see ``tickwheel.coordinator.group``; these run on whatever thread completes or
expires them (the event loop in the broker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory, GroupJoinKey

if TYPE_CHECKING:
    from tickwheel.coordinator.group._coordinator import GroupCoordinator
    from tickwheel.coordinator.group._group import GroupMetadata


class DelayedJoin(DelayedOperation):
    """Waits for every member of a rebalancing group to rejoin, up to the rebalance timeout."""

    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms, lock=group.lock.rlock)
        self._coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        """Complete if every member has rejoined."""
        return self._coordinator.try_complete_join(self.group, self.force_complete)

    def on_expiration(self) -> None:
        """Nothing beyond ``on_complete``: members that did not rejoin are removed there."""

    def on_complete(self) -> None:
        """Start the next generation and answer the waiting JoinGroup requests."""
        self._coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group: waits, and waits again while members arrive."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        purgatory: DelayedOperationPurgatory[DelayedJoin],
        group: GroupMetadata,
        *,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self._purgatory = purgatory
        self._configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        """Never early: the point is to wait for more members."""
        return False

    def on_complete(self) -> None:
        """Wait once more if a member arrived and time remains, else complete the join."""
        group = self.group
        with group.lock:
            if group.new_member_added and self.remaining_ms != 0:
                group.new_member_added = False
                delay_ms = min(self._configured_delay_ms, self.remaining_ms)
                next_join = InitialDelayedJoin(
                    self._coordinator,
                    self._purgatory,
                    group,
                    configured_delay_ms=self._configured_delay_ms,
                    delay_ms=delay_ms,
                    remaining_ms=max(self.remaining_ms - delay_ms, 0),
                )
                self._purgatory.try_complete_else_watch(next_join, [GroupJoinKey(group.group_id)])
            else:
                super().on_complete()


class DelayedHeartbeat(DelayedOperation):
    """Expires a member whose session times out before its next heartbeat."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        member_id: str,
        *,
        is_pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms, lock=group.lock.rlock)
        self._coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        """Complete if the member heartbeated, left, or (pending) joined."""
        return self._coordinator.try_complete_heartbeat(
            self.group, self.member_id, self.is_pending, self.force_complete
        )

    def on_expiration(self) -> None:
        """The session timed out: remove the member and rebalance."""
        self._coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)

    def on_complete(self) -> None:
        """Nothing to do: the next DelayedHeartbeat is already scheduled by whoever completed it."""
