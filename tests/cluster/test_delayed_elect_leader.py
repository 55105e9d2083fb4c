"""DelayedElectLeader: answered once every elected leader is in place, or timed out."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tickwheel.cluster._delayed_elect_leader import DelayedElectLeader
from tickwheel.replica import TopicPartition

MOVED = TopicPartition("t", 0)
REFUSED = TopicPartition("t", 1)


def _operation(
    leaders: dict[TopicPartition, int], answers: list[dict[TopicPartition, ErrorCode]]
) -> DelayedElectLeader:
    return DelayedElectLeader(
        30_000,
        {MOVED: 2},
        {MOVED: ErrorCode.none, REFUSED: ErrorCode.preferred_leader_not_available},
        lambda tp: leaders.get(tp, -1),
        answers.append,
    )


def test_it_completes_when_the_new_leader_is_in_place() -> None:
    leaders = {MOVED: 1}
    answers: list[dict[TopicPartition, ErrorCode]] = []
    operation = _operation(leaders, answers)
    assert not operation.try_complete()
    assert answers == []
    leaders[MOVED] = 2
    assert operation.try_complete()
    assert answers == [{MOVED: ErrorCode.none, REFUSED: ErrorCode.preferred_leader_not_available}]


def test_a_leader_not_in_place_by_the_timeout_answers_request_timed_out() -> None:
    answers: list[dict[TopicPartition, ErrorCode]] = []
    operation = _operation({MOVED: 1}, answers)
    assert not operation.try_complete()
    operation.run()  # what the purgatory's timer does at the timeout
    assert answers == [
        {MOVED: ErrorCode.request_timed_out, REFUSED: ErrorCode.preferred_leader_not_available}
    ]
