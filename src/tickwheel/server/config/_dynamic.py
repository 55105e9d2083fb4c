"""``DynamicBrokerConfig``: broker settings changed at run time, and where each value
comes from.

Kafka layers a broker's settings, highest precedence first: a dynamic setting of this
broker (``/config/brokers/<id>`` in ZooKeeper), a dynamic cluster-wide default
(``/config/brokers/<default>``), the static ``server.properties`` (here also
``KAFKA_*`` variables and ``--override``), and the built-in default. A topic's
setting sits above all of these: an override of the topic (DYNAMIC_TOPIC_CONFIG),
else its broker synonym (``retention.ms`` → ``log.retention.ms``) from that chain.
DescribeConfigs reports the first source of the chain as an entry's source and the
whole chain as its synonyms.

The broker settings that may change dynamically are Kafka's (``KAFKA_BROKER_CONFIGS``,
the ones not read-only); every other one is read-only, as Kafka's static ones are.
``current`` is the ``BrokerConfig`` with the dynamic layers applied to the settings it
holds; the ``BrokerContext`` hands it to whatever reads settings from then on. A Kafka
config it does not hold (``sasl.kerberos.min.time.before.relogin``, a listener-prefixed
one) is kept in its layer only: stored, described, and used by nothing.

Concurrency: owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from tickwheel.cluster import DEFAULT_BROKER_ENTITY
from tickwheel.server.config._broker import BROKER_TO_TOPIC_CONFIG, BrokerConfig, ConfigSource
from tickwheel.server.config._kafka_broker_configs import (
    KAFKA_BROKER_CONFIGS,
    listener_base_name,
)

DYNAMIC_BROKER_CONFIGS = frozenset(
    name for name, key in KAFKA_BROKER_CONFIGS.items() if key.dynamic
) | frozenset(BROKER_TO_TOPIC_CONFIG)
"""Broker settings that may change while the broker runs."""
TOPIC_TO_BROKER_CONFIG: Mapping[str, str] = {
    topic: broker for broker, topic in BROKER_TO_TOPIC_CONFIG.items()
}
_BUILT_IN_DEFAULTS: Mapping[str, str] = BrokerConfig().as_properties()


def is_dynamic_broker_config(name: str) -> bool:
    """Whether ``name`` may change while the broker runs: a dynamic Kafka config, itself
    or under a listener prefix."""
    base = listener_base_name(name)
    return (name if base is None else base) in DYNAMIC_BROKER_CONFIGS


_HELD = frozenset(_BUILT_IN_DEFAULTS)
"""The settings a ``BrokerConfig`` holds; dynamic values of others stay in their layer."""


class DescribeSource(enum.IntEnum):
    """Kafka's ``ConfigSource`` codes in DescribeConfigs answers."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class Synonym:
    """One layer that gives a setting a value: its name there, value and source."""

    name: str
    value: str | None
    source: DescribeSource


class DynamicBrokerConfig:
    """The static config, this broker's dynamic settings and the cluster defaults."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self._static_values = static.as_properties()
        self._layers: dict[str, dict[str, str]] = {}
        self.current = static

    def entity_configs(self, entity: str) -> dict[str, str]:
        """The dynamic settings stored for ``entity`` (``<default>`` or a broker id)."""
        return dict(self._layers.get(entity, {}))

    def preview(self, entity: str, configs: Mapping[str, str]) -> BrokerConfig:
        """The config that ``configs`` for ``entity`` would give; ``ConfigError`` if bad."""
        layers = {**self._layers, entity: dict(configs)}
        return self._apply(layers)

    def set(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace ``entity``'s dynamic settings (already validated by ``preview``)."""
        layers = {**self._layers, entity: dict(configs)}
        self.current = self._apply(layers)
        self._layers = {name: layer for name, layer in layers.items() if layer}

    def _apply(self, layers: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
        own = str(self.static.broker_id)
        merged = {**layers.get(DEFAULT_BROKER_ENTITY, {}), **layers.get(own, {})}
        return self.static.with_values({k: v for k, v in merged.items() if k in _HELD})

    def value(self, name: str) -> str | None:
        """The effective value of broker setting ``name``: its first layer's."""
        return self.broker_chain(name)[0].value

    def names(self) -> list[str]:
        """Every broker setting there is to describe: those this broker holds, Kafka's,
        and any other stored dynamically (listener-prefixed ones)."""
        stored = (name for layer in self._layers.values() for name in layer)
        return sorted({*_HELD, *KAFKA_BROKER_CONFIGS, *stored})

    def broker_chain(self, name: str) -> list[Synonym]:
        """Where the broker setting ``name`` gets its value, highest precedence first."""
        chain = []
        own = self._layers.get(str(self.static.broker_id), {})
        if name in own:
            chain.append(Synonym(name, own[name], DescribeSource.DYNAMIC_BROKER_CONFIG))
        default = self._layers.get(DEFAULT_BROKER_ENTITY, {})
        if name in default:
            chain.append(Synonym(name, default[name], DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        static = self._static_values
        if name in static:
            if self.static.source(name) is ConfigSource.DEFAULT:
                # The static value is a default (the built-in one, or one that depends
                # on another setting, as offsets.topic.replication.factor in a cluster).
                chain.append(Synonym(name, static[name], DescribeSource.DEFAULT_CONFIG))
            else:
                chain.append(Synonym(name, static[name], DescribeSource.STATIC_BROKER_CONFIG))
                built_in = _BUILT_IN_DEFAULTS[name]
                chain.append(Synonym(name, built_in, DescribeSource.DEFAULT_CONFIG))
        elif name in KAFKA_BROKER_CONFIGS:
            default_value = KAFKA_BROKER_CONFIGS[name].default
            chain.append(Synonym(name, default_value, DescribeSource.DEFAULT_CONFIG))
        return chain

    def topic_chain(self, name: str, overrides: Mapping[str, str], value: str) -> list[Synonym]:
        """Where topic setting ``name`` (effective ``value``) comes from, highest first."""
        chain = []
        if name in overrides:
            chain.append(Synonym(name, overrides[name], DescribeSource.DYNAMIC_TOPIC_CONFIG))
        broker_name = TOPIC_TO_BROKER_CONFIG.get(name)
        if broker_name is not None:
            chain.extend(self.broker_chain(broker_name))
        if not chain:
            chain.append(Synonym(name, value, DescribeSource.DEFAULT_CONFIG))
        return chain
