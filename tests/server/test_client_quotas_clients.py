"""Client quotas through real clients: kafka-python's producer and consumer, held to a
byte rate, are throttled (their ``throttle-time-avg`` and ``-max`` above 0), and so is
librdkafka's producer (its statistics' per-broker ``throttle``); their throughput stays
near the quota.

Kafka measures a rate over at least ``quota.window.num - 1`` windows of
``quota.window.size.seconds``, so a client may first send that many seconds' worth of
its quota at once. The brokers here keep two one-second windows (a one-second burst)
so that a few seconds of real time (``slow``) show the rate held to the quota.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tickwheel.server import BackgroundBroker, BrokerConfig

from .client_quotas import alter_quotas
from .wire import WireClient, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUOTA_BYTES_PER_S = 40_000
MESSAGE_BYTES = 8_000
RUN_S = 4.0
QUOTA_WINDOW_NUM = 2
BURST_WINDOWS = QUOTA_WINDOW_NUM - 1
"""The windows' worth of quota a client may send before the rate reads as over it."""


def _broker(tmp_path: Path) -> BackgroundBroker:
    return BackgroundBroker(
        BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path),
                "quota.window.num": str(QUOTA_WINDOW_NUM),
            }
        )
    )


def _hold(broker: BackgroundBroker, topic: str, key: str) -> None:
    """Create ``topic`` and hold client id ``throttled`` to the quota under ``key``."""
    admin = WireClient(broker.bootstrap_servers)
    try:
        create_topic(admin, topic)
        answer = alter_quotas(admin, [("client-id", "throttled")], [(key, QUOTA_BYTES_PER_S)])
        assert answer.error_code == 0
    finally:
        admin.close()


def _for_a_while(step: Callable[[], int]) -> tuple[int, float]:
    """Call ``step`` (the bytes it moved) for ``RUN_S``; the bytes moved and the time."""
    moved_bytes = 0
    started = time.monotonic()
    while time.monotonic() - started < RUN_S:
        moved_bytes += step()
    return moved_bytes, time.monotonic() - started


def _held_near_quota(throttle_max_ms: float, sent_bytes: int, elapsed_s: float) -> None:
    """The client saw a throttle time, and moved about its quota's worth (and the burst)."""
    assert throttle_max_ms > 0
    allowed = QUOTA_BYTES_PER_S * (BURST_WINDOWS + elapsed_s)
    assert sent_bytes <= allowed * 1.1 + MESSAGE_BYTES, (sent_bytes, elapsed_s)
    # A throttled fetch is answered empty and fetched again after the throttle time
    # (Kafka's way too), so a consumer lands somewhat below its quota.
    assert sent_bytes >= allowed * 0.5, (sent_bytes, elapsed_s)


def test_a_producer_is_held_to_its_byte_rate(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker:
        _hold(broker, "slow-producer", "producer_byte_rate")
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, client_id="throttled", acks=1
        )

        def send() -> int:
            producer.send("slow-producer", b"x" * MESSAGE_BYTES).get(timeout=30)
            return MESSAGE_BYTES

        try:
            sent_bytes, elapsed_s = _for_a_while(send)
            metrics = producer.metrics()["producer-metrics"]
        finally:
            producer.close()
        assert metrics["throttle-time-avg"] > 0
        _held_near_quota(metrics["throttle-time-max"], sent_bytes, elapsed_s)


def test_a_consumer_is_held_to_its_byte_rate(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker:
        _hold(broker, "slow-consumer", "consumer_byte_rate")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5)
        backlog = int(QUOTA_BYTES_PER_S * (BURST_WINDOWS + 3 * RUN_S)) // MESSAGE_BYTES
        for _ in range(backlog):
            producer.send("slow-consumer", b"x" * MESSAGE_BYTES)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            client_id="throttled",
            max_partition_fetch_bytes=2 * MESSAGE_BYTES,
        )
        try:
            consumer.assign([TopicPartition("slow-consumer", 0)])
            consumer.seek_to_beginning()
            received_bytes, elapsed_s = _for_a_while(
                lambda: sum(
                    len(r.value)
                    for records in consumer.poll(timeout_ms=200).values()
                    for r in records
                )
            )
            metrics = consumer.metrics()["consumer-metrics"]
        finally:
            consumer.close()
        assert metrics["throttle-time-avg"] > 0
        _held_near_quota(metrics["throttle-time-max"], received_bytes, elapsed_s)


def test_librdkafka_reports_the_broker_s_throttle(tmp_path: Path) -> None:
    with _broker(tmp_path) as broker:
        _hold(broker, "slow-librdkafka", "producer_byte_rate")
        throttles: list[dict[str, Any]] = []

        def on_stats(stats_json: str) -> None:
            stats = json.loads(stats_json)
            throttles.extend(b["throttle"] for b in stats["brokers"].values() if b["nodeid"] >= 0)

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "client.id": "throttled",
                "statistics.interval.ms": 500,
                "stats_cb": on_stats,
            }
        )

        def produce() -> int:
            producer.produce("slow-librdkafka", b"x" * MESSAGE_BYTES)
            producer.flush(30)
            return MESSAGE_BYTES

        sent_bytes, elapsed_s = _for_a_while(produce)
        producer.poll(1.0)
        _held_near_quota(max((t["max"] for t in throttles), default=0), sent_bytes, elapsed_s)
