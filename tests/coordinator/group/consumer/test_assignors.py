"""The server-side assignors against a reference model: every partition exactly once,
to a subscriber; ``uniform`` balanced within one and sticky; ``range`` contiguous."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator.group.consumer import (
    Assignment,
    MemberSpec,
    range_assign,
    uniform_assign,
)

TOPICS = [uuid.UUID(int=n + 1) for n in range(3)]

topic_sizes = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
member_ids = st.lists(
    st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=6, unique=True
)


def _partitions(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def _check_exactly_once(
    members: dict[str, MemberSpec], topics: dict[uuid.UUID, int], result: dict[str, Assignment]
) -> None:
    assert set(result) == set(members)
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for member_id, assignment in result.items():
        for tp in _partitions(assignment):
            assert tp not in seen, f"{tp} given to {seen.get(tp)} and {member_id}"
            assert tp[0] in members[member_id].subscribed_topic_ids
            seen[tp] = member_id
    expected = {
        (t, p)
        for t, n in topics.items()
        if any(t in m.subscribed_topic_ids for m in members.values())
        for p in range(n)
    }
    assert set(seen) == expected


@given(topic_sizes, member_ids)
def test_uniform_homogeneous_is_exact_and_balanced_within_one(
    topics: dict[uuid.UUID, int], ids: list[str]
) -> None:
    members = {m: MemberSpec(frozenset(topics), {}) for m in ids}
    result = uniform_assign(members, topics)
    _check_exactly_once(members, topics, result)
    counts = [len(_partitions(a)) for a in result.values()]
    assert max(counts) - min(counts) <= 1


@given(topic_sizes, member_ids, st.data())
def test_uniform_heterogeneous_assigns_every_partition_once(
    topics: dict[uuid.UUID, int], ids: list[str], data: st.DataObject
) -> None:
    members = {
        m: MemberSpec(frozenset(data.draw(st.sets(st.sampled_from(list(topics))))), {}) for m in ids
    }
    _check_exactly_once(members, topics, uniform_assign(members, topics))


@given(topic_sizes, member_ids)
def test_uniform_is_sticky_when_a_member_joins(
    topics: dict[uuid.UUID, int], ids: list[str]
) -> None:
    members = {m: MemberSpec(frozenset(topics), {}) for m in ids}
    before = uniform_assign(members, topics)
    grown = {m: MemberSpec(frozenset(topics), before[m]) for m in ids}
    grown["zz-new"] = MemberSpec(frozenset(topics), {})
    after = uniform_assign(grown, topics)
    _check_exactly_once(grown, topics, after)
    counts = [len(_partitions(a)) for a in after.values()]
    assert max(counts) - min(counts) <= 1
    for member_id in ids:
        # A member only gives partitions away; it never gets one another member had.
        assert _partitions(after[member_id]) <= _partitions(before[member_id])


@given(topic_sizes, member_ids, st.data())
def test_range_gives_contiguous_balanced_ranges(
    topics: dict[uuid.UUID, int], ids: list[str], data: st.DataObject
) -> None:
    members = {
        m: MemberSpec(frozenset(data.draw(st.sets(st.sampled_from(list(topics))))), {}) for m in ids
    }
    result = range_assign(members, topics)
    _check_exactly_once(members, topics, result)
    for topic_id, size in topics.items():
        subscribers = sorted(m for m, s in members.items() if topic_id in s.subscribed_topic_ids)
        if not subscribers:
            continue
        ranges = [sorted(result[m].get(topic_id, ())) for m in subscribers]
        flat = [p for r in ranges for p in r]
        assert flat == list(range(size)), "ranges follow member order without gaps"
        lengths = [len(r) for r in ranges]
        assert max(lengths) - min(lengths) <= 1


def test_range_co_partitions_topics_with_the_same_subscribers() -> None:
    a, b = TOPICS[0], TOPICS[1]
    members = {m: MemberSpec(frozenset({a, b}), {}) for m in ("m1", "m2")}
    result = range_assign(members, {a: 4, b: 4})
    assert result["m1"] == {a: frozenset({0, 1}), b: frozenset({0, 1})}
    assert result["m2"] == {a: frozenset({2, 3}), b: frozenset({2, 3})}
