"""``_wire.lenient``: kio's response classes with Kafka's -1 "no time" read as None."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import OutOfBoundValue

from tickwheel.cli._client import CommandError
from tickwheel.cli._wire import lenient, split_address
from tickwheel.protocol import ApiKey, build_entity, response_schema

DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS
STARTED = datetime.datetime(2026, 11, 25, 10, 0, tzinfo=datetime.UTC)


def _answer(start: datetime.datetime | None) -> bytes:
    """A DescribeTransactions v0 body whose one state starts at ``start`` (None: -1)."""
    cls = lenient(response_schema(DESCRIBE_TRANSACTIONS, 0))
    body = build_entity(
        cls,
        {
            "throttle_time": 0,
            "transaction_states": [
                {
                    "error_code": 0,
                    "transactional_id": "tx",
                    "transaction_state": "Empty",
                    "transaction_timeout": 60_000,
                    "transaction_start_time": start,
                    "producer_id": 7,
                    "producer_epoch": 0,
                    "topics": [{"topic": "t", "partitions": [0, 1]}],
                }
            ],
        },
    )
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, body)
    return buffer.getvalue()


def test_kio_refuses_minus_one_and_the_lenient_class_reads_none() -> None:
    frame = _answer(None)
    with pytest.raises(OutOfBoundValue):
        entity_reader(response_schema(DESCRIBE_TRANSACTIONS, 0))(frame, 0)
    body, size = entity_reader(lenient(response_schema(DESCRIBE_TRANSACTIONS, 0)))(frame, 0)
    assert size == len(frame)
    (state,) = body.transaction_states
    assert state.transaction_start_time is None
    assert (state.producer_id, state.topics[0].partitions) == (7, (0, 1))


def test_a_real_time_reads_the_same_as_kio_reads_it() -> None:
    frame = _answer(STARTED)
    strict, _ = entity_reader(response_schema(DESCRIBE_TRANSACTIONS, 0))(frame, 0)
    body, _ = entity_reader(lenient(response_schema(DESCRIBE_TRANSACTIONS, 0)))(frame, 0)
    assert body.transaction_states[0].transaction_start_time == STARTED
    assert strict.transaction_states[0].transaction_start_time == STARTED


def test_addresses() -> None:
    assert split_address("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert split_address("[::1]:9092") == ("::1", 9092)
    with pytest.raises(CommandError, match="expected HOST:PORT"):
        split_address("localhost")
