"""pytest plugin: a running tickwheel broker for a test, in milliseconds.

Installed with tickwheel (entry point ``pytest11``), so a test only names a fixture:

    def test_roundtrip(tickwheel_broker):
        producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})

- ``tickwheel_broker``: a ``BackgroundBroker`` (its own event-loop thread) on a free
  loopback port with a fresh log directory, stopped after the test.
- ``async_tickwheel_broker`` (with pytest-asyncio): a ``Broker`` on the test's event
  loop, for ``async`` tests.
- ``tickwheel_broker_properties``: extra ``server.properties`` settings for the
  function-scoped brokers; override it in a ``conftest.py`` or a test module
  (``{"num.partitions": "3"}``). They go on top of ``TEST_BROKER_PROPERTIES`` (a free
  loopback port, one ``__consumer_offsets`` partition, no initial rebalance delay).
- ``tickwheel_session_broker``: one ``BackgroundBroker`` for the whole session, shared
  by every test that names it (start-up paid once; topics and groups persist between
  tests, so give each test its own names). Its settings come from the session-scoped
  ``tickwheel_session_broker_properties``.
- ``tickwheel_clock`` and ``tickwheel_manual_broker`` (``async_tickwheel_manual_broker``
  on the test's loop): a broker on a ``ManualClock``.
  Its timeouts -- DelayedProduce, DelayedFetch and DelayedDeleteRecords, group
  sessions, rebalances and the initial rebalance delay, the offsets retention check,
  log retention, flushing and checkpoints, idle connections -- fire only when the
  test calls ``tickwheel_clock.advance(ms)``, and all of them that fall due have run
  when it returns: a session timeout is tested in milliseconds, without sleeping.
- ``tickwheel_faults``: the ``FaultPlan`` (``tickwheel.faults``) of the test's broker
  fixture (``tickwheel_manual_broker``, ``tickwheel_broker`` or
  ``tickwheel_session_broker``, whichever the test names; ``tickwheel_broker`` if none),
  emptied after the test, so a rule never outlives it even on the shared broker:
  ``tickwheel_faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3)``.
  ``async_tickwheel_faults`` is the same for ``async_tickwheel_broker``.
- ``tickwheel_cluster`` (one test) and ``tickwheel_session_cluster`` (shared): a
  ``LocalCluster`` -- ZooKeeper and three ``tickwheel serve`` processes -- for tests
  that need replication, with ``tickwheel_cluster_properties``. They need the
  ``cluster`` extra (kazoo) and ZooKeeper with Java; without them the test is skipped
  and says why. Their teardown stops every process they started, within a bound, even
  when the test stopped ZooKeeper first (``LocalCluster.stop``). Their brokers serve
  their fault plans, so a test can also ``isolate(broker_id)`` one from the others'
  replication and ``heal()`` it, beside ``brokers[i].kill()``, ``restart()``,
  ``pause()`` and ``resume()``.

The broker is imported only when a fixture is used, so the plugin costs pytest
nothing otherwise, and it lives outside ``tickwheel.server`` so that pytest still
starts where tickwheel is installed without its ``broker`` extra (importing the
``server`` package needs kio).

Concurrency: fixtures run on pytest's thread; a background broker runs on its own
(``tickwheel_clock.advance`` called from the test's thread waits for it).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tickwheel.cluster import LocalCluster
    from tickwheel.faults import FaultPlan
    from tickwheel.server import BackgroundBroker, Broker, BrokerConfig
    from tickwheel.timer import ManualClock

TEST_BROKER_PROPERTIES = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    # What docker-compose files for tests set on Kafka: one offsets partition (50 would
    # cost start-up and shutdown time for nothing) and no wait for new groups.
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
"""The fixtures' settings, under ``tickwheel_broker_properties`` and ``log.dirs``."""


CLUSTER_BROKERS = 3
"""How many brokers the cluster fixtures start (Kafka's replication factor 3)."""

TEST_CLUSTER_PROPERTIES = {
    # A killed broker's partitions move within seconds rather than Kafka's 18 s, and a
    # stopped follower leaves the ISR after 10 s rather than Kafka's 30 s.
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
}
"""The cluster fixtures' settings, under ``tickwheel_cluster_properties``."""

_CLUSTER_ZOOKEEPER_TICK_MS = 500
_CLUSTER_START_TIMEOUT_S = 60.0
_CLUSTER_POLL_S = 0.05


def _config(log_dir: Path, properties: Mapping[str, str]) -> BrokerConfig:
    from tickwheel.server import BrokerConfig  # noqa: PLC0415 - imported only when used

    return BrokerConfig.from_properties(
        {**TEST_BROKER_PROPERTIES, "log.dirs": str(log_dir), **properties}
    )


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    """Extra broker properties for the broker fixtures (override to change them)."""
    return {}


@pytest.fixture
def tickwheel_broker(
    tmp_path_factory: pytest.TempPathFactory, tickwheel_broker_properties: dict[str, str]
) -> Iterator[BackgroundBroker]:
    """A running broker on its own thread, on a free loopback port."""
    from tickwheel.server import BackgroundBroker  # noqa: PLC0415 - imported only when used

    log_dir = tmp_path_factory.mktemp("tickwheel-broker")
    with BackgroundBroker(_config(log_dir, tickwheel_broker_properties)) as broker:
        yield broker


@pytest.fixture(scope="session")
def tickwheel_session_broker_properties() -> dict[str, str]:
    """Extra broker properties for ``tickwheel_session_broker`` (override to change them,
    with ``scope="session"``)."""
    return {}


@pytest.fixture(scope="session")
def tickwheel_session_broker(
    tmp_path_factory: pytest.TempPathFactory,
    tickwheel_session_broker_properties: dict[str, str],
) -> Iterator[BackgroundBroker]:
    """One running broker shared by every test of the session that names it."""
    from tickwheel.server import BackgroundBroker  # noqa: PLC0415 - imported only when used

    log_dir = tmp_path_factory.mktemp("tickwheel-session-broker")
    with BackgroundBroker(_config(log_dir, tickwheel_session_broker_properties)) as broker:
        yield broker


@pytest.fixture
def tickwheel_clock() -> ManualClock:
    """The ``ManualClock`` of ``tickwheel_manual_broker``: ``advance(ms)`` moves its time."""
    from tickwheel.timer import ManualClock  # noqa: PLC0415 - imported only when used

    return ManualClock()


@pytest.fixture
def tickwheel_manual_broker(
    tmp_path_factory: pytest.TempPathFactory,
    tickwheel_broker_properties: dict[str, str],
    tickwheel_clock: ManualClock,
) -> Iterator[BackgroundBroker]:
    """A running broker whose every timeout waits for ``tickwheel_clock.advance``."""
    from tickwheel.server import BackgroundBroker  # noqa: PLC0415 - imported only when used

    log_dir = tmp_path_factory.mktemp("tickwheel-manual-broker")
    config = _config(log_dir, tickwheel_broker_properties)
    with BackgroundBroker(config, clock=tickwheel_clock) as broker:
        yield broker


_FAULT_BROKERS = ("tickwheel_manual_broker", "tickwheel_broker", "tickwheel_session_broker")
"""The broker fixtures ``tickwheel_faults`` serves, the first the test names first."""


@pytest.fixture
def tickwheel_faults(request: pytest.FixtureRequest) -> Iterator[FaultPlan]:
    """The fault plan of the test's broker, emptied after the test."""
    name = next((name for name in _FAULT_BROKERS if name in request.fixturenames), None)
    broker: BackgroundBroker = request.getfixturevalue(name or "tickwheel_broker")
    try:
        yield broker.faults
    finally:
        broker.faults.clear()


def _cluster_or_skip(base_dir: Path, properties: Mapping[str, str]) -> LocalCluster:
    if importlib.util.find_spec("kazoo") is None:
        pytest.skip(
            "the cluster fixtures need the cluster extra: "
            "pip install './[cluster]' in a checkout of tickwheel"
        )
    from tickwheel.cluster import LocalCluster  # noqa: PLC0415 - imported only when used

    return LocalCluster(
        base_dir,
        CLUSTER_BROKERS,
        properties={**TEST_CLUSTER_PROPERTIES, **properties},
        zookeeper_tick_ms=_CLUSTER_ZOOKEEPER_TICK_MS,
        faults=True,
    )


def _running_cluster(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """Start the cluster, wait until it has a controller (it can then create topics), yield
    it, and stop it.

    Skips the test when ZooKeeper cannot run here (no ``zookeeper`` package or no Java).
    """
    from tickwheel.cluster import ZooKeeperError  # noqa: PLC0415 - imported only when used

    try:
        cluster.start(_CLUSTER_START_TIMEOUT_S)
    except ZooKeeperError as exc:
        pytest.skip(f"the cluster fixtures need ZooKeeper: {exc}")
    deadline_s = time.monotonic() + _CLUSTER_START_TIMEOUT_S
    while cluster.controller_id() is None:
        if time.monotonic() > deadline_s:
            cluster.stop()
            raise TimeoutError("the cluster elected no controller")
        time.sleep(_CLUSTER_POLL_S)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def tickwheel_cluster_properties() -> dict[str, str]:
    """Extra broker properties for the cluster fixtures (override to change them, with
    ``scope="session"`` if ``tickwheel_session_cluster`` is used)."""
    return {}


@pytest.fixture
def tickwheel_cluster(
    tmp_path_factory: pytest.TempPathFactory, tickwheel_cluster_properties: dict[str, str]
) -> Iterator[LocalCluster]:
    """ZooKeeper and three broker processes for one test (it may kill or pause them)."""
    cluster = _cluster_or_skip(
        tmp_path_factory.mktemp("tickwheel-cluster"), tickwheel_cluster_properties
    )
    yield from _running_cluster(cluster)


@pytest.fixture(scope="session")
def tickwheel_session_cluster(
    tmp_path_factory: pytest.TempPathFactory, tickwheel_cluster_properties: dict[str, str]
) -> Iterator[LocalCluster]:
    """ZooKeeper and three broker processes shared by the session (leave them running)."""
    cluster = _cluster_or_skip(
        tmp_path_factory.mktemp("tickwheel-session-cluster"), tickwheel_cluster_properties
    )
    yield from _running_cluster(cluster)


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the async fixture needs pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def async_tickwheel_broker(
        tmp_path_factory: pytest.TempPathFactory, tickwheel_broker_properties: dict[str, str]
    ) -> AsyncIterator[Broker]:
        """A running broker on the test's event loop, on a free loopback port."""
        from tickwheel.server import Broker  # noqa: PLC0415 - imported only when used

        log_dir = tmp_path_factory.mktemp("tickwheel-broker")
        async with Broker(_config(log_dir, tickwheel_broker_properties)) as broker:
            yield broker

    @pytest_asyncio.fixture
    async def async_tickwheel_manual_broker(
        tmp_path_factory: pytest.TempPathFactory,
        tickwheel_broker_properties: dict[str, str],
        tickwheel_clock: ManualClock,
    ) -> AsyncIterator[Broker]:
        """A broker on the test's event loop whose every timeout waits for
        ``tickwheel_clock.advance`` (called on the loop, it runs them inline)."""
        from tickwheel.server import Broker  # noqa: PLC0415 - imported only when used

        log_dir = tmp_path_factory.mktemp("tickwheel-manual-broker")
        config = _config(log_dir, tickwheel_broker_properties)
        async with Broker(config, clock=tickwheel_clock) as broker:
            yield broker

    @pytest_asyncio.fixture
    async def async_tickwheel_faults(async_tickwheel_broker: Broker) -> AsyncIterator[FaultPlan]:
        """The fault plan of ``async_tickwheel_broker``, emptied after the test."""
        try:
            yield async_tickwheel_broker.faults
        finally:
            async_tickwheel_broker.faults.clear()
