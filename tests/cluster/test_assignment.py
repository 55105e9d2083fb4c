"""Replica assignment: Kafka's AdminUtils table, and its invariants for any input."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.cluster import AssignmentError, assign_replicas


def test_matches_kafkas_example_for_five_brokers() -> None:
    # The table in AdminUtils' documentation (start index 0, shift 0).
    assignment = assign_replicas(range(5), 10, 3, start_index=0, replica_shift=0)
    assert assignment == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_broker_ids_are_used_sorted_not_as_indexes() -> None:
    assignment = assign_replicas([30, 10, 20], 3, 3, start_index=0, replica_shift=0)
    assert assignment == {0: (10, 20, 30), 1: (20, 30, 10), 2: (30, 10, 20)}


def test_new_partitions_continue_the_numbering() -> None:
    assignment = assign_replicas([0, 1, 2], 2, 2, start_partition=3, rng=random.Random(1))
    assert sorted(assignment) == [3, 4]


def test_random_start_spreads_leaders_over_many_topics() -> None:
    rng = random.Random(7)
    leaders = Counter(assign_replicas(range(3), 1, 3, rng=rng)[0][0] for _ in range(300))
    assert set(leaders) == {0, 1, 2}
    assert min(leaders.values()) > 50


@pytest.mark.parametrize(
    ("brokers", "partitions", "replication", "error"),
    [
        ([0, 1, 2], 1, 4, ErrorCode.invalid_replication_factor),
        ([0, 1, 2], 1, 0, ErrorCode.invalid_replication_factor),
        ([0, 1, 2], 0, 1, ErrorCode.invalid_partitions),
        ([], 1, 1, ErrorCode.invalid_replication_factor),
    ],
)
def test_impossible_assignments_carry_kafkas_error(
    brokers: list[int], partitions: int, replication: int, error: ErrorCode
) -> None:
    with pytest.raises(AssignmentError) as raised:
        assign_replicas(brokers, partitions, replication)
    assert raised.value.error_code == error


@given(
    brokers=st.sets(st.integers(0, 1000), min_size=1, max_size=8),
    partitions=st.integers(1, 40),
    data=st.data(),
)
def test_every_partition_gets_distinct_live_replicas_and_leaders_balance(
    brokers: set[int], partitions: int, data: st.DataObject
) -> None:
    replication = data.draw(st.integers(1, len(brokers)))
    seed = data.draw(st.integers(0, 2**32))
    assignment = assign_replicas(brokers, partitions, replication, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == replication
        assert len(set(replicas)) == replication
        assert set(replicas) <= brokers
    # Round-robin leaders: no broker leads more than one partition above its share.
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1
