"""Hypothesis strategies for damaged index files, shared by the segment and recovery tests.

Two kinds of damage the load checks must refuse: random bytes of random length, and
entries that look right (both fields strictly increasing, inside the segment) except
that the first or last entry has one field moved out of its bounds, such as a negative
position or one past the end of the file.
"""

from __future__ import annotations

import struct

from hypothesis import strategies as st

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
# The values a field of each struct code can hold.
_FIELD_LIMITS = {"i": (-(2**31), 2**31 - 1), "q": (-(2**63), 2**63 - 1)}
MAX_ENTRIES = 6


def random_bytes() -> st.SearchStrategy[bytes]:
    """Any bytes, of any length up to a few dozen entries."""
    return st.binary(max_size=MAX_ENTRIES * TIME_ENTRY.size)


@st.composite
def out_of_range_entries(
    draw: st.DrawFn,
    entry: struct.Struct,
    key_bounds: tuple[int, int],
    value_bounds: tuple[int, int],
) -> bytes:
    """Sorted entries within [low, high) bounds per field, then one first or last moved out."""
    count = draw(st.integers(1, MAX_ENTRIES))
    columns = [
        sorted(draw(st.sets(st.integers(low, high - 1), min_size=count, max_size=count)))
        for low, high in (key_bounds, value_bounds)
    ]
    field = draw(st.integers(0, 1))
    low, high = (key_bounds, value_bounds)[field]
    field_min, field_max = _FIELD_LIMITS[entry.format[1 + field]]
    moves = []
    if low > field_min:
        moves.append((0, st.integers(field_min, low - 1)))
    if high <= field_max:
        moves.append((-1, st.integers(high, field_max)))
    at, values = draw(st.sampled_from(moves))
    columns[field][at] = draw(values)
    return b"".join(entry.pack(key, value) for key, value in zip(*columns, strict=True))
