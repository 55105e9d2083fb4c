"""Client quotas over the wire: DescribeClientQuotas and AlterClientQuotas with Kafka's
answers, kept over a restart, and enforced on a ManualClock: a producer or consumer
over its byte rate is answered with ``throttle_time_ms`` and its connection stays muted
until the timing wheel says the throttle time is up."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replica.records import batch_of_size
from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.timer import ManualClock

from .client_quotas import alter_quotas, describe_quotas, described_quotas
from .wire import METADATA_ALL_TOPICS, WireClient, create_topic, nothing_yet

pytestmark = pytest.mark.integration

PRODUCE, FETCH, METADATA = 0, 1, 3
CLIENT_ID = "wire-test"  # the WireClient's
WEEK_MS = 7 * 24 * 3600 * 1000


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    # A muted connection is idle (as in Kafka): the week keeps the ManualClock's long
    # throttles from dropping it.
    return {"tickwheel.metrics.port": "0", "connections.max.idle.ms": str(WEEK_MS)}


def test_quotas_are_altered_described_and_kept(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    alice_app = [("user", "alice"), ("client-id", "app")]
    with BackgroundBroker(config) as broker:
        client = WireClient(broker.bootstrap_servers)
        answer = alter_quotas(client, alice_app, [("producer_byte_rate", 1024.0)])
        assert answer.error_code == ErrorCode.none
        assert [(e.entity_type, e.entity_name) for e in answer.entity] == alice_app
        assert (
            alter_quotas(client, [("user", None)], [("consumer_byte_rate", 2048.0)]).error_code == 0
        )
        assert (
            alter_quotas(client, [("client-id", "app")], [("request_percentage", 50.0)]).error_code
            == 0
        )
        checked = alter_quotas(
            client, [("user", "bob")], [("producer_byte_rate", 1.0)], validate_only=True
        )
        assert checked.error_code == ErrorCode.none
        # Kafka's refusals, each naming what is wrong.
        for entity, ops, message in [
            ([("user", "a")], [("producer_bytes_rate", 1.0)], "unknown quota key"),
            ([("user", "a")], [("producer_byte_rate", 1.5)], "whole number"),
            ([("user", "a"), ("user", "b")], [("producer_byte_rate", 1.0)], "duplicate"),
            ([("group", "g")], [("producer_byte_rate", 1.0)], "unknown quota entity type"),
        ]:
            refused = alter_quotas(client, entity, ops)
            assert refused.error_code == ErrorCode.invalid_request
            assert message in refused.error_message

        everything = described_quotas(describe_quotas(client, []))
        assert everything == {
            (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0},
            (("user", None),): {"consumer_byte_rate": 2048.0},
            (("client-id", "app"),): {"request_percentage": 50.0},
        }
        exact = described_quotas(describe_quotas(client, [("user", 0, "alice")]))
        assert list(exact) == [(("client-id", "app"), ("user", "alice"))]
        assert described_quotas(describe_quotas(client, [("user", 0, "alice")], strict=True)) == {}
        assert list(described_quotas(describe_quotas(client, [("user", 1, None)]))) == [
            (("user", None),)
        ]
        assert list(
            described_quotas(describe_quotas(client, [("client-id", 2, None)], strict=True))
        ) == [(("client-id", "app"),)]
        bad = describe_quotas(client, [("user", 0, None)])
        assert bad.error_code == ErrorCode.invalid_request
        assert "needs a name" in bad.error_message
        assert describe_quotas(client, [("ip", 2, None)]).error_code == ErrorCode.invalid_request

        removed = alter_quotas(client, [("client-id", "app")], [("request_percentage", None)])
        assert removed.error_code == ErrorCode.none
        client.close()
    with BackgroundBroker(config) as broker:
        client = WireClient(broker.bootstrap_servers)
        assert described_quotas(describe_quotas(client, [])) == {
            (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 1024.0},
            (("user", None),): {"consumer_byte_rate": 2048.0},
        }
        client.close()


def _produce(client: WireClient, topic: str, size_bytes: int) -> int:
    return client.send(
        PRODUCE,
        9,
        {
            "acks": 1,
            "timeout": 1000,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [{"index": 0, "records": batch_of_size(size_bytes)}],
                }
            ],
        },
    )


def test_a_producer_over_its_quota_is_throttled_and_muted(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        create_topic(client, "throttled")
        # 1000 B/s for every client id: 11 000 bytes at once read as 1100 B/s over the
        # ten windows, (1100 - 1000) / 1000 * 10 s = one second of throttle.
        assert (
            alter_quotas(client, [("client-id", None)], [("producer_byte_rate", 1000.0)]).error_code
            == 0
        )
        correlation_id = _produce(client, "throttled", 11_000)
        answered, body = client.receive(PRODUCE, 9)
        assert answered == correlation_id
        assert body.responses[0].partition_responses[0].error_code == ErrorCode.none
        throttle_ms = body.throttle_time.total_seconds() * 1000
        assert 900 <= throttle_ms <= 1100
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client), "the muted connection read its next request"
        tickwheel_clock.advance(int(throttle_ms) - 1)
        assert nothing_yet(client), "unmuted before the throttle time was up"
        tickwheel_clock.advance(1)
        client.receive(METADATA, 12)
    finally:
        client.close()
    url = f"http://127.0.0.1:{tickwheel_manual_broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as scraped:
        lines = scraped.read().decode().splitlines()
    tags = f'{{client_id="{CLIENT_ID}",user=""}}'
    assert f"kafka_server_Produce_throttle_time{tags} {throttle_ms}" in lines
    assert f"kafka_server_Produce_throttle_time_max{tags} {throttle_ms}" in lines


def test_a_consumer_over_its_quota_gets_no_data_and_waits(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        create_topic(client, "fetched")
        _produce(client, "fetched", 30_000)
        client.receive(PRODUCE, 9)
        assert (
            alter_quotas(client, [("user", None)], [("consumer_byte_rate", 1000.0)]).error_code == 0
        )
        fetch = {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": "fetched",
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
            "forgotten_topics_data": [],
        }
        # The read is capped at what the quota allows over the windows (10 000 bytes),
        # but the first batch comes whole (30 000 bytes): over the quota, so the answer
        # carries no data, only the throttle time.
        fetched = client.call(FETCH, 12, fetch)
        assert fetched.throttle_time.total_seconds() > 0
        assert fetched.responses == ()
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        tickwheel_clock.advance(int(fetched.throttle_time.total_seconds() * 1000))
        client.receive(METADATA, 12)
    finally:
        client.close()


CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def test_partition_mutations_are_held_to_the_controller_mutation_rate(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        create_topic(client, "grows")
        quota = alter_quotas(client, [("client-id", None)], [("controller_mutation_rate", 1.0)])
        assert quota.error_code == ErrorCode.none
        # CreateTopics v5 is permissive: 11 partitions are created, 1.1 per second over
        # the ten windows, and the answer says one second of throttle.
        created = client.call(
            CREATE_TOPICS,
            5,
            {
                "topics": [
                    {
                        "name": "many",
                        "num_partitions": 11,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 1000,
                "validate_only": False,
            },
        )
        assert created.topics[0].error_code == ErrorCode.none
        assert created.throttle_time.total_seconds() == 1.0
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client)
        tickwheel_clock.advance(1000)
        client.receive(METADATA, 12)
        # CreatePartitions v3 is strict: still over the quota, the topic is refused.
        grow = {
            "topics": [{"name": "grows", "count": 2, "assignments": None}],
            "timeout": 1000,
            "validate_only": False,
        }
        refused = client.call(CREATE_PARTITIONS, 3, grow)
        assert refused.results[0].error_code == ErrorCode.throttling_quota_exceeded
        assert refused.results[0].error_message == "The throttling quota has been exceeded."
        assert refused.throttle_time.total_seconds() > 0
        tickwheel_clock.advance(int(refused.throttle_time.total_seconds() * 1000))
        # DeleteTopics v4 is permissive: the topic goes, its partitions counted.
        deleted = client.call(DELETE_TOPICS, 4, {"topic_names": ["many"], "timeout": 1000})
        assert deleted.responses[0].error_code == ErrorCode.none
        assert deleted.throttle_time.total_seconds() > 0
    finally:
        client.close()


def test_create_topics_from_v6_refuses_the_topics_met_over_the_mutation_rate(
    tickwheel_manual_broker: BackgroundBroker,
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        quota = alter_quotas(client, [("client-id", None)], [("controller_mutation_rate", 1.0)])
        assert quota.error_code == ErrorCode.none
        # The first topic puts the client over its quota; the second is met over it.
        topics = [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name, partitions in (("first", 11), ("second", 1))
        ]
        answer = client.call(
            CREATE_TOPICS, 6, {"topics": topics, "timeout": 1000, "validate_only": False}
        )
        first, second = answer.topics
        assert first.error_code == ErrorCode.none
        assert (second.error_code, second.error_message) == (
            ErrorCode.throttling_quota_exceeded,
            "The throttling quota has been exceeded.",
        )
        assert answer.throttle_time.total_seconds() == 1.0
    finally:
        client.close()


def test_a_client_over_its_request_percentage_is_muted(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: ManualClock
) -> None:
    client = WireClient(tickwheel_manual_broker.bootstrap_servers)
    try:
        # A millionth of a percent of a handler: any request's own time is over it.
        quota = alter_quotas(client, [("client-id", CLIENT_ID)], [("request_percentage", 1e-6)])
        assert quota.error_code == ErrorCode.none
        # Answered at once (KIP-219), with the throttle time in the answer.
        answered = client.call(METADATA, 12, METADATA_ALL_TOPICS)
        throttle_ms = round(answered.throttle_time.total_seconds() * 1000)
        assert throttle_ms > 0
        client.send(METADATA, 12, METADATA_ALL_TOPICS)
        assert nothing_yet(client), "the muted connection read its next request"
        tickwheel_clock.advance(throttle_ms - 1)
        assert nothing_yet(client), "unmuted before the throttle time was up"
        tickwheel_clock.advance(1)
        client.receive(METADATA, 12)
    finally:
        client.close()
