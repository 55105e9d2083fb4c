"""The controller's election rules, against what Kafka's controller decides."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.cluster import ElectionError
from tickwheel.cluster._election import (
    drop_dead_from_isr,
    elect_offline,
    elect_preferred,
    elect_unclean,
)
from tickwheel.replica import NO_LEADER, LeaderAndIsr

BROKERS = [0, 1, 2, 3]
EPOCH = 7


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], LeaderAndIsr, set[int]]:
    """Assigned replicas, a state over them and the live brokers."""
    replicas = draw(st.permutations(BROKERS))[: draw(st.integers(1, len(BROKERS)))]
    isr = draw(st.sets(st.sampled_from(replicas), min_size=1))
    leader = draw(st.sampled_from([*sorted(isr), NO_LEADER]))
    state = LeaderAndIsr(leader, leader_epoch=3, isr=tuple(sorted(isr)), version=5)
    live = draw(st.sets(st.sampled_from(BROKERS)))
    return replicas, state, live


@given(partitions(), st.booleans())
def test_offline_election_picks_the_first_live_in_sync_replica(
    case: tuple[list[int], LeaderAndIsr, set[int]], unclean: bool
) -> None:
    replicas, state, live = case
    new = elect_offline(replicas, state, live, unclean=unclean, controller_epoch=EPOCH)
    if state.leader in live:
        assert new is None
        return
    in_sync = [b for b in replicas if b in live and b in state.isr]
    if in_sync:
        assert new is not None
        assert new.leader == in_sync[0]
        assert set(new.isr) == {b for b in state.isr if b in live}
    elif unclean and live & set(replicas):
        assert new is not None
        assert new.leader == next(b for b in replicas if b in live)
        assert new.isr == (new.leader,)
    elif state.leader == NO_LEADER:
        assert new is None
        return
    else:
        # Offline, keeping the ISR so its last member can lead again on return.
        assert new is not None
        assert new.leader == NO_LEADER
        assert new.isr == state.isr
    assert new.leader_epoch == state.leader_epoch + 1
    assert new.version == state.version
    assert new.controller_epoch == EPOCH


@given(partitions())
def test_a_live_leader_loses_only_its_dead_followers(
    case: tuple[list[int], LeaderAndIsr, set[int]],
) -> None:
    _, state, live = case
    new = drop_dead_from_isr(state, live, controller_epoch=EPOCH)
    if state.leader not in live or all(b in live for b in state.isr):
        assert new is None
        return
    assert new is not None
    assert new.leader == state.leader
    assert new.leader_epoch == state.leader_epoch
    assert set(new.isr) == {b for b in state.isr if b in live}


def test_preferred_election_errors_as_kafka_answers() -> None:
    state = LeaderAndIsr(1, leader_epoch=2, isr=(0, 1, 2), version=4)
    moved = elect_preferred([0, 1, 2], state, {0, 1, 2}, controller_epoch=EPOCH)
    assert (moved.leader, moved.leader_epoch) == (0, 3)
    with pytest.raises(ElectionError) as not_needed:
        elect_preferred([1, 0, 2], state, {0, 1, 2}, controller_epoch=EPOCH)
    assert not_needed.value.error_code == ErrorCode.election_not_needed
    with pytest.raises(ElectionError) as out_of_sync:
        elect_preferred([3, 1], state, {1, 3}, controller_epoch=EPOCH)
    assert out_of_sync.value.error_code == ErrorCode.preferred_leader_not_available


def test_unclean_election_errors_as_kafka_answers() -> None:
    led = LeaderAndIsr(1, leader_epoch=2, isr=(1,), version=4)
    with pytest.raises(ElectionError) as not_needed:
        elect_unclean([0, 1], led, {0, 1}, controller_epoch=EPOCH)
    assert not_needed.value.error_code == ErrorCode.election_not_needed
    offline = LeaderAndIsr(NO_LEADER, leader_epoch=3, isr=(1,), version=5)
    assert elect_unclean([0, 1], offline, {0}, controller_epoch=EPOCH).leader == 0
    with pytest.raises(ElectionError) as nobody:
        elect_unclean([0, 1], offline, {2}, controller_epoch=EPOCH)
    assert nobody.value.error_code == ErrorCode.eligible_leaders_not_available
