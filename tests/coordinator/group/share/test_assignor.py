"""Kafka's simple share assignor: every partition to at least one subscribed member."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator.group.share import assign

TOPICS = ("a", "b", "c")


@given(
    subscriptions=st.dictionaries(
        st.text("mnop", min_size=1, max_size=3),
        st.frozensets(st.sampled_from(TOPICS), min_size=1),
        max_size=8,
    ),
    partitions=st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 9)),
)
def test_every_partition_is_assigned_and_the_load_is_even(
    subscriptions: dict[str, frozenset[str]], partitions: dict[str, int]
) -> None:
    assignment = assign(subscriptions, partitions)
    assert set(assignment) == set(subscriptions)
    for topic in TOPICS:
        members = [m for m, topics in subscriptions.items() if topic in topics]
        count = partitions.get(topic, 0)
        owned = [p for m in members for p in assignment[m].get(topic, [])]
        if not members or count == 0:
            assert owned == []
            continue
        # Every partition somewhere, nothing else, and never to an unsubscribed member.
        assert set(owned) == set(range(count))
        for member, topics in subscriptions.items():
            if topic not in topics:
                assert topic not in assignment[member]
        loads = [len(assignment[m].get(topic, [])) for m in members]
        assert max(loads) - min(loads) <= 1
        if count < len(members):
            assert loads == [1] * len(members)  # a partition shared by several members
    assert assign(subscriptions, partitions) == assignment  # deterministic


def test_more_members_than_partitions_share_them() -> None:
    assignment = assign(
        {"m1": frozenset("a"), "m2": frozenset("a"), "m3": frozenset("a")}, {"a": 1}
    )
    assert assignment == {"m1": {"a": [0]}, "m2": {"a": [0]}, "m3": {"a": [0]}}
