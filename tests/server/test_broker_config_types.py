"""Every config Kafka's broker defines, through real clients: IncrementalAlterConfigs
accepts the dynamic ones (used by this broker or not) and refuses the rest with Kafka's
errors; DescribeConfigs lists each with Kafka's type, which kafka-python reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
BROKER = ConfigResource.Type.BROKER
SET = AlterConfigOpType.SET
INCREMENTAL_ALTER_CONFIGS = 44
INVALID_REQUEST = 42
RELOGIN = "sasl.kerberos.min.time.before.relogin"


def broker_config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1",
        }
    )


def alter_broker(client: AdminClient, name: str, value: str) -> None:
    resource = ConfigResource(
        BROKER, "0", incremental_configs=[ConfigEntry(name, value, incremental_operation=SET)]
    )
    client.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def refusal(client: AdminClient, name: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as refused:
        alter_broker(client, name, value)
    error: KafkaError = refused.value.args[0]
    return error


def describe_broker(client: AdminClient) -> dict[str, ConfigEntry]:
    (future,) = client.describe_configs([ConfigResource(BROKER, "0")]).values()
    entries: dict[str, ConfigEntry] = future.result(TIMEOUT_S)
    return entries


def test_a_kafka_config_this_broker_does_not_use_is_stored_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path)
    with BackgroundBroker(config) as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert describe_broker(client)[RELOGIN].value == "60000"
        alter_broker(client, RELOGIN, "58000")
        alter_broker(client, "listener.name.plaintext.ssl.keystore.location", "/keys/broker.jks")
    with BackgroundBroker(config) as again:
        entries = describe_broker(AdminClient({"bootstrap.servers": again.bootstrap_servers}))
    relogin = entries[RELOGIN]
    assert relogin.value == "58000"
    assert relogin.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not relogin.is_read_only
    listener = entries["listener.name.plaintext.ssl.keystore.location"]
    assert listener.value == "/keys/broker.jks"
    assert not listener.is_read_only


def test_kafkas_refusals_of_broker_configs(tmp_path: Path) -> None:
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for name, value, message in (
            ("num.partitions", "3", "Cannot update these configs dynamically"),
            ("ssl.keystore.location", "/keys/broker.jks", "only per-listener"),
            (RELOGIN, "soon", "Not a number of type LONG"),
            ("num.io.threads", "2147483648", "Not a number of type INT"),
            ("log.preallocate", "maybe", "either true or false"),
        ):
            error = refusal(client, name, value)
            assert error.code() == KafkaError.INVALID_REQUEST, name
            assert message in error.str()
            assert name in error.str()
        unknown = refusal(client, "no.such.broker.config", "1")
        assert unknown.code() == KafkaError.INVALID_CONFIG
        assert describe_broker(client)[RELOGIN].source == ConfigSource.DEFAULT_CONFIG.value
        wire = WireClient(broker.bootstrap_servers)
        try:
            body = wire.call(
                INCREMENTAL_ALTER_CONFIGS,
                1,
                {
                    "resources": [
                        {
                            "resource_type": int(BROKER.value),
                            "resource_name": "",
                            "configs": [
                                {"name": RELOGIN, "config_operation": int(SET.value), "value": "1"}
                            ],
                        }
                    ],
                    "validate_only": False,
                },
            )
        finally:
            wire.close()
    (response,) = body.responses
    assert response.error_code == INVALID_REQUEST
    assert "broker id must be specified" in response.error_message


def test_kafka_python_reads_each_configs_kafka_type(tmp_path: Path) -> None:
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        confluent = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        confluent.create_topics([NewTopic("typed", 1, 1)])["typed"].result(TIMEOUT_S)
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            described: dict[str, Any] = client.describe_configs(
                [
                    KafkaPythonResource(ConfigResourceType.BROKER, "0"),
                    KafkaPythonResource(ConfigResourceType.TOPIC, "typed"),
                ],
                config_filter="all",
            )
        finally:
            client.close()
    brokers = described["broker"]["0"]
    assert {
        name: brokers[name]["config_type"]
        for name in (
            RELOGIN,
            "num.io.threads",
            "offsets.topic.replication.factor",
            "log.cleaner.min.cleanable.ratio",
            "auto.create.topics.enable",
            "log.cleanup.policy",
            "principal.builder.class",
            "sasl.kerberos.service.name",
            "ssl.key.password",
        )
    } == {
        RELOGIN: "LONG",
        "num.io.threads": "INT",
        "offsets.topic.replication.factor": "SHORT",
        "log.cleaner.min.cleanable.ratio": "DOUBLE",
        "auto.create.topics.enable": "BOOLEAN",
        "log.cleanup.policy": "LIST",
        "principal.builder.class": "CLASS",
        "sasl.kerberos.service.name": "STRING",
        "ssl.key.password": "PASSWORD",
    }
    assert brokers["ssl.key.password"]["is_sensitive"]
    assert brokers["ssl.key.password"]["value"] is None
    assert brokers["broker.id"]["read_only"]
    assert not brokers[RELOGIN]["read_only"]
    topics = described["topic"]["typed"]
    assert {
        name: topics[name]["config_type"]
        for name in ("retention.ms", "segment.bytes", "cleanup.policy", "min.cleanable.dirty.ratio")
    } == {
        "retention.ms": "LONG",
        "segment.bytes": "INT",
        "cleanup.policy": "LIST",
        "min.cleanable.dirty.ratio": "DOUBLE",
    }
