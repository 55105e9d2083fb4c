"""BrokerConfig: Kafka's property names, the properties file format, and validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tickwheel.server import BrokerConfig, ConfigError, parse_properties
from tickwheel.server.config._broker import ConfigSource, environment_properties
from tickwheel.server.config._listeners import ListenerSpec


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.listener_specs() == (ListenerSpec("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert config.num_partitions == 1
    assert config.message_max_bytes == 1_048_588
    assert config.socket_request_max_bytes == 104_857_600
    assert config.auto_create_topics_enable


def test_properties_file_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n"
        "! another\n"
        "listeners=PLAINTEXT://127.0.0.1:19092\n"
        "log.dirs = /data/kafka\n"
        "num.partitions: 3\n"
        "auto.create.topics.enable=false\n"
        "log.retention.hours=1\n"
        "producer.purgatory.purge.interval.requests=\\\n"
        "  100\n"
    )
    config = BrokerConfig.from_file(path, {"num.partitions": "6"})
    assert config.listener_specs()[0].port == 19092
    assert config.log_dirs == "/data/kafka"
    assert config.num_partitions == 6
    assert not config.auto_create_topics_enable
    assert config.log_retention_ms == 3_600_000
    assert config.producer_purgatory_purge_interval_requests == 100


def test_kraft_and_old_spellings_are_understood() -> None:
    config = BrokerConfig.from_properties({"node.id": "3", "log.dir": "/x"})
    assert (config.broker_id, config.log_dirs) == (3, "/x")


def test_topic_defaults_use_topic_config_names() -> None:
    defaults = BrokerConfig.from_properties({"log.segment.bytes": "1024"}).topic_defaults()
    assert defaults["segment.bytes"] == "1024"
    assert defaults["max.message.bytes"] == "1048588"


def test_cleaner_settings_give_the_compaction_topic_defaults() -> None:
    config = BrokerConfig.from_properties(
        {
            "log.cleanup.policy": "compact",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.delete.retention.ms": "1000",
            "log.cleaner.threads": "2",
        }
    )
    defaults = config.topic_defaults()
    assert defaults["cleanup.policy"] == "compact"
    assert defaults["min.cleanable.dirty.ratio"] == "0.25"
    assert defaults["delete.retention.ms"] == "1000"
    assert defaults["max.compaction.lag.ms"] == str(2**63 - 1)
    assert config.log_cleaner_threads == 2
    assert BrokerConfig().log_cleaner_enable
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"log.cleaner.min.cleanable.ratio": "half"})


@pytest.mark.parametrize(
    "properties",
    [
        {"num.partitions": "many"},
        {"num.partitions": "0"},
        {"auto.create.topics.enable": "maybe"},
        {"listeners": "CLIENT://127.0.0.1:9093"},
        {"listeners": "PLAINTEXT://127.0.0.1"},
        {"queued.max.request.bytes": "1"},
    ],
)
def test_bad_values_are_refused(properties: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties(properties)


def test_the_connection_defences_default_to_kafkas_values() -> None:
    config = BrokerConfig()
    assert config.queued_max_request_bytes == -1  # no bound, as Kafka
    assert config.sasl_server_max_receive_size == 524_288
    quotas = config.connection_quotas()
    assert quotas.max_connections == quotas.max_connections_per_ip == 2_147_483_647
    assert quotas.max_connection_creation_rate == 2_147_483_647
    assert quotas.per_ip_overrides == {}
    bounded = BrokerConfig.from_properties({"queued.max.request.bytes": "209715200"})
    assert bounded.queued_max_request_bytes == 209_715_200
    # As in Kafka, 0 or below is no bound.
    assert BrokerConfig.from_properties({"queued.max.request.bytes": "0"})


def test_per_ip_overrides_are_parsed_by_address() -> None:
    config = BrokerConfig.from_properties(
        {
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "127.0.0.1:5, localhost:7 ,::1:3",
        }
    )
    overrides = config.connection_quotas().per_ip_overrides
    assert overrides["::1"] == 3
    assert overrides["127.0.0.1"] in (5, 7)  # localhost resolves to one of the two


@pytest.mark.parametrize(
    ("properties", "named"),
    [
        ({"max.connections": "-1"}, "max.connections"),
        ({"max.connections.per.ip": "-5"}, "max.connections.per.ip"),
        ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate"),
        ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "10.0.0.1:-2"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),
        ({"listener.name.plaintext.max.connections": "-2"}, "listener.name.plaintext"),
        ({"listener.name.plaintext.max.connection.creation.rate": "x"}, "listener.name"),
        ({"sasl.server.max.receive.size": "0"}, "sasl.server.max.receive.size"),
        ({"queued.max.request.bytes": "1048576"}, "socket.request.max.bytes"),
        ({"max.request.partition.size.limit": "0"}, "max.request.partition.size.limit"),
    ],
)
def test_bad_connection_limits_are_refused_naming_the_property(
    properties: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        BrokerConfig.from_properties(properties)


@pytest.mark.parametrize(
    "name",
    [
        "controlled.shutdown.max.retries",
        "controlled.shutdown.retry.backoff.ms",
        "connection.failed.authentication.delay.ms",
    ],
)
def test_a_negative_count_or_delay_is_refused_by_name(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(name)} must not be negative$"):
        BrokerConfig.from_properties({name: "-1"})
    assert BrokerConfig.from_properties({name: "0"})


def test_controlled_shutdown_settings_default_to_kafka_s() -> None:
    config = BrokerConfig()
    assert config.controlled_shutdown_max_retries == 3
    assert config.controlled_shutdown_retry_backoff_ms == 5000
    assert config.request_timeout_ms == 30_000
    with pytest.raises(ConfigError, match=r"^request\.timeout\.ms must be at least 1$"):
        BrokerConfig.from_properties({"request.timeout.ms": "0"})


def test_unknown_properties_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    BrokerConfig.from_properties({"sasl.kerberos.service.name": "kafka"})
    assert "sasl.kerberos.service.name" in caplog.text


def test_parse_properties_separators() -> None:
    assert parse_properties("a=1\nb: 2\nc\n  # x\n") == {"a": "1", "b": "2", "c": ""}


def test_environment_names_as_the_apache_kafka_image_maps_them() -> None:
    environ = {
        "KAFKA_LOG_DIRS": "/data",
        "KAFKA_LISTENER_NAME_INTERNAL_SSL___KEY__PASSWORD": "x",
        "KAFKA_HEAP_OPTS": "-Xmx1G",  # the JVM's, not a property
        "HOME": "/root",
    }
    assert environment_properties(environ) == {
        "log.dirs": "/data",
        "listener.name.internal.ssl-key_password": "x",
    }


def test_precedence_file_then_environment_then_override(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions 2\nlog.dirs=/from-file\nbroker.id=1\n")
    environ = {"KAFKA_NUM_PARTITIONS": "4", "KAFKA_LOG_DIRS": "/from-env"}
    config = BrokerConfig.load(path, environ, {"num.partitions": "8"})
    assert (config.broker_id, config.log_dirs, config.num_partitions) == (1, "/from-env", 8)
    assert config.source("broker.id") is ConfigSource.FILE
    assert config.source("log.dirs") is ConfigSource.ENVIRONMENT
    assert config.source("num.partitions") is ConfigSource.OVERRIDE
    assert config.source("message.max.bytes") is ConfigSource.DEFAULT


def test_sources_follow_renamed_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=3\nlog.retention.hours=2\nzookeeper.connect=zk:2181\n")
    config = BrokerConfig.load(path, {})
    assert config.source("broker.id") is ConfigSource.FILE
    assert config.source("log.retention.ms") is ConfigSource.FILE
    # Kafka's cluster default, not a setting the user made.
    assert config.source("offsets.topic.replication.factor") is ConfigSource.DEFAULT


def test_keyword_configs_count_changed_values_as_set() -> None:
    config = BrokerConfig(num_partitions=3)
    assert config.source("num.partitions") is ConfigSource.OVERRIDE
    assert config.source("log.dirs") is ConfigSource.DEFAULT
    assert BrokerConfig.from_properties({"num.partitions": "1"}).source("num.partitions") is (
        ConfigSource.OVERRIDE
    )


def test_load_without_a_file_reads_the_environment() -> None:
    config = BrokerConfig.load(None, {"KAFKA_TICKWHEEL_METRICS_PORT": "0"})
    assert config.metrics_port == 0
    assert config.source("tickwheel.metrics.port") is ConfigSource.ENVIRONMENT


def test_malformed_escape_in_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("log.dirs=\\uZZZZ\n")
    with pytest.raises(ConfigError, match=r"server\.properties"):
        BrokerConfig.load(path, {})
