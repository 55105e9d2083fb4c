"""Reconciliation as a property: whatever members join, leave, heartbeat or lag, and
however the topic grows, no partition is ever owned by two members at once, and once
everyone heartbeats the group settles on the target: every partition owned exactly
once, balanced within one, every member STABLE at the target epoch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.coordinator.group.consumer import ConsumerGroupState, MemberState

from .harness import TOPIC, TOPIC_ID, Client, ConsumerHarness

NAMES = ("a", "b", "c", "d")

operations = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.sampled_from(NAMES)),
        st.tuples(st.just("leave"), st.sampled_from(NAMES)),
        st.tuples(st.just("beat"), st.sampled_from(NAMES)),
        st.tuples(st.just("grow"), st.integers(1, 3)),
    ),
    max_size=40,
)


def _assert_disjoint(clients: dict[str, Client]) -> None:
    owners: dict[int, str] = {}
    for name, client in clients.items():
        for partition in client.partitions:
            assert partition not in owners, f"{partition} owned by {owners[partition]} and {name}"
            owners[partition] = name


@settings(max_examples=150, deadline=None)
@given(operations)
def test_no_partition_has_two_owners_and_the_group_settles(ops: list[tuple[str, object]]) -> None:
    h = ConsumerHarness()
    partitions = 4
    clients: dict[str, Client] = {}
    for op, arg in ops:
        if op == "join" and arg not in clients:
            clients[str(arg)] = client = Client(h, str(arg))
            client.beat()
        elif op == "leave" and arg in clients:
            h.ok(str(arg), -1)
            del clients[str(arg)]
        elif op == "beat" and arg in clients:
            clients[str(arg)].beat()
        elif op == "grow":
            partitions += int(str(arg))
            h.topics.add(TOPIC, partitions)
        _assert_disjoint(clients)
    for _ in range(2 * len(clients) + 2):
        for client in clients.values():
            client.beat()
            _assert_disjoint(clients)
    if not clients:
        return
    owned = [client.partitions for client in clients.values()]
    assert frozenset().union(*owned) == frozenset(range(partitions))
    assert max(map(len, owned)) - min(map(len, owned)) <= 1
    described = h.coordinator.describe("g")
    assert described.state == ConsumerGroupState.STABLE.value
    for member in described.members:
        assert member.member.state is MemberState.STABLE
        assert member.member.member_epoch == described.assignment_epoch
        assert dict(member.member.assigned_partitions) == dict(member.target)
    assert all(set(c.owned) <= {TOPIC_ID} for c in clients.values())
