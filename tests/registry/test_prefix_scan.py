"""The prefix scan: both builds find the distinct key and value prefixes the record
decoder reads, and refuse records that do not fill their section alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.record import parse_header, record_prefixes, records_section
from tickwheel.registry import _prefix_scan, _prefix_scan_build

PREFIX = st.sampled_from([b"", b"\x00", b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x02"])
RECORDS = st.lists(
    st.tuples(
        st.none() | st.builds(bytes.__add__, PREFIX, st.binary(max_size=8)),
        st.none() | st.builds(bytes.__add__, PREFIX, st.binary(max_size=300)),
    ),
    min_size=1,
    max_size=30,
)
SCANS = [_prefix_scan.distinct_prefixes, _prefix_scan_build.distinct_prefixes]


@settings(max_examples=200, deadline=None)
@given(RECORDS, st.sampled_from([0, 1, 4]), st.integers(0, 4))
def test_both_builds_find_the_distinct_prefixes_of_every_record(
    records: list[tuple[bytes | None, bytes | None]], codec: int, cut: int
) -> None:
    batch = make_keyed_batch(records, codec=codec)
    header = parse_header(batch, 0)
    section = records_section(batch, header)
    expected = set(record_prefixes(batch, header, 5))
    assert expected == {
        (None if k is None else k[:5], None if v is None else v[:5]) for k, v in records
    }
    outcomes = []
    for scan in SCANS:
        assert scan(section, header.records_count, 5) == expected
        # Cut short, or with a byte too many: both builds refuse it alike.
        damaged = section[: len(section) - cut] if cut else section + b"\x00"
        try:
            outcome: object = scan(damaged, header.records_count, 5)
        except (IndexError, ValueError) as exc:
            outcome = type(exc).__name__
        outcomes.append(outcome)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] in {"IndexError", "ValueError"}


def test_the_build_in_use_is_named() -> None:
    if not _prefix_scan_build.COMPILED:
        pytest.skip(f"the prefix scan's build here: {_prefix_scan_build.BUILD}")
    assert _prefix_scan_build.BUILD == "compiled: mypyc"
