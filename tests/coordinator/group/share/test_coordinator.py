"""ShareGroupCoordinator on a manual clock: joins, epochs, errors, sessions on the wheel."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import ShareGroupHeartbeatResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from tickwheel.coordinator.group.share import ShareGroupConfig, ShareGroupCoordinator
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

SESSION_MS = 3_000
TOPICS = {"t": 2, "u": 1}


class Coordinator:
    def __init__(self, max_size: int = 200) -> None:
        self.clock = ManualClock()
        self.timer = SystemTimer("sessions", clock=self.clock, executor=InlineExecutor())
        self.left: list[tuple[str, str, bool]] = []
        self.classic = {"classic-group"}
        self.coordinator = ShareGroupCoordinator(
            ShareGroupConfig(
                group_share_session_timeout_ms=SESSION_MS,
                group_share_min_session_timeout_ms=1_000,
                group_share_heartbeat_interval_ms=1_000,
                group_share_min_heartbeat_interval_ms=1_000,
                group_share_max_size=max_size,
            ),
            self.timer,
            topic_id=lambda name: uuid.uuid5(uuid.NAMESPACE_DNS, name) if name in TOPICS else None,
            partition_count=lambda name: TOPICS.get(name, 0),
            member_left=lambda g, m, expired: self.left.append((g, m, expired)),
            classic_group_exists=lambda g: g in self.classic,
        )

    def beat(
        self, member: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g"
    ) -> ShareGroupHeartbeatResponse:
        return self.coordinator.heartbeat(
            ShareGroupHeartbeatRequest(
                group_id=GroupId(group),
                member_id=member,
                member_epoch=i32(epoch),
                subscribed_topic_names=None if topics is None else tuple(map(TopicName, topics)),
            )
        )

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.timer.advance_clock(0)


def partitions(answer: ShareGroupHeartbeatResponse) -> dict[str, list[int]]:
    assert answer.assignment is not None
    return {str(tp.topic_id): list(tp.partitions) for tp in answer.assignment.topic_partitions}


T = str(uuid.uuid5(uuid.NAMESPACE_DNS, "t"))


def test_members_join_get_epochs_and_share_the_partitions() -> None:
    c = Coordinator()
    first = c.beat("a", 0, ("t",))
    assert first.error_code == ErrorCode.none
    assert first.member_epoch == 2  # the join and the first assignment
    assert partitions(first) == {T: [0, 1]}
    second = c.beat("b", 0, ("t",))
    assert partitions(second) == {T: [1]}
    again = c.beat("a", first.member_epoch)
    assert again.member_epoch == second.member_epoch
    assert partitions(again) == {T: [0]}
    steady = c.beat("a", again.member_epoch)
    assert steady.assignment is None  # unchanged: not repeated
    third = c.beat("c", 0, ("t",))
    assert partitions(third) == {T: [0]}  # three members, two partitions: shared
    described = c.coordinator.describe(["g", "nope"])
    assert described[0].group_state == "Stable"
    assert len(described[0].members) == 3
    assert described[1].error_code == ErrorCode.group_id_not_found


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "group", "error"),
    [
        ("a", 0, None, "g", ErrorCode.invalid_request),
        ("a", 0, (), "g", ErrorCode.invalid_request),
        ("", 0, ("t",), "g", ErrorCode.invalid_request),
        ("a", 0, ("t",), "", ErrorCode.invalid_request),
        ("a", -2, ("t",), "g", ErrorCode.invalid_request),
        ("a", 5, None, "g", ErrorCode.unknown_member_id),
        ("a", 0, ("t",), "classic-group", ErrorCode.group_id_not_found),
    ],
)
def test_heartbeat_errors(
    member: str, epoch: int, topics: tuple[str, ...] | None, group: str, error: ErrorCode
) -> None:
    assert Coordinator().beat(member, epoch, topics, group).error_code == error


def test_a_stale_epoch_is_fenced_and_a_full_group_refuses() -> None:
    c = Coordinator(max_size=1)
    joined = c.beat("a", 0, ("t",))
    assert c.beat("a", joined.member_epoch - 1).error_code == ErrorCode.fenced_member_epoch
    assert c.beat("b", 0, ("t",)).error_code == ErrorCode.group_max_size_reached


def test_a_session_expires_unless_a_heartbeat_resets_it() -> None:
    c = Coordinator()
    epoch = c.beat("a", 0, ("t",)).member_epoch
    c.beat("b", 0, ("u",))
    assert c.timer.size == 2  # one session task per member
    c.advance(SESSION_MS - 1)
    epoch = c.beat("a", epoch).member_epoch
    c.advance(1)
    assert c.left == [("g", "b", True)]
    c.advance(SESSION_MS - 2)  # a's session runs from its heartbeat at SESSION_MS - 1
    assert len(c.left) == 1
    c.advance(1)
    assert c.left == [("g", "b", True), ("g", "a", True)]
    (listed,) = c.coordinator.list_groups(frozenset())
    assert (listed.group_id, listed.group_state, listed.group_type) == ("g", "Empty", "share")
    assert c.timer.size == 0


def test_leaving_tells_the_listener_and_cancels_the_session() -> None:
    c = Coordinator()
    c.beat("a", 0, ("t",))
    left = c.beat("a", -1)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert c.left == [("g", "a", False)]
    assert c.timer.size == 0
    assert c.coordinator.list_groups(frozenset({"stable"})) == []


def test_a_subscription_change_or_a_new_partition_moves_the_group_epoch() -> None:
    c = Coordinator()
    epoch = c.beat("a", 0, ("t",)).member_epoch
    moved = c.beat("a", epoch, ("t", "u"))
    assert moved.member_epoch > epoch
    assert len(partitions(moved)) == 2
    TOPICS["u"] = 3
    try:
        grown = c.beat("a", moved.member_epoch)
        assert grown.member_epoch > moved.member_epoch
        assert sorted(map(len, partitions(grown).values())) == [2, 3]
    finally:
        TOPICS["u"] = 1
