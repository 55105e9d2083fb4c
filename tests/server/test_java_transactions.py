"""Kafka's Java producer in transactions against a broker with ``transaction.version`` 2
finalized and partition verification on (KIP-890).

The Java client is a test peer built from Kafka's source outside the project
(``java-kafka-build/out``, see the shared notes); ``TICKWHEEL_JAVA_KAFKA`` names that
folder. The build's client (Kafka's source of October 2024) reads the finalized
``transaction.version`` but still runs version 1 (AddPartitionsToTxn, Produce v11,
EndTxn v4: its v5 was unstable then), so this proves Kafka's own client beside the
version 2 feature, with every first batch of a transaction verified by its leader.
Kafka's ProducerPerformance commits a transaction every 50 ms; a read_committed
consumer must then read every record once.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker

from .wire import WireClient, count_committed

JAVA_KAFKA = os.environ.get("TICKWHEEL_JAVA_KAFKA", "")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not JAVA_KAFKA, reason="TICKWHEEL_JAVA_KAFKA (java-kafka-build/out) is not set"
    ),
]

RECORDS = 3_000
PARTITIONS = 3
TIMEOUT_S = 120.0
API_VERSIONS = ApiKey.API_VERSIONS
DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS


def test_the_java_producer_commits_transactions_verified_by_the_leaders(
    tickwheel_broker: BackgroundBroker,
) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    client = WireClient(bootstrap)
    try:
        versions = client.call(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        finalized = {f.name: int(f.max_version_level) for f in versions.finalized_features}
        assert finalized["transaction.version"] == 2
        topic = f"java-txn-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT_S)
        classpath = (Path(JAVA_KAFKA) / "runtime.classpath").read_text().strip()
        run = subprocess.run(
            [
                "java",
                "-cp",
                classpath,
                "org.apache.kafka.tools.ProducerPerformance",
                "--topic",
                topic,
                "--num-records",
                str(RECORDS),
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--producer-props",
                f"bootstrap.servers={bootstrap}",
                "--transactional-id",
                "java-tx",
                "--transaction-duration-ms",
                "50",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert f"{RECORDS} records sent" in run.stdout
        assert count_committed(bootstrap, topic, RECORDS, TIMEOUT_S) == RECORDS
        (state,) = client.call(
            DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["java-tx"]}
        ).transaction_states
        assert state.transaction_state == "CompleteCommit"
    finally:
        client.close()
