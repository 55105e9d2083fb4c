"""The Prometheus endpoint: Kafka's metric names, purgatory gauges that follow the purgatory."""

from __future__ import annotations

import urllib.request

import pytest

from replica.records import batch
from tickwheel.server import BackgroundBroker

from .wire import WireClient

pytestmark = pytest.mark.integration

FETCH = 1
PRODUCE = 0


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"tickwheel.metrics.port": "0"}


def scrape(broker: BackgroundBroker) -> dict[str, float]:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def test_purgatory_request_and_byte_metrics(tickwheel_broker: BackgroundBroker) -> None:
    assert tickwheel_broker.metrics_port > 0
    waiting = WireClient(tickwheel_broker.bootstrap_servers)
    producer = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        producer.call(3, 4, {"topics": [{"name": "m"}], "allow_auto_topic_creation": True})
        waiting.send(
            FETCH,
            12,
            {
                "max_wait": 30_000,
                "min_bytes": 1,
                "topics": [
                    {
                        "topic": "m",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        fetch_delayed = (
            'kafka_server_DelayedOperationPurgatory_NumDelayedOperations{delayedOperation="Fetch"}'
        )
        # Scrape until the broker has read the fetch: the metric is the event to wait for.
        for _ in range(100):
            samples = scrape(tickwheel_broker)
            if samples[fetch_delayed] >= 1:
                break
        assert samples[fetch_delayed] == 1
        assert (
            samples[
                'kafka_server_DelayedOperationPurgatory_PurgatorySize{delayedOperation="Fetch"}'
            ]
            >= 1
        )
        records = batch(b"payload")
        producer.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [{"name": "m", "partition_data": [{"index": 0, "records": records}]}],
            },
        )
        waiting.receive(FETCH, 12)
        samples = scrape(tickwheel_broker)
    finally:
        waiting.close()
        producer.close()
    assert samples[fetch_delayed] == 0
    assert samples["kafka_server_BrokerTopicMetrics_BytesInPerSec_total"] == len(records)
    assert samples["kafka_server_BrokerTopicMetrics_BytesOutPerSec_total"] == len(records)
    assert samples['kafka_network_RequestMetrics_RequestsPerSec_total{request="Produce"}'] == 1
    assert samples['kafka_network_RequestMetrics_TotalTimeMs_count{request="Fetch"}'] == 1
    assert (
        'kafka_server_DelayedOperationPurgatory_ExpiresPerSec_total{delayedOperation="Produce"}'
        in samples
    )
