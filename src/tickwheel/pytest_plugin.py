"""pytest plugin: a running tickwheel broker for a test, in milliseconds.

Installed with tickwheel (entry point ``pytest11``), so a test only names a fixture:

    def test_roundtrip(tickwheel_broker):
        producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})

- ``tickwheel_broker``: a ``BackgroundBroker`` (its own event-loop thread) on a free
  loopback port with a fresh log directory, stopped after the test.
- ``async_tickwheel_broker`` (with pytest-asyncio): a ``Broker`` on the test's event
  loop, for ``async`` tests.
- ``tickwheel_broker_properties``: extra ``server.properties`` settings for both;
  override it in a ``conftest.py`` or a test module (``{"num.partitions": "3"}``).
  They go on top of ``TEST_BROKER_PROPERTIES`` (a free loopback port, one
  ``__consumer_offsets`` partition, no initial rebalance delay).

The broker is imported only when a fixture is used, so the plugin costs pytest
nothing otherwise, and it lives outside ``tickwheel.server`` so that pytest still
starts where tickwheel is installed without its ``broker`` extra (importing the
``server`` package needs kio).

Concurrency: fixtures run on pytest's thread; the background broker runs on its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

TEST_BROKER_PROPERTIES = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    # What docker-compose files for tests set on Kafka: one offsets partition (50 would
    # cost start-up and shutdown time for nothing) and no wait for new groups.
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
"""The fixtures' settings, under ``tickwheel_broker_properties`` and ``log.dirs``."""


def _config(log_dir: Path, properties: dict[str, str]) -> BrokerConfig:
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
