"""Live config changes on one broker: IncrementalAlterConfigs and AlterConfigs from
confluent-kafka, kafka-python and aiokafka, DescribeConfigs sources and synonyms, and
every config Kafka's broker defines: the dynamic ones accepted (used by this broker or
not), the rest refused with Kafka's errors, each described with Kafka's type."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AIOKafkaNewTopic
from aiokafka.admin.config_resource import ConfigResource as AIOKafkaResource
from aiokafka.admin.config_resource import ConfigResourceType as AIOKafkaResourceType
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as ConfluentTopicPartition
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

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
RETENTION_CHECK_MS = 100
SMALL_SEGMENT_BYTES = 1024
VALUE_BYTES = 300
TOPIC = ConfigResource.Type.TOPIC
BROKER = ConfigResource.Type.BROKER
INCREMENTAL_ALTER_CONFIGS = ApiKey.INCREMENTAL_ALTER_CONFIGS
SET = AlterConfigOpType.SET
DELETE = AlterConfigOpType.DELETE
APPEND = AlterConfigOpType.APPEND
INVALID_REQUEST = 42
RELOGIN = "sasl.kerberos.min.time.before.relogin"
KEYSTORE = "listener.name.plaintext.ssl.keystore.location"


def broker_config(log_dir: Path) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1",
            "log.retention.check.interval.ms": str(RETENTION_CHECK_MS),
        }
    )


def admin(broker: BackgroundBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create(client: AdminClient, name: str, **configs: str) -> None:
    client.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(TIMEOUT_S)


def alter(
    client: AdminClient,
    kind: ConfigResource.Type,
    name: str,
    *changes: tuple[str, AlterConfigOpType, str | None],
    validate_only: bool = False,
) -> None:
    resource = ConfigResource(
        kind,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=op) for key, op, value in changes
        ],
    )
    client.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(
        TIMEOUT_S
    )


def describe(client: AdminClient, kind: ConfigResource.Type, name: str) -> dict[str, ConfigEntry]:
    (future,) = client.describe_configs([ConfigResource(kind, name)]).values()
    entries: dict[str, ConfigEntry] = future.result(TIMEOUT_S)
    return entries


def produce(
    broker: BackgroundBroker, topic: str, value: bytes, acks: str = "all"
) -> KafkaError | None:
    """Produce one message; its delivery error or None."""
    outcome: list[KafkaError | None] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": acks,
            "linger.ms": 0,
            "retries": 0,
        }
    )
    producer.produce(topic, value, partition=0, on_delivery=lambda e, _m: outcome.append(e))
    assert producer.flush(TIMEOUT_S) == 0
    return outcome[0]


def assert_too_large(error: KafkaError | None) -> None:
    assert error is not None
    assert error.code() == KafkaError.MSG_SIZE_TOO_LARGE


def low_watermark(broker: BackgroundBroker, topic: str) -> int:
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks"})
    try:
        low, _high = reader.get_watermark_offsets(
            ConfluentTopicPartition(topic, 0), timeout=TIMEOUT_S
        )
    finally:
        reader.close()
    return int(low)


def alter_cluster_default(broker: BackgroundBroker, name: str, value: str) -> Any:
    """Set a cluster-wide dynamic broker default (resource ``""``, which the admin
    clients of Python cannot name) over the wire; the resource's response."""
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
                            {"name": name, "config_operation": int(SET.value), "value": value}
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
    finally:
        wire.close()
    (response,) = body.responses
    return response


def test_a_topic_change_takes_effect_on_the_live_log_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path)
    with BackgroundBroker(config) as broker:
        client = admin(broker)
        create(client, "live", **{"segment.bytes": str(SMALL_SEGMENT_BYTES)})
        for _ in range(12):
            assert produce(broker, "live", b"x" * VALUE_BYTES) is None
        assert low_watermark(broker, "live") == 0
        alter(client, TOPIC, "live", ("retention.ms", SET, "1"), ("max.message.bytes", SET, "200"))
        # Retention now deletes the closed segments of the running log.
        deadline = time.monotonic() + TIMEOUT_S
        while low_watermark(broker, "live") == 0 and time.monotonic() < deadline:
            time.sleep(RETENTION_CHECK_MS / 1000)
        assert low_watermark(broker, "live") > 0
        assert_too_large(produce(broker, "live", b"x" * VALUE_BYTES))
        entries = describe(client, TOPIC, "live")
        assert entries["retention.ms"].value == "1"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    with BackgroundBroker(config) as again:
        client = admin(again)
        entries = describe(client, TOPIC, "live")
        assert entries["max.message.bytes"].value == "200"
        assert entries["segment.bytes"].value == str(SMALL_SEGMENT_BYTES)
        assert_too_large(produce(again, "live", b"x" * VALUE_BYTES))
        alter(client, TOPIC, "live", ("max.message.bytes", DELETE, None))
        assert produce(again, "live", b"x" * VALUE_BYTES) is None


def test_timestamp_type_and_min_insync_replicas_change_on_the_live_partition(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = admin(tickwheel_broker)
    create(client, "stamped")
    alter(
        client,
        TOPIC,
        "stamped",
        ("message.timestamp.type", SET, "LogAppendTime"),
        ("min.insync.replicas", SET, "2"),
    )
    error = produce(tickwheel_broker, "stamped", b"v", acks="all")
    assert error is not None
    assert error.code() == KafkaError.NOT_ENOUGH_REPLICAS
    assert produce(tickwheel_broker, "stamped", b"v", acks="1") is None
    reader = Consumer({"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "ts"})
    try:
        reader.assign([ConfluentTopicPartition("stamped", 0, 0)])
        message = reader.poll(TIMEOUT_S)
    finally:
        reader.close()
    assert message is not None
    assert message.error() is None
    assert message.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME


def test_validate_only_changes_nothing(tickwheel_broker: BackgroundBroker) -> None:
    client = admin(tickwheel_broker)
    create(client, "dry")
    alter(client, TOPIC, "dry", ("retention.ms", SET, "1000"), validate_only=True)
    entries = describe(client, TOPIC, "dry")
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    with pytest.raises(KafkaException) as refused:
        alter(client, TOPIC, "dry", ("retention.ms", SET, "soon"), validate_only=True)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_bad_resources_are_refused_alone_and_nothing_of_them_is_applied(
    tickwheel_broker: BackgroundBroker,
) -> None:
    client = admin(tickwheel_broker)
    for name in ("good", "bad-value", "unknown-name"):
        create(client, name)

    def resource(name: str, *changes: tuple[str, str]) -> ConfigResource:
        return ConfigResource(
            TOPIC,
            name,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=SET) for k, v in changes],
        )

    good = resource("good", ("retention.ms", "5000"))
    bad_value = resource("bad-value", ("retention.bytes", "1000"), ("retention.ms", "soon"))
    unknown = resource("unknown-name", ("no.such.config", "1"))
    missing = resource("missing", ("retention.ms", "5000"))
    futures = client.incremental_alter_configs([good, bad_value, unknown, missing])
    futures[good].result(TIMEOUT_S)
    for refused, code, key in (
        (bad_value, KafkaError.INVALID_CONFIG, "retention.ms"),
        (unknown, KafkaError.INVALID_CONFIG, "no.such.config"),
        (missing, KafkaError.UNKNOWN_TOPIC_OR_PART, "missing"),
    ):
        with pytest.raises(KafkaException) as raised:
            futures[refused].result(TIMEOUT_S)
        assert raised.value.args[0].code() == code
        assert key in raised.value.args[0].str()
    assert describe(client, TOPIC, "good")["retention.ms"].value == "5000"
    untouched = describe(client, TOPIC, "bad-value")
    assert untouched["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_append_and_subtract_apply_to_list_configs_only(tickwheel_broker: BackgroundBroker) -> None:
    client = admin(tickwheel_broker)
    create(client, "lists")
    alter(client, TOPIC, "lists", ("cleanup.policy", APPEND, "compact"))
    assert describe(client, TOPIC, "lists")["cleanup.policy"].value == "delete,compact"
    alter(client, TOPIC, "lists", ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert describe(client, TOPIC, "lists")["cleanup.policy"].value == "compact"
    with pytest.raises(KafkaException) as refused:
        alter(client, TOPIC, "lists", ("retention.ms", APPEND, "5"))
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_dynamic_broker_defaults_reach_topics_without_overrides_and_persist(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path)
    with BackgroundBroker(config) as broker:
        client = admin(broker)
        create(client, "inherits")
        create(client, "overrides", **{"retention.ms": "1234"})
        assert alter_cluster_default(broker, "log.retention.ms", "3600000").error_code == 0
        alter(client, BROKER, "0", ("message.max.bytes", SET, "200"))
        assert_too_large(produce(broker, "inherits", b"x" * VALUE_BYTES))
        with pytest.raises(KafkaException) as refused:
            alter(client, BROKER, "0", ("broker.id", SET, "7"))
        assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    with BackgroundBroker(config) as again:
        client = admin(again)
        inherits = describe(client, TOPIC, "inherits")
        assert inherits["retention.ms"].value == "3600000"
        assert inherits["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert inherits["max.message.bytes"].value == "200"
        assert inherits["max.message.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert describe(client, TOPIC, "overrides")["retention.ms"].value == "1234"
        brokers = describe(client, BROKER, "0")
        assert brokers["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert not brokers["message.max.bytes"].is_read_only
        assert brokers["broker.id"].is_read_only


def test_alter_configs_replaces_every_override(tickwheel_broker: BackgroundBroker) -> None:
    client = admin(tickwheel_broker)
    create(client, "replaced", **{"retention.ms": "1000"})
    resource = ConfigResource(TOPIC, "replaced", set_config={"segment.ms": "60000"})
    # The legacy API on purpose: it is the one that sends AlterConfigs (key 33).
    with pytest.warns(DeprecationWarning, match="alter_configs"):
        futures = client.alter_configs([resource])
    futures[resource].result(TIMEOUT_S)
    entries = describe(client, TOPIC, "replaced")
    assert entries["segment.ms"].value == "60000"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_kafka_python_alter_configs_and_synonyms(tickwheel_broker: BackgroundBroker) -> None:
    create(admin(tickwheel_broker), "kafka-python", **{"retention.ms": "1000"})
    client = KafkaAdminClient(bootstrap_servers=tickwheel_broker.bootstrap_servers)
    topic = ConfigResourceType.TOPIC
    try:
        result = client.alter_configs(
            [KafkaPythonResource(topic, "kafka-python", {"segment.ms": "60000"})]
        )
        assert result == {"topic": {"kafka-python": "OK"}}
        refused = client.alter_configs(
            [KafkaPythonResource(topic, "kafka-python", {"segment.ms": "-5"})]
        )
        assert "InvalidConfig" in refused["topic"]["kafka-python"]
        described = client.describe_configs(
            [KafkaPythonResource(topic, "kafka-python")],
            include_synonyms=True,
            config_filter="all",
        )
    finally:
        client.close()
    configs = described["topic"]["kafka-python"]
    assert configs["segment.ms"]["value"] == "60000"
    assert configs["retention.ms"]["value"] == "1000"
    synonyms = [s["name"] for s in configs["segment.ms"]["synonyms"]]
    assert synonyms == ["segment.ms", "log.roll.ms"]


@pytest.mark.asyncio
async def test_aiokafka_alter_and_describe_configs(async_tickwheel_broker: Broker) -> None:
    client = AIOKafkaAdminClient(bootstrap_servers=async_tickwheel_broker.bootstrap_servers)
    await client.start()
    try:
        await client.create_topics([AIOKafkaNewTopic("aio", 1, 1)])
        resource = AIOKafkaResource(AIOKafkaResourceType.TOPIC, "aio", {"retention.ms": "9000"})
        (altered,) = await client.alter_configs([resource])
        (described,) = await client.describe_configs(
            [AIOKafkaResource(AIOKafkaResourceType.TOPIC, "aio")], include_synonyms=True
        )
    finally:
        await client.close()
    assert [r[0] for r in altered.resources] == [0]
    (topic,) = described.resources
    entries = {entry[0]: entry for entry in topic[4]}
    name, value, _read_only, source, _sensitive, synonyms = entries["retention.ms"]
    assert (name, value, source) == ("retention.ms", "9000", 1)
    assert [s[0] for s in synonyms] == ["retention.ms", "log.retention.ms"]


def refusal(client: AdminClient, name: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as refused:
        alter(client, BROKER, "0", (name, SET, value))
    error: KafkaError = refused.value.args[0]
    return error


def test_a_kafka_config_this_broker_does_not_use_is_stored_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path)
    with BackgroundBroker(config) as broker:
        client = admin(broker)
        assert describe(client, BROKER, "0")[RELOGIN].value == "60000"
        alter(client, BROKER, "0", (RELOGIN, SET, "58000"))
        alter(
            client,
            BROKER,
            "0",
            ("listener.name.plaintext.ssl.keystore.location", SET, "/keys/broker.jks"),
        )
    with BackgroundBroker(config) as again:
        entries = describe(admin(again), BROKER, "0")
    relogin = entries[RELOGIN]
    assert relogin.value == "58000"
    assert relogin.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not relogin.is_read_only
    listener = entries[KEYSTORE]
    assert listener.value == "/keys/broker.jks"
    assert not listener.is_read_only


def test_kafkas_refusals_of_broker_configs(tmp_path: Path) -> None:
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        client = admin(broker)
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
        assert describe(client, BROKER, "0")[RELOGIN].source == ConfigSource.DEFAULT_CONFIG.value
        response = alter_cluster_default(broker, RELOGIN, "1")
    assert response.error_code == INVALID_REQUEST
    assert "broker id must be specified" in response.error_message


def test_kafka_python_reads_each_configs_kafka_type(tmp_path: Path) -> None:
    with BackgroundBroker(broker_config(tmp_path)) as broker:
        create(admin(broker), "typed")
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
