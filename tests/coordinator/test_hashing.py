"""The group -> ``__consumer_offsets`` partition mapping matches Java's arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.coordinator import java_string_hash, partition_for


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Hello World", -862545276),
        ("polygenelubricants", -(2**31)),  # Java's famous Integer.MIN_VALUE hash
        ("\U0001f600", 1772899),  # a surrogate pair hashes as two UTF-16 units
    ],
)
def test_java_string_hash(text: str, java_hash: int) -> None:
    assert java_string_hash(text) == java_hash


def test_min_value_hash_maps_to_partition_zero() -> None:
    # Math.abs(Integer.MIN_VALUE) is negative in Java; Kafka's Utils.abs makes it 0.
    assert partition_for("polygenelubricants", 50) == 0


def test_known_partitions() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("Hello World", 50) == 862545276 % 50


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_partition_is_in_range(group_id: str, partitions: int) -> None:
    assert 0 <= partition_for(group_id, partitions) < partitions


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for("g", 0)
