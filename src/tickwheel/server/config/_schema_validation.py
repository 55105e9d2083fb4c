"""The topic configs of broker-side schema id validation, under Confluent's and Redpanda's names.

=========================================  =======  ==================================
config                                     type     default
=========================================  =======  ==================================
``confluent.key.schema.validation``        BOOLEAN  false
``confluent.value.schema.validation``      BOOLEAN  false
``confluent.key.subject.name.strategy``    STRING   ``<package>.TopicNameStrategy``
``confluent.value.subject.name.strategy``  STRING   ``<package>.TopicNameStrategy``
``redpanda.key.schema.id.validation``      BOOLEAN  false
``redpanda.value.schema.id.validation``    BOOLEAN  false
``redpanda.key.subject.name.strategy``     STRING   ``TopicNameStrategy``
``redpanda.value.subject.name.strategy``   STRING   ``TopicNameStrategy``
=========================================  =======  ==================================

Redpanda's names are aliases of Confluent's, as Redpanda accepts both: a topic sets a
setting under one of its two names (both: INVALID_CONFIG). Confluent's strategy configs
take Confluent's class names (``<package>`` is ``io.confluent.kafka.serializers.subject``;
``TopicNameStrategy``, ``RecordNameStrategy`` or ``TopicRecordNameStrategy``), Redpanda's
the short names. The settings have no broker-wide default, so they are read from a
topic's overrides alone (``topic_schema_validation``), and DescribeConfigs lists those a
topic sets, with their types (``SCHEMA_VALIDATION_CONFIG_TYPES``). They are not the
log's business: the broker takes them out of a topic's config before building its
``LogConfig``.

The check itself is the schema registry's (``tickwheel.registry.SchemaValidator``, an
optional extra this module does not import); ``SubjectNameStrategy`` is how a topic
tells it the subject.

Concurrency: pure functions over immutable values.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tickwheel.server.config._kafka_broker_configs import ConfigType, check_value

CONFLUENT_STRATEGY_PACKAGE: Final = "io.confluent.kafka.serializers.subject."
"""The package of Confluent's subject name strategy classes."""


class SubjectNameStrategy(enum.StrEnum):
    """The subject a record's schema id must be registered under (Confluent's classes)."""

    TOPIC = "TopicNameStrategy"
    RECORD = "RecordNameStrategy"
    TOPIC_RECORD = "TopicRecordNameStrategy"

    def subject(self, topic: str, is_key: bool, record_name: str | None) -> str | None:
        """The subject; None when it needs a record name and ``record_name`` is None."""
        if self is SubjectNameStrategy.TOPIC:
            return f"{topic}-key" if is_key else f"{topic}-value"
        if record_name is None:
            return None
        return record_name if self is SubjectNameStrategy.RECORD else f"{topic}-{record_name}"


@dataclass(frozen=True, slots=True)
class _FieldConfigs:
    """The four names of a key's or a value's settings."""

    validation: str
    validation_alias: str
    strategy: str
    strategy_alias: str


_KEY: Final = _FieldConfigs(
    "confluent.key.schema.validation",
    "redpanda.key.schema.id.validation",
    "confluent.key.subject.name.strategy",
    "redpanda.key.subject.name.strategy",
)
_VALUE: Final = _FieldConfigs(
    "confluent.value.schema.validation",
    "redpanda.value.schema.id.validation",
    "confluent.value.subject.name.strategy",
    "redpanda.value.subject.name.strategy",
)

SCHEMA_VALIDATION_CONFIG_TYPES: Mapping[str, ConfigType] = {
    name: config_type
    for names in (_KEY, _VALUE)
    for name, config_type in (
        (names.validation, ConfigType.BOOLEAN),
        (names.validation_alias, ConfigType.BOOLEAN),
        (names.strategy, ConfigType.STRING),
        (names.strategy_alias, ConfigType.STRING),
    )
}
"""Every schema validation topic config and its type."""


@dataclass(frozen=True, slots=True)
class TopicSchemaValidation:
    """What a topic validates: the strategy of its keys and of its values (None: not
    validated)."""

    key: SubjectNameStrategy | None
    value: SubjectNameStrategy | None

    @property
    def enabling_config(self) -> str:
        """The Confluent name of a setting that turns validation on, for messages."""
        return _KEY.validation if self.key is not None else _VALUE.validation


def topic_schema_validation(overrides: Mapping[str, str]) -> TopicSchemaValidation | None:
    """What a topic with config ``overrides`` validates; None when nothing. ValueError
    naming the config for a bad value or a setting given under both its names."""
    key = _field(overrides, _KEY)
    value = _field(overrides, _VALUE)
    return None if key is None and value is None else TopicSchemaValidation(key, value)


def _field(overrides: Mapping[str, str], names: _FieldConfigs) -> SubjectNameStrategy | None:
    enabled = _one_of(overrides, names.validation, names.validation_alias)
    strategy = _one_of(overrides, names.strategy, names.strategy_alias)
    parsed = SubjectNameStrategy.TOPIC
    if strategy is not None:
        name, text = strategy
        parsed = _strategy(name, text, CONFLUENT_STRATEGY_PACKAGE if name == names.strategy else "")
    if enabled is None:
        return None
    name, text = enabled
    problem = check_value(name, ConfigType.BOOLEAN, text)
    if problem is not None:
        raise ValueError(problem)
    return parsed if text.strip().lower() == "true" else None


def _one_of(overrides: Mapping[str, str], name: str, alias: str) -> tuple[str, str] | None:
    """The name given and its value, if either is."""
    if name in overrides and alias in overrides:
        raise ValueError(f"{name} and {alias} are the same setting: set one of them")
    for given in (name, alias):
        if given in overrides:
            return given, overrides[given]
    return None


def _strategy(name: str, text: str, package: str) -> SubjectNameStrategy:
    for strategy in SubjectNameStrategy:
        if text.strip() == package + strategy.value:
            return strategy
    expected = ", ".join(package + strategy.value for strategy in SubjectNameStrategy)
    raise ValueError(f"Invalid value {text} for configuration {name}: expected one of {expected}")
