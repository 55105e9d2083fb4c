"""Kafka's own Java admin client and producer against a broker (``java_peer``): topics
described by id (Metadata v12) and by name (the 4.x admin's DescribeTopicPartitions),
log directories described, client quotas altered and described, and a producer held by a
``producer_byte_rate`` quota whose ``produce-throttle-time-avg`` shows the throttle.

Skipped, with the reason, where Kafka's Java client is not built (``TICKWHEEL_JAVA_KAFKA``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwheel.server import BackgroundBroker, BrokerConfig

from .client_quotas import alter_quotas
from .java_peer import JavaPeer, compile_peer
from .test_metrics import scrape
from .wire import WireClient, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROGRAM = "AdminPeer"
QUOTA_BYTES_PER_S = 20_000
PRODUCED_BYTES = 120_000
BROKER_ID = 7


@pytest.fixture(scope="module")
def java_peer(tmp_path_factory: pytest.TempPathFactory) -> JavaPeer:
    return compile_peer(tmp_path_factory.mktemp("java-peer"))


@pytest.fixture(scope="module")
def log_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("java-admin")
    return root / "one", root / "two"


@pytest.fixture(scope="module")
def broker(java_peer: JavaPeer, log_dirs: tuple[Path, Path]) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {
            "broker.id": str(BROKER_ID),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": ",".join(map(str, log_dirs)),
            "quota.window.num": "2",
            "tickwheel.metrics.port": "0",
        }
    )
    with BackgroundBroker(config) as running:
        yield running


def test_topics_are_described_by_id_and_by_name(
    java_peer: JavaPeer, broker: BackgroundBroker
) -> None:
    seen = java_peer.run(PROGRAM, "describe-topics", broker.bootstrap_servers, "by-id", "5")

    created = seen["created.id"]
    for way in ("by_id", "by_name", "by_name_paged"):
        assert seen[f"{way}.name"] == "by-id"
        assert seen[f"{way}.id"] == created
        assert seen[f"{way}.internal"] == "false"
        assert seen[f"{way}.partitions"] == "5"
        for partition in range(5):
            assert seen[f"{way}.partition.{partition}.leader"] == str(BROKER_ID)
            assert seen[f"{way}.partition.{partition}.replicas"] == "1"
            assert seen[f"{way}.partition.{partition}.isr"] == "1"
    assert seen["unknown_id"] == "!UnknownTopicIdException"
    assert seen["unknown_name"] == "!UnknownTopicOrPartitionException"
    # By name through DescribeTopicPartitions: once whole, three times paged, once unknown.
    asked = 'kafka_network_RequestMetrics_RequestsPerSec_total{request="DescribeTopicPartitions"}'
    assert scrape(broker)[asked] >= 5


def test_log_dirs_are_described_with_the_replica_in_one(
    java_peer: JavaPeer, broker: BackgroundBroker, log_dirs: tuple[Path, Path]
) -> None:
    records = 20
    seen = java_peer.run(PROGRAM, "log-dirs", broker.bootstrap_servers, "in-a-dir", str(records))

    assert seen["dirs"] == "2"
    holding = [d for d in map(str, log_dirs) if f"dir.{d}.replica.size" in seen]
    assert len(holding) == 1
    at = f"dir.{holding[0]}"
    assert int(seen[f"{at}.replica.size"]) > records * 1024
    assert seen[f"{at}.replica.offset_lag"] == "0"
    assert seen[f"{at}.replica.future"] == "false"
    for directory in map(str, log_dirs):
        assert seen[f"dir.{directory}.error"] == "none"
        assert (
            0
            < int(seen[f"dir.{directory}.usable_bytes"])
            <= int(seen[f"dir.{directory}.total_bytes"])
        )


def test_client_quotas_are_altered_and_described(
    java_peer: JavaPeer, broker: BackgroundBroker
) -> None:
    seen = java_peer.run(PROGRAM, "client-quotas", broker.bootstrap_servers)

    alice_app = "client-id:app,user:alice"
    assert seen["all.entities"] == "3"
    assert seen[f"all.{alice_app}.producer_byte_rate"] == "1024.0"
    assert seen[f"all.{alice_app}.consumer_byte_rate"] == "2048.0"
    assert seen["all.user:alice.request_percentage"] == "50.0"
    assert seen["all.client-id:<default>.producer_byte_rate"] == "4096.0"
    assert seen["alice.entities"] == "2"
    assert seen["only_alice.entities"] == "1"
    assert seen["only_alice.user:alice.request_percentage"] == "50.0"
    assert seen["default_client.entities"] == "1"
    assert seen["default_client.client-id:<default>.producer_byte_rate"] == "4096.0"
    assert seen["after_removal.entities"] == "1"
    assert f"after_removal.{alice_app}.producer_byte_rate" not in seen
    assert seen[f"after_removal.{alice_app}.consumer_byte_rate"] == "2048.0"
    assert seen["bad_key"] == "!InvalidRequestException"


def test_a_producer_over_its_byte_rate_sees_its_throttle_time(
    java_peer: JavaPeer, broker: BackgroundBroker
) -> None:
    topic, client_id = "throttled-java", f"java-{uuid.uuid4().hex[:8]}"
    admin = WireClient(broker.bootstrap_servers)
    try:
        create_topic(admin, topic)
        answer = alter_quotas(
            admin, [("client-id", client_id)], [("producer_byte_rate", QUOTA_BYTES_PER_S)]
        )
        assert answer.error_code == 0
    finally:
        admin.close()

    seen = java_peer.run(
        PROGRAM,
        "throttled-producer",
        broker.bootstrap_servers,
        topic,
        client_id,
        str(PRODUCED_BYTES),
    )

    assert float(seen["produce-throttle-time-avg"]) > 0
    assert float(seen["produce-throttle-time-max"]) > 0
    # Held to the quota: beyond the one window's burst, the rest took its time.
    least_ms = (PRODUCED_BYTES / QUOTA_BYTES_PER_S - 1) * 1000 * 0.7
    assert int(seen["elapsed_ms"]) >= least_ms
