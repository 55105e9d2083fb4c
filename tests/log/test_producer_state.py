"""Idempotent producers: retries deduplicated, gaps and old epochs rejected, across restarts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tickwheel.log import InvalidProducerEpochError, Log, LogConfig, OutOfOrderSequenceError
from tickwheel.log._producer_state import last_sequence

from .batches import make_batch

Opener = Callable[..., Log]
PID = 4242


def _batch(sequence: int, count: int = 2, *, epoch: int = 0, pid: int = PID) -> bytes:
    return make_batch(
        [b"v%d" % i for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def test_retry_of_any_of_the_last_five_batches_returns_its_first_offsets(open_log: Opener) -> None:
    log = open_log()
    firsts = [log.append_as_leader(_batch(2 * i), 0) for i in range(6)]
    end = log.log_end_offset
    size = log.size_bytes
    for i in range(1, 6):
        retry = log.append_as_leader(_batch(2 * i), 0)
        assert retry.duplicate
        assert (retry.first_offset, retry.last_offset) == (
            firsts[i].first_offset,
            firsts[i].last_offset,
        )
    assert (log.log_end_offset, log.size_bytes) == (end, size)
    # The oldest batch fell out of the five retained: its retry is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_batch(0), 0)


def test_sequence_gap_is_out_of_order(open_log: Opener) -> None:
    log = open_log()
    log.append_as_leader(_batch(0), 0)
    with pytest.raises(OutOfOrderSequenceError) as raised:
        log.append_as_leader(_batch(3), 0)
    assert raised.value.error_code == 45
    assert log.log_end_offset == 2


def test_old_epoch_is_rejected_and_new_epoch_restarts_at_zero(open_log: Opener) -> None:
    log = open_log()
    log.append_as_leader(_batch(0, epoch=1), 0)
    with pytest.raises(InvalidProducerEpochError) as raised:
        log.append_as_leader(_batch(2, epoch=0), 0)
    assert raised.value.error_code == 47
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_batch(2, epoch=2), 0)
    assert log.append_as_leader(_batch(0, epoch=2), 0).first_offset == 2


def test_unknown_producer_may_start_anywhere_and_producers_are_independent(
    open_log: Opener,
) -> None:
    log = open_log()
    assert log.append_as_leader(_batch(100), 0).first_offset == 0
    assert log.append_as_leader(_batch(0, pid=1), 0).first_offset == 2
    assert log.append_as_leader(_batch(102), 0).first_offset == 4


def test_batches_of_one_payload_chain_their_sequences(open_log: Opener) -> None:
    log = open_log()
    info = log.append_as_leader(_batch(0) + _batch(2) + _batch(4), 0)
    assert (info.first_offset, info.last_offset) == (0, 5)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(_batch(6) + _batch(9), 0)
    assert log.log_end_offset == 6


def test_sequences_wrap_after_int32_max() -> None:
    top = 2**31 - 1
    assert last_sequence(top - 1, 1) == top
    assert last_sequence(top, 1) == 0
    assert last_sequence(top - 1, 3) == 1


def test_wrapped_sequence_is_in_order(open_log: Opener) -> None:
    log = open_log()
    log.append_as_leader(_batch(2**31 - 2, count=2), 0)
    assert log.append_as_leader(_batch(0), 0).first_offset == 2


def test_dedup_survives_a_restart(open_log: Opener) -> None:
    config = LogConfig(segment_bytes=400)
    log = open_log(config)
    firsts = [log.append_as_leader(_batch(2 * i), 0) for i in range(8)]
    log.close()
    reopened = open_log(config)
    retry = reopened.append_as_leader(_batch(14), 0)
    assert retry.duplicate
    assert retry.first_offset == firsts[7].first_offset
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(_batch(17), 0)
    assert reopened.append_as_leader(_batch(16), 0).first_offset == 16


def test_truncation_rebuilds_producer_state(open_log: Opener) -> None:
    log = open_log()
    for i in range(4):
        log.append_as_leader(_batch(2 * i), 0)
    log.truncate_to(4)
    # Sequences 4..7 are gone with the truncation: 4 is next again, not a duplicate.
    info = log.append_as_leader(_batch(4), 0)
    assert not info.duplicate
    assert info.first_offset == 4


def test_follower_records_producer_state(open_log: Opener) -> None:
    log = open_log()
    batch = make_batch([b"a"], base_offset=0, producer_id=PID, producer_epoch=0, base_sequence=0)
    log.append_as_follower(batch)
    retry = log.append_as_leader(_batch(0, count=1), 0)
    assert retry.duplicate
    assert retry.first_offset == 0
