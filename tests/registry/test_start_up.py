"""Start-up with a large ``_schemas`` topic: 10,000 subjects load within 2 s, and a
restarted broker answers every one of them."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.registry import SCHEMAS_TOPIC, SCHEMAS_TOPIC_CONFIGS
from tickwheel.registry._registry import SchemaRegistry
from tickwheel.registry._schemas_log import SchemasLog
from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SUBJECTS = 10_000
LOAD_BUDGET_S = 2.0
TIMEOUT_S = 60.0


def fill(broker: BackgroundBroker) -> None:
    """``SUBJECTS`` subjects written as Confluent writes them."""
    broker.call(lambda b: b.context.create_topic(SCHEMAS_TOPIC, 1, dict(SCHEMAS_TOPIC_CONFIGS)))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    for n in range(1, SUBJECTS + 1):
        fields = [{"name": "f", "type": "int"}]
        schema = json.dumps({"type": "record", "name": f"R{n}", "fields": fields})
        key = {"keytype": "SCHEMA", "subject": f"s{n}", "version": 1, "magic": 1}
        value = {"subject": f"s{n}", "version": 1, "id": n, "schema": schema, "deleted": False}
        producer.produce(
            SCHEMAS_TOPIC,
            json.dumps(value).encode(),
            json.dumps(key, separators=(",", ":")).encode(),
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0


def load_seconds(broker: Broker) -> tuple[float, int]:
    """How long a registry takes to read this broker's whole ``_schemas`` topic."""
    registry = SchemaRegistry(
        SchemasLog(
            broker.replica_manager,
            create_topic=lambda: None,
            clock_ms=lambda: 0,
            timeout_ms=int(TIMEOUT_S * 1000),
        )
    )
    started = time.perf_counter()
    registry.load()
    return time.perf_counter() - started, len(registry.subjects())


def test_ten_thousand_subjects_load_within_two_seconds(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            **TEST_BROKER_PROPERTIES,
            "log.dirs": str(tmp_path),
            "schema.registry.listeners": "http://127.0.0.1:0",
        }
    )
    with BackgroundBroker(config) as broker:
        fill(broker)
    with BackgroundBroker(config) as broker:
        url = f"http://127.0.0.1:{broker.schema_registry_ports[0]}/subjects"
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            assert len(json.loads(response.read())) == SUBJECTS
        seconds, subjects = broker.call(load_seconds)  # type: ignore[misc]
    assert subjects == SUBJECTS
    assert seconds <= LOAD_BUDGET_S
