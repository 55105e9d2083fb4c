"""Fault rules on a running broker, seen on the wire: errors per partition with the rest
answered normally, delays on the manual clock, closes, drops, throttles, counts."""

from __future__ import annotations

import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from replica.records import batch
from server.wire import METADATA_ALL_TOPICS, WireClient, create_topic, nothing_yet
from tickwheel.faults import FaultPlan
from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.timer import ManualClock

pytestmark = pytest.mark.integration

PRODUCE = 0
FETCH = 1
METADATA = 3
HEARTBEAT = 12
CLIENT_ID = "wire-test"
# A stop ends in-flight requests at once; a held answer must not make it wait.
STOP_BOUND_S = 10.0


def produce(client: WireClient, topic: str, partitions: list[int]) -> dict[int, Any]:
    body = client.call(
        PRODUCE,
        9,
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [
                        {"index": index, "records": batch(b"v")} for index in partitions
                    ],
                }
            ],
        },
    )
    assert [response.name for response in body.responses] == [topic]
    return {p.index: p for p in body.responses[0].partition_responses}


def test_an_error_hits_its_partitions_and_the_rest_is_appended(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "split", partitions=3)
        handle = tickwheel_broker.faults.add(
            api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="split", partition=1, count=1
        )
        answered = produce(client, "split", [0, 1, 2])
        assert {index: p.error_code for index, p in answered.items()} == {
            0: ErrorCode.none,
            1: ErrorCode.not_leader_or_follower,
            2: ErrorCode.none,
        }
        assert (answered[1].base_offset, answered[0].base_offset) == (-1, 0)
        assert handle.hits == 1
        assert handle.spent
        assert tickwheel_broker.faults.handles == []
        again = produce(client, "split", [0, 1, 2])
        assert {index: p.base_offset for index, p in again.items()} == {0: 1, 1: 0, 2: 1}
    finally:
        client.close()


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"tickwheel.metrics.port": "0"}


def test_a_request_wide_error_and_its_removal(
    tickwheel_broker: BackgroundBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "tickwheel.faults")
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        handle = tickwheel_broker.faults.add(api="Heartbeat", error="COORDINATOR_LOAD_IN_PROGRESS")
        request = {"group_id": "g", "generation_id": 1, "member_id": "m"}
        for _ in range(2):
            assert client.call(HEARTBEAT, 4, request).error_code == (
                ErrorCode.coordinator_load_in_progress
            )
        handle.remove()
        assert client.call(HEARTBEAT, 4, request).error_code != (
            ErrorCode.coordinator_load_in_progress
        )
        assert handle.hits == 2
    finally:
        client.close()
    applied = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fault applied")]
    assert applied == [
        "fault applied: Heartbeat error COORDINATOR_LOAD_IN_PROGRESS to v4 "
        f"(correlation id {n}, client {CLIENT_ID})"
        for n in (1, 2)
    ]
    url = f"http://127.0.0.1:{tickwheel_broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as scraped:
        lines = scraped.read().decode().splitlines()
    assert 'tickwheel_faults_applied_total{api="Heartbeat",kind="error"} 2.0' in lines


def test_a_metadata_error_names_the_topic_and_keeps_the_brokers(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "fine")
        create_topic(client, "sick")
        tickwheel_broker.faults.add(api="Metadata", error="LEADER_NOT_AVAILABLE", topic="sick")
        body = client.call(METADATA, 12, METADATA_ALL_TOPICS)
        topics = {topic.name: topic for topic in body.topics}
        assert topics["sick"].error_code == ErrorCode.leader_not_available
        assert topics["sick"].partitions == ()
        assert topics["fine"].error_code == ErrorCode.none
        assert len(topics["fine"].partitions) == 1
        assert [broker.port for broker in body.brokers] == [tickwheel_broker.port]
    finally:
        client.close()


def test_a_delay_holds_the_answer_until_the_manual_clock_moves(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        tickwheel_manual_broker.faults.add(api="Metadata", kind="delay", delay_ms=30_000)
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        tickwheel_clock.advance(29_999)
        assert nothing_yet(client)
        tickwheel_clock.advance(1)
        client.receive(METADATA, 12)
    finally:
        client.close()


def test_a_close_before_handling_appends_nothing(tickwheel_broker: BackgroundBroker) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "closed")
        tickwheel_broker.faults.add(api="Produce", kind="close", count=1)
        client.send(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {"name": "closed", "partition_data": [{"index": 0, "records": batch(b"v")}]}
                ],
            },
        )
        assert client.is_closed_by_broker()
    finally:
        client.close()
    again = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        assert produce(again, "closed", [0])[0].base_offset == 0
    finally:
        again.close()


def test_a_dropped_answer_after_handling_keeps_the_append_and_the_connection(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "dropped")
        tickwheel_broker.faults.add(api="Produce", kind="drop", phase="after", count=1)
        client.send(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {"name": "dropped", "partition_data": [{"index": 0, "records": batch(b"v")}]}
                ],
            },
        )
        assert nothing_yet(client)
        assert produce(client, "dropped", [0])[0].base_offset == 1
    finally:
        client.close()


def test_a_throttle_says_so_and_mutes_the_connection(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        tickwheel_manual_broker.faults.add(api="Metadata", kind="throttle", delay_ms=5000, count=1)
        body = client.call(METADATA, 12, METADATA_ALL_TOPICS)
        assert body.throttle_time.total_seconds() == 5
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        tickwheel_clock.advance(5000)
        assert client.receive(METADATA, 12)[1].throttle_time.total_seconds() == 0
    finally:
        client.close()


def test_a_broker_stops_while_an_answer_is_held(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    broker = BackgroundBroker(config, clock=ManualClock()).start()
    client = WireClient(broker.bootstrap_servers)
    try:
        handle = broker.faults.add(api="Metadata", kind="delay", delay_ms=3_600_000)
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        assert handle.hits == 1
        started_s = time.monotonic()
        broker.stop()
        assert time.monotonic() - started_s < STOP_BOUND_S
        assert client.is_closed_by_broker()
    finally:
        client.close()
        broker.stop()


def test_a_fetch_error_on_one_partition_leaves_the_others_records(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        create_topic(client, "fetched", partitions=2)
        produce(client, "fetched", [0, 1])
        tickwheel_broker.faults.add(
            api="Fetch", error="NOT_LEADER_OR_FOLLOWER", topic="fetched", partition=1
        )
        body = client.call(
            FETCH,
            12,
            {
                "max_wait": 0,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": "fetched",
                        "partitions": [
                            {"partition": index, "fetch_offset": 0, "partition_max_bytes": 65536}
                            for index in (0, 1)
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        partitions = {p.partition_index: p for p in body.responses[0].partitions}
        assert partitions[0].error_code == ErrorCode.none
        assert partitions[0].high_watermark == 1
        assert partitions[0].records
        assert partitions[1].error_code == ErrorCode.not_leader_or_follower
        assert (partitions[1].high_watermark, partitions[1].records) == (-1, None)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("filters", "hits"),
    [
        ({"version": 4}, True),
        ({"version": 3}, False),
        ({"group_id": "g"}, True),
        ({"group_id": "other"}, False),
        ({"client_id": CLIENT_ID}, True),
        ({"client_id": "other"}, False),
        ({"principal": "User:ANONYMOUS"}, True),
        ({"principal": "User:bob"}, False),
        ({"listener": "PLAINTEXT"}, True),
        ({"listener": "SSL"}, False),
    ],
)
def test_each_filter_picks_its_requests(
    tickwheel_session_broker: BackgroundBroker,
    tickwheel_faults: FaultPlan,
    filters: dict[str, object],
    hits: bool,
) -> None:
    handle = tickwheel_faults.add(api="Heartbeat", error="REBALANCE_IN_PROGRESS", **filters)
    client = WireClient(tickwheel_session_broker.bootstrap_servers)
    try:
        answer = client.call(HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    finally:
        client.close()
    assert (answer.error_code == ErrorCode.rebalance_in_progress) is hits
    assert handle.hits == int(hits)
