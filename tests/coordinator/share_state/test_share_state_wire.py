"""The share coordinator on the wire (keys 83-87), against a real broker: states kept
in ``__share_group_state``, fenced by leader and state epochs, and there after a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.coordinator.share_state import SHARE_GROUP_STATE_TOPIC
from tickwheel.protocol import encode_topic_id
from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

FIND_COORDINATOR, INITIALIZE, READ, WRITE, DELETE, SUMMARY = 10, 83, 84, 85, 86, 87
TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")
STATE_PARTITIONS = 3


def _config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
        }
    )


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    with BackgroundBroker(_config(tmp_path)) as running:
        yield running


def _one(body: Any) -> Any:
    (result,) = body.results
    (partition,) = result.partitions
    return partition


def _request(
    client: WireClient, api_key: int, partition: dict[str, Any], version: int = 0, group: str = "g"
) -> Any:
    return _one(
        client.call(
            api_key,
            version,
            {"group_id": group, "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}]},
        )
    )


def _batch(first: int, last: int, state: int, count: int) -> dict[str, int]:
    return {
        "first_offset": first,
        "last_offset": last,
        "delivery_state": state,
        "delivery_count": count,
    }


def _write(
    client: WireClient,
    partition: int,
    *,
    state_epoch: int = 1,
    leader_epoch: int = 0,
    start_offset: int = 10,
    batches: list[dict[str, int]] | None = None,
) -> ErrorCode:
    answer = _request(
        client,
        WRITE,
        {
            "partition": partition,
            "state_epoch": state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "state_batches": [_batch(12, 14, 2, 1), _batch(15, 15, 0, 3)]
            if batches is None
            else batches,
        },
    )
    return ErrorCode(answer.error_code)


def _find_coordinators(client: WireClient, partitions: range, group: str = "g") -> Any:
    """FindCoordinator v6 for share keys: creates ``__share_group_state`` on first use."""
    keys = [f"{group}:{encode_topic_id(TOPIC_ID)}:{p}" for p in partitions]
    body = client.call(FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": keys})
    return body.coordinators


def _read(client: WireClient, partition: int, leader_epoch: int = 0) -> Any:
    return _request(client, READ, {"partition": partition, "leader_epoch": leader_epoch})


def test_a_state_is_initialized_written_read_summarised_and_deleted(
    broker: BackgroundBroker,
) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        (found,) = _find_coordinators(client, range(1))
        assert (found.error_code, found.node_id, found.port) == (ErrorCode.none, 0, broker.port)
        never = _read(client, 0)
        assert (never.error_code, never.start_offset, never.state_epoch) == (ErrorCode.none, -1, 0)
        init = _request(client, INITIALIZE, {"partition": 0, "state_epoch": 1, "start_offset": 5})
        assert init.error_code == ErrorCode.none
        started = _read(client, 0)
        assert (started.start_offset, started.state_epoch, started.state_batches) == (5, 1, ())
        assert _write(client, 0) == ErrorCode.none
        read = _read(client, 0)
        assert read.start_offset == 10
        assert [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in read.state_batches
        ] == [(12, 14, 2, 1), (15, 15, 0, 3)]
        summary = _request(client, SUMMARY, {"partition": 0, "leader_epoch": -1})
        assert (summary.error_code, summary.state_epoch, summary.start_offset) == (
            ErrorCode.none,
            1,
            10,
        )
        assert _request(client, DELETE, {"partition": 0}).error_code == ErrorCode.none
        assert _read(client, 0).start_offset == -1
    finally:
        client.close()


def test_old_leader_and_state_epochs_are_fenced(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        _find_coordinators(client, range(2))
        assert _write(client, 1, state_epoch=2, leader_epoch=4) == ErrorCode.none
        assert _write(client, 1, state_epoch=2, leader_epoch=3) == ErrorCode.fenced_leader_epoch
        assert _write(client, 1, state_epoch=1, leader_epoch=4) == ErrorCode.fenced_state_epoch
        assert _read(client, 1, leader_epoch=3).error_code == ErrorCode.fenced_leader_epoch
        same_epoch = _request(
            client, INITIALIZE, {"partition": 1, "state_epoch": 2, "start_offset": 0}
        )
        assert same_epoch.error_code == ErrorCode.fenced_state_epoch
        reset = _request(client, INITIALIZE, {"partition": 1, "state_epoch": 3, "start_offset": 0})
        assert reset.error_code == ErrorCode.none
        # The reset fences every writer of the old state epoch.
        assert _write(client, 1, state_epoch=2, leader_epoch=4) == ErrorCode.fenced_state_epoch
        assert _write(client, 1, state_epoch=3, leader_epoch=5) == ErrorCode.none
    finally:
        client.close()


def test_a_malformed_share_key_is_an_invalid_request(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        body = client.call(
            FIND_COORDINATOR,
            6,
            {"key_type": 2, "coordinator_keys": ["no-colons", "g:not-an-id:0", "g::1", ""]},
        )
        assert [c.error_code for c in body.coordinators] == [ErrorCode.invalid_request] * 4
    finally:
        client.close()


def test_a_request_before_the_state_topic_exists_is_not_coordinated(
    broker: BackgroundBroker,
) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        assert _read(client, 0).error_code == ErrorCode.not_coordinator
    finally:
        client.close()


def test_bad_requests_get_invalid_request(broker: BackgroundBroker) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        _find_coordinators(client, range(1))
        unknown_state = _write(client, 0, batches=[_batch(10, 10, 3, 1)])
        assert unknown_state == ErrorCode.invalid_request
        # States no share-partition can have: a forged one, rebuilt offset by offset on
        # the next load, would hold its leader's event loop.
        for impossible in (
            [_batch(12, 11, 0, 1)],  # first after last
            [_batch(5, 6, 0, 1)],  # before the start offset
            [_batch(10, 1 << 62, 2, 1)],  # 2^62 offsets
            [_batch(10, 10, 0, -1)],  # a negative delivery count
        ):
            assert _write(client, 0, batches=impossible) == ErrorCode.invalid_request
        assert _write(client, 0, start_offset=-1, batches=[]) == ErrorCode.invalid_request
        assert _read(client, 0).start_offset == -1  # nothing was stored
        no_group = _request(client, READ, {"partition": 0, "leader_epoch": 0}, group="")
        assert no_group.error_code == ErrorCode.invalid_request
    finally:
        client.close()


def test_states_survive_a_restart_and_the_topic_is_internal(tmp_path: Path) -> None:
    with BackgroundBroker(_config(tmp_path)) as first:
        client = WireClient(first.bootstrap_servers)
        try:
            _find_coordinators(client, range(6))
            for partition in range(6):
                start = 100 + partition
                batches = [_batch(start + 2, start + 4, 2, 1), _batch(start + 5, start + 5, 0, 3)]
                written = _write(client, partition, start_offset=start, batches=batches)
                assert written == ErrorCode.none
            assert _request(client, DELETE, {"partition": 5}).error_code == ErrorCode.none
            assert _write(client, 4, start_offset=444, state_epoch=2, batches=[]) == ErrorCode.none
        finally:
            client.close()
        producer = Producer({"bootstrap.servers": first.bootstrap_servers})
        errors: list[Any] = []
        producer.produce(
            SHARE_GROUP_STATE_TOPIC, b"x", on_delivery=lambda error, _m: errors.append(error)
        )
        producer.flush(10)
        assert [error.code() for error in errors] == [KafkaError.TOPIC_EXCEPTION]
    with BackgroundBroker(_config(tmp_path)) as second:
        client = WireClient(second.bootstrap_servers)
        try:
            starts = [int(_read(client, p).start_offset) for p in range(6)]
            assert starts == [100, 101, 102, 103, 444, -1]
            assert [b.delivery_count for b in _read(client, 2).state_batches] == [1, 3]
        finally:
            client.close()
