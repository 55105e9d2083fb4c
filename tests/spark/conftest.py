"""Fixtures for the Spark tests: one SparkSession and one broker for the whole run.

Spark costs 10-20 s to start, so one session-scoped ``SparkSession`` serves every test
(Spark's documented pattern). The broker is tickwheel's own, in the background on a
free loopback port, serving the schema registry on another;
``TICKWHEEL_SPARK_BOOTSTRAP=host:port`` points the tests at another Kafka-compatible
broker instead (and ``TICKWHEEL_SPARK_REGISTRY=http://host:port`` at its registry; the
tests that need one are skipped without it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.spark import local_session
from tickwheel.spark._clients import close_cached_clients
from tickwheel.spark._wire_fetch import close_wire_fetchers

from .helpers import KafkaHelper

EXTERNAL_BROKER_ENV = "TICKWHEEL_SPARK_BOOTSTRAP"
EXTERNAL_REGISTRY_ENV = "TICKWHEEL_SPARK_REGISTRY"


@pytest.fixture(scope="session")
def broker_addresses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str | None]]:
    """A running broker's bootstrap address and its schema registry's URL (None for an
    external broker without ``TICKWHEEL_SPARK_REGISTRY``)."""
    external = os.environ.get(EXTERNAL_BROKER_ENV)
    if external:
        yield external, os.environ.get(EXTERNAL_REGISTRY_ENV) or None
        return
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("broker")),
            # The compacted-topic test waits for the cleaner (Kafka's default: 15 s).
            "log.cleaner.backoff.ms": "100",
            "schema.registry.listeners": "http://127.0.0.1:0",
        }
    )
    with BackgroundBroker(config) as broker:
        registry_url = f"http://127.0.0.1:{broker.schema_registry_ports[0]}"
        yield broker.bootstrap_servers, registry_url


@pytest.fixture(scope="session")
def bootstrap_servers(broker_addresses: tuple[str, str | None]) -> str:
    """A running broker's bootstrap address."""
    return broker_addresses[0]


@pytest.fixture(scope="session")
def schema_registry_url(broker_addresses: tuple[str, str | None]) -> str:
    """The test broker's schema registry."""
    url = broker_addresses[1]
    if url is None:
        pytest.skip(f"{EXTERNAL_BROKER_ENV} is set without {EXTERNAL_REGISTRY_ENV}")
    return url


@pytest.fixture(scope="session")
def kafka(bootstrap_servers: str) -> KafkaHelper:
    """Admin, produce and read-back helpers against the test broker."""
    return KafkaHelper(bootstrap_servers)


@pytest.fixture(scope="session")
def spark(bootstrap_servers: str) -> Iterator[SparkSession]:
    """The run's one local SparkSession (local[2], loopback, 2 shuffle partitions).

    It starts after the broker and stops before it, so the Kafka clients the source
    keeps in Spark's Python workers never outlive the broker they read (they would
    retry it, and log each refused connection, until the run ends).
    """
    del bootstrap_servers  # only its order of set-up and teardown
    session = local_session("tickwheel-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_cached_clients_after_the_test() -> Iterator[None]:
    """Tests that read or write in this process (not through Spark's workers) leave
    clients and wire fetchers in the source's per-process caches: they are closed after
    each test, so none outlives the broker it reads."""
    yield
    close_cached_clients()
    close_wire_fetchers()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    """A fresh checkpoint directory for one streaming query."""
    return str(tmp_path / "checkpoint")
