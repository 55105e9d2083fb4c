"""ShareSessionCache: the epochs of ShareFetch and ShareAcknowledge, as Kafka checks them."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.share_delivery import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    ShareSessionCache,
    ShareSessionError,
    next_epoch,
)

T = uuid.UUID(int=3)


def error_of(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(ShareSessionError) as caught:
        call()
    return caught.value.error_code


def test_a_session_opens_at_epoch_zero_and_moves_one_epoch_per_request() -> None:
    cache = ShareSessionCache(10)
    session = cache.for_fetch("g", "m", INITIAL_EPOCH, [(T, 0), (T, 1)], [], acknowledging=False)
    assert list(session.partitions) == [(T, 0), (T, 1)]
    assert session.epoch == 1
    cache.for_fetch("g", "m", 1, [(T, 2)], [(T, 0)], acknowledging=True)
    assert list(session.partitions) == [(T, 1), (T, 2)]
    cache.for_acknowledge("g", "m", 2)
    assert session.epoch == 3
    assert error_of(lambda: cache.for_fetch("g", "m", 2, [], [], acknowledging=False)) == (
        ErrorCode.invalid_share_session_epoch
    )


def test_epoch_rules() -> None:
    cache = ShareSessionCache(1)
    assert error_of(lambda: cache.for_fetch("g", "m", 1, [], [], acknowledging=False)) == (
        ErrorCode.share_session_not_found
    )
    assert error_of(
        lambda: cache.for_fetch("g", "m", INITIAL_EPOCH, [], [], acknowledging=True)
    ) == (ErrorCode.invalid_request)
    assert error_of(lambda: cache.for_acknowledge("g", "m", INITIAL_EPOCH)) == (
        ErrorCode.invalid_share_session_epoch
    )
    assert error_of(lambda: cache.for_acknowledge("g", "m", FINAL_EPOCH)) == (
        ErrorCode.share_session_not_found
    )
    cache.for_fetch("g", "m", INITIAL_EPOCH, [(T, 0)], [], acknowledging=False)
    assert error_of(
        lambda: cache.for_fetch("g", "n", INITIAL_EPOCH, [], [], acknowledging=False)
    ) == (ErrorCode.share_session_limit_reached)
    assert error_of(
        lambda: cache.for_fetch("g", "m", FINAL_EPOCH, [(T, 1)], [], acknowledging=False)
    ) == (ErrorCode.invalid_request)
    final = cache.for_fetch("g", "m", FINAL_EPOCH, [], [], acknowledging=True)
    assert cache.remove("g", "m") is final
    assert len(cache) == 0


def test_a_new_initial_request_replaces_the_session() -> None:
    cache = ShareSessionCache(1)
    cache.for_fetch("g", "m", INITIAL_EPOCH, [(T, 0)], [], acknowledging=False)
    cache.for_fetch("g", "m", 1, [], [], acknowledging=False)
    again = cache.for_fetch("g", "m", INITIAL_EPOCH, [(T, 5)], [], acknowledging=False)
    assert (again.epoch, list(again.partitions)) == (1, [(T, 5)])
    assert cache.members_of("g") == ["m"]


def test_the_epoch_wraps_to_one() -> None:
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(5) == 6


def test_a_full_cache_evicts_the_oldest_session_of_a_departed_member() -> None:
    cache = ShareSessionCache(2)
    cache.for_fetch("g", "a", INITIAL_EPOCH, [], [], acknowledging=False)
    cache.for_fetch("g", "b", INITIAL_EPOCH, [], [], acknowledging=False)
    cache.mark_departed("g", "b")
    cache.mark_departed("g", "nobody")  # no session: nothing to mark
    cache.for_fetch("g", "c", INITIAL_EPOCH, [], [], acknowledging=False)
    assert (cache.get("g", "a") is not None, cache.get("g", "b"), len(cache)) == (True, None, 2)
    assert error_of(
        lambda: cache.for_fetch("g", "d", INITIAL_EPOCH, [], [], acknowledging=False)
    ) == (ErrorCode.share_session_limit_reached)


def test_the_sessions_of_a_closed_connection_close_with_it() -> None:
    cache = ShareSessionCache(3)
    cache.for_fetch("g", "a", INITIAL_EPOCH, [], [], acknowledging=False, connection_id=1)
    cache.for_fetch("g", "b", INITIAL_EPOCH, [], [], acknowledging=False, connection_id=1)
    cache.for_fetch("g", "c", INITIAL_EPOCH, [], [], acknowledging=False, connection_id=2)
    closed = cache.remove_connection(1)
    assert sorted(s.member_id for s in closed) == ["a", "b"]
    assert (cache.get("g", "a"), cache.get("g", "b"), len(cache)) == (None, None, 1)
    assert cache.remove_connection(1) == []
