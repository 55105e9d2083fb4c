"""The eligible leader replica rules (``_elr``): Kafka's examples, and a model of a
partition under strict min ISR in which no committed record is ever lost."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from tickwheel.cluster._elr import cleared, effective_min_isr, elect, tracked
from tickwheel.replica import NO_LEADER, LeaderAndIsr

REPLICAS = (1, 2, 3)
EPOCH = 4


def test_min_isr_is_capped_at_the_replication_factor() -> None:
    assert effective_min_isr(2, 3) == 2
    assert effective_min_isr(3, 1) == 1


def test_replicas_leaving_an_isr_below_min_isr_become_eligible() -> None:
    full = LeaderAndIsr(1, isr=(1, 2, 3))
    at_min = tracked(full, full.with_isr((1, 2)), min_isr=2)
    assert (at_min.elr, at_min.last_known_elr) == ((), ())
    below = tracked(at_min, at_min.with_isr((1,)), min_isr=2)
    assert below.elr == (2,)
    # The ISR grows back to min ISR: nobody needs to be eligible any more.
    back = tracked(below, below.with_isr((1, 3)), min_isr=2)
    assert back.elr == ()


def test_a_dead_leader_leaves_an_empty_isr_and_an_elr_member_leads_when_back() -> None:
    state = LeaderAndIsr(1, leader_epoch=5, isr=(1,), elr=(2,))
    offline = elect(REPLICAS, state, {3}, min_isr=2, unclean=False, controller_epoch=EPOCH)
    assert offline == LeaderAndIsr(
        NO_LEADER, 6, (), EPOCH, state.version, elr=(1, 2), last_known_elr=(1,)
    )
    back = elect(REPLICAS, offline, {2, 3}, min_isr=2, unclean=False, controller_epoch=EPOCH)
    assert back == LeaderAndIsr(2, 7, (2,), EPOCH, state.version, elr=(1,))


def test_an_unclean_shutdown_takes_a_broker_out_of_the_elr() -> None:
    offline = LeaderAndIsr(NO_LEADER, 6, (), elr=(1, 2), last_known_elr=(1,))
    returned = elect(
        REPLICAS,
        offline,
        {2},
        min_isr=2,
        unclean=False,
        controller_epoch=EPOCH,
        unclean_shutdown={2},
    )
    assert returned is not None
    assert (returned.leader, returned.isr, returned.elr) == (NO_LEADER, (), (1,))
    # Back in the next round, it is no longer eligible: nothing to elect.
    assert elect(REPLICAS, returned, {2}, min_isr=2, unclean=False, controller_epoch=EPOCH) is None


def test_the_last_known_leader_leads_once_no_replica_is_eligible() -> None:
    state = LeaderAndIsr(NO_LEADER, 6, (), last_known_elr=(1,))
    new = elect(REPLICAS, state, {1, 3}, min_isr=2, unclean=False, controller_epoch=EPOCH)
    assert new == LeaderAndIsr(1, 7, (1,), EPOCH)


def test_an_unclean_election_clears_the_elr() -> None:
    old = LeaderAndIsr(NO_LEADER, 6, (1,), elr=(2,))
    assert tracked(old, LeaderAndIsr(3, 7, (3,), elr=(2,)), min_isr=2).elr == ()


def test_clearing_gives_a_leaderless_partition_its_eligible_replicas_as_isr() -> None:
    offline = LeaderAndIsr(NO_LEADER, 6, (), elr=(2,), last_known_elr=(1,))
    assert cleared(offline, controller_epoch=EPOCH) == LeaderAndIsr(NO_LEADER, 6, (1, 2), EPOCH)
    led = LeaderAndIsr(1, 6, (1,), elr=(2,))
    assert cleared(led, controller_epoch=EPOCH) == LeaderAndIsr(1, 6, (1,), EPOCH)
    assert cleared(LeaderAndIsr(1, 6, (1, 2)), controller_epoch=EPOCH) is None


# -- the model -----------------------------------------------------------------------


@dataclass
class Cluster:
    """One partition over ``REPLICAS`` and what each broker holds of its records."""

    min_isr: int
    state: LeaderAndIsr = field(default_factory=lambda: LeaderAndIsr(1, isr=REPLICAS))
    live: set[int] = field(default_factory=lambda: set(REPLICAS))
    # Whether the broker holds every committed record.
    complete: dict[int, bool] = field(default_factory=lambda: dict.fromkeys(REPLICAS, True))
    # Brokers whose last stop was unclean (they tell the controller when they register).
    crashed: set[int] = field(default_factory=set)
    unclean_election: bool = False

    def broker_change(self, unclean_shutdown: set[int]) -> None:
        new = elect(
            REPLICAS,
            self.state,
            self.live,
            min_isr=self.min_isr,
            unclean=False,
            controller_epoch=EPOCH,
            unclean_shutdown=unclean_shutdown,
        )
        if new is not None:
            old = self.state
            if new.leader not in (old.leader, NO_LEADER):
                self.unclean_election |= new.leader not in (*old.isr, *old.elr)
            self.state = new

    def step(self, action: str, broker: int) -> None:
        state = self.state
        leading = state.leader in self.live
        if action in ("stop", "crash") and broker in self.live:
            self.live.discard(broker)
            if action == "crash":
                # Records it acknowledged but had not flushed are gone.
                self.complete[broker] = False
                self.crashed.add(broker)
            self.broker_change(set())
        elif action == "start" and broker not in self.live:
            self.live.add(broker)
            unclean = {broker} & self.crashed
            self.crashed.discard(broker)
            if unclean:
                self.broker_change(unclean)
            self.broker_change(set())
        elif action == "produce" and leading and len(state.isr) >= self.min_isr:
            # Strict min ISR: a record is committed once every ISR member has it.
            for replica in REPLICAS:
                self.complete[replica] = replica in state.isr and self.complete[replica]
        elif action == "catch_up" and leading and broker in self.live and broker not in state.isr:
            self.complete[broker] = self.complete[state.leader]
            self.state = tracked(state, state.with_isr((*state.isr, broker)), min_isr=self.min_isr)
        elif action == "lag" and leading and broker in state.isr and broker != state.leader:
            shrunk = tuple(b for b in state.isr if b != broker)
            self.state = tracked(state, state.with_isr(shrunk), min_isr=self.min_isr)


ACTIONS = st.tuples(
    st.sampled_from(["stop", "crash", "start", "produce", "catch_up", "lag"]),
    st.sampled_from(REPLICAS),
)


@given(st.integers(1, 3), st.lists(ACTIONS, max_size=40))
def test_no_committed_record_is_lost_without_an_unclean_election(
    min_isr: int, actions: list[tuple[str, int]]
) -> None:
    model = Cluster(min_isr)
    for action, broker in actions:
        model.step(action, broker)
        state = model.state
        assert not set(state.isr) & set(state.elr)
        assert len(state.isr) < min_isr or state.elr == ()
        assert state.leader == NO_LEADER or state.leader in state.isr
        if not model.unclean_election:
            eligible = (*state.isr, *state.elr)
            assert all(model.complete[b] for b in eligible if b not in model.crashed), (
                model,
                action,
                broker,
            )


def test_an_unclean_election_may_pass_over_the_eligible_replicas() -> None:
    offline = LeaderAndIsr(NO_LEADER, 6, (), elr=(1,), last_known_elr=(1,))
    new = elect(REPLICAS, offline, {2}, min_isr=1, unclean=True, controller_epoch=EPOCH)
    assert new == LeaderAndIsr(2, 7, (2,), EPOCH)
    assert elect(REPLICAS, offline, {2}, min_isr=1, unclean=False, controller_epoch=EPOCH) is None
