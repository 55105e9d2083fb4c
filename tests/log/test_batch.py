"""Batch validation: each bad batch gets its Kafka error and nothing of it is written."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from tickwheel.log import (
    CorruptRecordError,
    InvalidRecordError,
    Log,
    LogConfig,
    LogError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)

from .batches import (
    CONTROL_FLAG,
    GZIP_CODEC,
    TRANSACTIONAL_FLAG,
    make_batch,
    with_offsets,
)

GOOD = make_batch([b"hello", b"world"])


def _corrupt(batch: bytes, position: int, value: int) -> bytes:
    data = bytearray(batch)
    data[position] = value
    return bytes(data)


def _with_length(batch: bytes, length: int) -> bytes:
    data = bytearray(batch)
    struct.pack_into(">i", data, 8, length)
    return bytes(data)


BAD_BATCHES: list[tuple[str, bytes, type[LogError], int]] = [
    ("crc mismatch", _corrupt(GOOD, len(GOOD) - 1, GOOD[-1] ^ 0xFF), CorruptRecordError, 2),
    ("crc field", _corrupt(GOOD, 18, GOOD[18] ^ 0x01), CorruptRecordError, 2),
    ("truncated records", GOOD[:-3], CorruptRecordError, 2),
    ("truncated header", GOOD[:40], CorruptRecordError, 2),
    ("too short for magic", GOOD[:10], CorruptRecordError, 2),
    ("length below header", _with_length(GOOD, 20), CorruptRecordError, 2),
    ("length past the end", _with_length(GOOD, len(GOOD)), CorruptRecordError, 2),
    ("magic 1", _corrupt(GOOD, 16, 1), InvalidRecordError, 87),
    ("magic 3", _corrupt(GOOD, 16, 3), CorruptRecordError, 2),
    (
        "count zero",
        make_batch([b"a"], records_count=0, last_offset_delta=-1),
        InvalidRecordError,
        87,
    ),
    ("count disagrees", make_batch([b"a", b"b"], records_count=3), InvalidRecordError, 87),
    ("delta disagrees", make_batch([b"a", b"b"], last_offset_delta=5), InvalidRecordError, 87),
    (
        "more records than bytes",
        make_batch([b"a"], records_count=40, last_offset_delta=39),
        InvalidRecordError,
        87,
    ),
    ("control batch", make_batch([b"a"], attributes=CONTROL_FLAG), InvalidRecordError, 87),
    (
        "transactional batch without a producer id",
        make_batch([b"a"], attributes=TRANSACTIONAL_FLAG),
        InvalidRecordError,
        87,
    ),
    (
        "idempotent without sequence",
        make_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=-1),
        InvalidRecordError,
        87,
    ),
    ("unknown codec", make_batch([b"a"], attributes=6), CorruptRecordError, 2),
    ("too large", make_batch([b"x" * 2000]), RecordTooLargeError, 10),
]


@pytest.mark.parametrize(
    ("batch", "error", "code"),
    [pytest.param(batch, error, code, id=name) for name, batch, error, code in BAD_BATCHES],
)
def test_bad_batch_is_rejected_and_nothing_is_written(
    open_log: Callable[..., Log], batch: bytes, error: type[LogError], code: int
) -> None:
    log = open_log(LogConfig(max_message_bytes=1000))
    log.append_as_leader(GOOD, 0)
    size_before = log.size_bytes
    with pytest.raises(error) as raised:
        log.append_as_leader(GOOD + batch, 0)
    assert raised.value.error_code == code
    assert log.log_end_offset == 2
    assert log.size_bytes == size_before
    assert log.read(0, 10_000).records.read_bytes() == with_offsets(GOOD, 0, 0)


def test_payload_larger_than_a_segment_is_record_list_too_large(
    open_log: Callable[..., Log],
) -> None:
    log = open_log(LogConfig(segment_bytes=200))
    with pytest.raises(RecordBatchTooLargeError) as raised:
        log.append_as_leader(GOOD * 3, 0)
    assert raised.value.error_code == 18
    assert log.log_end_offset == 0


def test_compressed_batch_passes_through_untouched(open_log: Callable[..., Log]) -> None:
    # The payload is not valid gzip: the log never looks inside a batch's records.
    batch = make_batch([b"opaque"], attributes=GZIP_CODEC)
    log = open_log()
    info = log.append_as_leader(batch, 4)
    assert (info.first_offset, info.last_offset) == (0, 0)
    assert log.read(0, 1000).records.read_bytes() == with_offsets(batch, 0, 4)


def test_empty_payload_appends_nothing(open_log: Callable[..., Log]) -> None:
    log = open_log()
    info = log.append_as_leader(b"", 0)
    assert (info.first_offset, info.num_messages, log.log_end_offset) == (-1, 0, 0)


def test_follower_rejects_a_corrupt_batch(open_log: Callable[..., Log]) -> None:
    log = open_log()
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(_corrupt(GOOD, 30, GOOD[30] ^ 0x10))
    assert log.log_end_offset == 0
    assert log.size_bytes == 0


def test_follower_may_exceed_max_message_bytes(open_log: Callable[..., Log]) -> None:
    # Kafka's followers ignore max.message.bytes: the leader already accepted the batch.
    log = open_log(LogConfig(max_message_bytes=100))
    batch = make_batch([b"y" * 500], base_offset=0)
    assert log.append_as_follower(batch).last_offset == 0
