"""The pytest plugin's fixtures: a running broker for a test, sync or async."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient

from server.wire import WireClient
from tickwheel.server import BackgroundBroker, Broker

pytestmark = pytest.mark.integration


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"num.partitions": "3"}


def test_the_sync_fixture_serves_clients_with_the_given_properties(
    tickwheel_broker: BackgroundBroker,
) -> None:
    host, _, port = tickwheel_broker.bootstrap_servers.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) > 0
    client = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    metadata = client.list_topics("auto", timeout=10)
    assert len(metadata.topics["auto"].partitions) == 3


@pytest.mark.asyncio
async def test_the_async_fixture_runs_on_the_tests_loop(async_tickwheel_broker: Broker) -> None:
    assert async_tickwheel_broker.port > 0
    assert set(async_tickwheel_broker.metrics()) == {"Produce", "Fetch", "DeleteRecords"}


def test_two_brokers_do_not_share_ports_or_state(tickwheel_broker: BackgroundBroker) -> None:
    with BackgroundBroker(tickwheel_broker.broker.config) as other:
        assert other.port != tickwheel_broker.port
        client = WireClient(other.bootstrap_servers)
        try:
            assert client.call(18, 0, {}).error_code == 0
        finally:
            client.close()


def test_the_plugin_loads_without_the_broker_extra() -> None:
    """pytest must start where tickwheel is installed without kio (the core alone)."""
    blocked = "import sys; sys.modules['kio'] = None; import tickwheel.pytest_plugin"
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
