"""``TransactionIndex``: Kafka's 34-byte entries, collection, truncation, rebuilding."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tickwheel.log import AbortedTxn
from tickwheel.log._txn_index import TransactionIndex, parse_entries


def test_entries_are_kafkas_34_bytes(tmp_path: Path) -> None:
    index = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"))
    index.append(AbortedTxn(7, 10, 20, 21))
    index.append(AbortedTxn(8, 12, 25, 26))
    data = Path(index.path).read_bytes()
    assert data == struct.pack(">hqqqq", 0, 7, 10, 20, 21) + struct.pack(">hqqqq", 0, 8, 12, 25, 26)
    assert parse_entries(data) == index.entries


def test_no_file_until_the_first_entry(tmp_path: Path) -> None:
    index = TransactionIndex(str(tmp_path / "x.txnindex"))
    index.flush()
    assert not Path(index.path).exists()


def test_append_refuses_a_marker_that_does_not_advance(tmp_path: Path) -> None:
    index = TransactionIndex(str(tmp_path / "x.txnindex"))
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_collect_overlap_and_completion(tmp_path: Path) -> None:
    index = TransactionIndex(str(tmp_path / "x.txnindex"))
    index.append(AbortedTxn(1, 0, 4, 5))
    index.append(AbortedTxn(2, 6, 9, 10))
    index.append(AbortedTxn(3, 11, 20, 21))
    # [5, 10): txn 1 ended before, txn 2 overlaps; txn 2's LSO 10 reaches the bound.
    assert index.collect(5, 10) == ([AbortedTxn(2, 6, 9, 10)], True)
    # [0, 100): all overlap; no entry's LSO reaches 100: the next segment may have more.
    found, complete = index.collect(0, 100)
    assert [entry.producer_id for entry in found] == [1, 2, 3]
    assert not complete


def test_truncate_and_torn_file_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TransactionIndex(str(path))
    for i in range(3):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(16)
    assert [entry.producer_id for entry in index.entries] == [0, 1]
    assert parse_entries(path.read_bytes()) == index.entries
    # A torn tail on disk is dropped by the reader and rewritten by replace().
    path.write_bytes(path.read_bytes() + b"\x00\x01\x02")
    assert parse_entries(path.read_bytes()) == index.entries
    index.replace(list(index.entries))
    assert len(path.read_bytes()) == 2 * 34
    index.replace([])
    assert not path.exists()
