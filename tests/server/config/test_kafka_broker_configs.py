"""Kafka's broker config table and its value checks, without a broker."""

from __future__ import annotations

import pytest

from tickwheel.server.config._kafka_broker_configs import (
    KAFKA_BROKER_CONFIGS,
    TOPIC_CONFIG_TYPES,
    ConfigType,
    KafkaConfigKey,
    UpdateMode,
    broker_config_key,
    check_value,
    listener_base_name,
)


@pytest.mark.parametrize(
    "key",
    [
        KafkaConfigKey(
            "sasl.kerberos.min.time.before.relogin", ConfigType.LONG, UpdateMode.PER_BROKER, "60000"
        ),
        KafkaConfigKey("num.io.threads", ConfigType.INT, UpdateMode.CLUSTER_WIDE, "8"),
        KafkaConfigKey("broker.id", ConfigType.INT, UpdateMode.READ_ONLY, "-1"),
        KafkaConfigKey("ssl.keystore.location", ConfigType.STRING, UpdateMode.PER_LISTENER, None),
        KafkaConfigKey("ssl.cipher.suites", ConfigType.LIST, UpdateMode.PER_BROKER, ""),
        KafkaConfigKey(
            "listener.security.protocol.map",
            ConfigType.STRING,
            UpdateMode.PER_BROKER,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        ),
        KafkaConfigKey(
            "offsets.topic.replication.factor", ConfigType.SHORT, UpdateMode.READ_ONLY, "3"
        ),
        KafkaConfigKey("sasl.jaas.config", ConfigType.PASSWORD, UpdateMode.PER_BROKER, None),
    ],
)
def test_the_table_holds_kafkas_facts(key: KafkaConfigKey) -> None:
    assert KAFKA_BROKER_CONFIGS[key.name] == key


def test_every_topic_default_of_the_broker_is_dynamic_and_typed_like_its_topic_config() -> None:
    assert KAFKA_BROKER_CONFIGS["log.retention.ms"].dynamic
    assert KAFKA_BROKER_CONFIGS["log.cleanup.policy"].type is TOPIC_CONFIG_TYPES["cleanup.policy"]
    assert not KAFKA_BROKER_CONFIGS["log.message.format.version"].dynamic


def test_listener_prefixed_names_set_their_base_config() -> None:
    assert listener_base_name("num.io.threads") is None
    assert listener_base_name("listener.name.ssl.ssl.keystore.location") == "ssl.keystore.location"
    assert listener_base_name("listener.name.sasl.plain.sasl.jaas.config") == "sasl.jaas.config"
    key = broker_config_key("listener.name.internal.max.connections")
    assert key is not None
    assert key.name == "max.connections"
    assert broker_config_key("no.such.config") is None


@pytest.mark.parametrize(
    ("config_type", "value", "problem"),
    [
        (ConfigType.BOOLEAN, "TRUE", None),
        (ConfigType.BOOLEAN, "yes", "Expected value to be either true or false"),
        (ConfigType.SHORT, "32767", None),
        (ConfigType.SHORT, "32768", "Not a number of type SHORT"),
        (ConfigType.INT, " -2147483648 ", None),
        (ConfigType.INT, "1.0", "Not a number of type INT"),
        (ConfigType.LONG, "9223372036854775808", "Not a number of type LONG"),
        (ConfigType.DOUBLE, "1e-3", None),
        (ConfigType.DOUBLE, "half", "Not a number of type DOUBLE"),
        (ConfigType.LIST, "a,b", None),
        (ConfigType.PASSWORD, "", None),
    ],
)
def test_values_are_parsed_as_kafkas_config_def_parses_them(
    config_type: ConfigType, value: str, problem: str | None
) -> None:
    found = check_value("some.config", config_type, value)
    if problem is None:
        assert found is None
    else:
        assert found == f"Invalid value {value} for configuration some.config: {problem}"
