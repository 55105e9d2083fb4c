"""The Kafka-compatible broker: an asyncio server over the protocol and replica layers.

``Broker`` (``async with Broker(config)``) and ``BackgroundBroker`` (a broker on its
own thread, ``with BackgroundBroker(config)``) serve Kafka clients on one node;
``BrokerConfig`` takes Kafka's ``server.properties`` names. Requests travel:
``Connection`` (one task per socket, in order) → ``Dispatcher`` (kio decode, version
check) → a handler in ``apis`` (one module per API key) → ``ReplicaManager``
(``tickwheel.replica``) → ``Log``; answers come back the same way, Fetch records by
``sendfile``. Metrics are Kafka's names in Prometheus format (``BrokerMetrics``).
Every timeout of a broker follows one clock (``BrokerTime``): the system's, or a
``ManualClock`` handed in as ``clock=`` that tests advance by hand. The pytest plugin
(``tickwheel.pytest_plugin``) gives tests a broker. With
``zookeeper.connect`` set, the broker joins a cluster (``_cluster`` builds its
``tickwheel.cluster.ClusterNode``) and replicates its partitions.

Concurrency: a broker runs on one event loop; see each module.
"""

from tickwheel.server._broker import BackgroundBroker, Broker
from tickwheel.server._metrics import BrokerMetrics, MetricsPortError, PurgatoryMetrics
from tickwheel.server.config._broker import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    parse_overrides,
    parse_properties,
)

__all__ = [
    "BackgroundBroker",
    "Broker",
    "BrokerConfig",
    "BrokerMetrics",
    "ConfigError",
    "ConfigSource",
    "MetricsPortError",
    "PurgatoryMetrics",
    "parse_overrides",
    "parse_properties",
]
