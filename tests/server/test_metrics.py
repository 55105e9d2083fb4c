"""The metrics server: Kafka's metric names, purgatory gauges that follow the purgatory,
partition gauges, process metrics, health and readiness, 404 and 400."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from replica.records import batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker

from .wire import WireClient

pytestmark = pytest.mark.integration

FETCH = ApiKey.FETCH
PRODUCE = ApiKey.PRODUCE
TIMEOUT_S = 30.0


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


BYTES_IN = "kafka_server_BrokerTopicMetrics_BytesInPerSec_total"
BYTES_OUT = "kafka_server_BrokerTopicMetrics_BytesOutPerSec_total"


def _topic(series: str, topic: str) -> str:
    return f'{series}{{topic="{topic}"}}'


def test_byte_rates_per_topic_and_a_deleted_topic_drops_out(
    tickwheel_broker: BackgroundBroker,
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]).values():
        future.result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce("a", b"x" * 100)
    producer.produce("b", b"y" * 1000)
    assert producer.flush(TIMEOUT_S) == 0
    batched = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    for index in range(5):
        batched.produce("b", b"%d" % index)
    assert batched.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "m"})
    consumer.assign([TopicPartition("a", 0, 0)])
    try:
        message = consumer.poll(TIMEOUT_S)
        assert message is not None
        assert message.value() == b"x" * 100
    finally:
        consumer.close()

    samples = scrape(tickwheel_broker)
    in_a, in_b = samples[_topic(BYTES_IN, "a")], samples[_topic(BYTES_IN, "b")]
    assert in_b > in_a + 800  # each topic counts its own batches
    assert samples[BYTES_IN] == in_a + in_b  # the all-topics series, without labels
    assert samples[_topic(BYTES_OUT, "a")] == samples[BYTES_OUT] >= in_a
    assert _topic(BYTES_OUT, "b") not in samples  # nothing fetched from b
    messages = "kafka_server_BrokerTopicMetrics_MessagesInPerSec_total"
    assert (samples[_topic(messages, "a")], samples[_topic(messages, "b")]) == (1, 6)
    assert samples[messages] == 7
    produces = "kafka_server_BrokerTopicMetrics_TotalProduceRequestsPerSec_total"
    assert samples[_topic(produces, "a")] == 1
    assert samples[_topic(produces, "b")] >= 2

    admin.delete_topics(["b"])["b"].result(timeout=TIMEOUT_S)
    after = scrape(tickwheel_broker)
    assert _topic(BYTES_IN, "b") not in after
    assert after[_topic(BYTES_IN, "a")] == in_a
    assert after[BYTES_IN] == in_a + in_b  # what b took still counts for all topics


def get(broker: BackgroundBroker, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{broker.metrics_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_health_readiness_and_unknown_paths(tickwheel_broker: BackgroundBroker) -> None:
    assert get(tickwheel_broker, "/healthz") == (200, "ok\n")
    assert get(tickwheel_broker, "/readyz") == (200, "ok\n")
    assert get(tickwheel_broker, "/")[0] == 404
    assert get(tickwheel_broker, "/metricsx")[0] == 404
    status, text = get(tickwheel_broker, "/metrics?name=x")
    assert status == 200
    assert "process_cpu_seconds_total" in text
    assert "process_resident_memory_bytes" in text
    assert "python_info" in text


def test_garbage_is_a_bad_request(tickwheel_broker: BackgroundBroker) -> None:
    with socket.create_connection(("127.0.0.1", tickwheel_broker.metrics_port), 10) as sock:
        sock.sendall(bytes(range(200, 256)) + b"\x00" * 8)  # 64 bytes, no line end
        answer = sock.recv(1024)
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_partition_gauges_under_kafka_names(tickwheel_broker: BackgroundBroker) -> None:
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    futures = admin.create_topics(
        [
            NewTopic("plain", 2, 1),
            # One replica cannot satisfy min.insync.replicas=2: under min ISR.
            NewTopic("strict", 1, 1, config={"min.insync.replicas": "2"}),
        ]
    )
    for future in futures.values():
        future.result(TIMEOUT_S)
    samples = scrape(tickwheel_broker)
    replica = "kafka_server_ReplicaManager_"
    controller = "kafka_controller_KafkaController_"
    # The broker may host internal topics too: count what these tests created.
    partitions = samples[replica + "PartitionCount"]
    assert partitions >= 3
    assert samples[replica + "LeaderCount"] == partitions
    assert samples[replica + "UnderMinIsrPartitionCount"] == 1
    assert samples[replica + "UnderReplicatedPartitions"] == 0
    assert samples[replica + "OfflineReplicaCount"] == 0
    assert samples[controller + "ActiveControllerCount"] == 1
    assert samples[controller + "OfflinePartitionsCount"] == 0
    # Nothing replicates on one broker: no throttled bytes, nothing moving.
    assert samples[replica + "ReassigningPartitions"] == 0
    assert samples["kafka_server_LeaderReplication_byte_rate"] == 0
    assert samples["kafka_server_FollowerReplication_byte_rate"] == 0


def test_a_taken_metrics_port_names_its_setting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tickwheel.cli",
                "serve",
                "--override",
                "listeners=PLAINTEXT://127.0.0.1:0",
                "--override",
                f"log.dirs={tmp_path / 'logs'}",
                "--override",
                "offsets.topic.num.partitions=1",
            ],
            # Through the environment, as the apache/kafka image is configured.
            env={**os.environ, "KAFKA_TICKWHEEL_METRICS_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert "tickwheel.metrics.port" in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr
    assert "cannot listen on PLAINTEXT" not in done.stderr
    assert "Traceback" not in done.stderr
