"""The pytest plugin's fixtures: a running broker for a test, sync or async."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from server.wire import WireClient
from tickwheel.cluster import LocalCluster
from tickwheel.faults import FaultPlan
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
    assert set(async_tickwheel_broker.metrics()) == {
        "Produce",
        "Fetch",
        "DeleteRecords",
        "ShareFetch",
    }


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


_session_ports: set[int] = set()


@pytest.mark.parametrize("test", ["first", "second"])
def test_the_session_broker_is_one_broker_for_every_test(
    tickwheel_session_broker: BackgroundBroker, test: str
) -> None:
    _session_ports.add(tickwheel_session_broker.port)
    assert len(_session_ports) == 1
    admin = AdminClient({"bootstrap.servers": tickwheel_session_broker.bootstrap_servers})
    admin.create_topics([NewTopic(f"session-{test}", 1, 1)])[f"session-{test}"].result(10)
    topics = admin.list_topics(timeout=10).topics
    assert f"session-{test}" in topics
    if test == "second":
        assert "session-first" in topics


def test_the_manual_broker_runs_on_the_fixtures_clock(
    tickwheel_manual_broker: BackgroundBroker, tickwheel_clock: object
) -> None:
    assert tickwheel_manual_broker.clock is tickwheel_clock


@pytest.mark.cluster
def test_the_cluster_fixture_replicates_to_three_brokers(tickwheel_cluster: LocalCluster) -> None:
    bootstrap = tickwheel_cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("replicated", 1, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([topic])["replicated"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("replicated", b"everywhere")
    assert producer.flush(30) == 0
    state = tickwheel_cluster.partition_state("replicated", 0)
    assert state is not None
    assert sorted(state.isr) == [0, 1, 2]


@pytest.mark.asyncio
async def test_the_async_faults_fixture_is_the_async_brokers_plan(
    async_tickwheel_broker: Broker, async_tickwheel_faults: FaultPlan
) -> None:
    assert async_tickwheel_faults is async_tickwheel_broker.faults
    assert not async_tickwheel_faults.armed


def test_the_faults_fixture_is_the_named_brokers_plan(
    tickwheel_session_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    assert tickwheel_faults is tickwheel_session_broker.faults
    tickwheel_faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER")
    assert tickwheel_faults.armed


def test_the_faults_fixture_leaves_the_shared_broker_unarmed(
    tickwheel_session_broker: BackgroundBroker,
) -> None:
    # Runs after the test above, which left a rule for the fixture to take out.
    assert not tickwheel_session_broker.faults.armed
