"""Broker-side schema id validation, through real clients: confluent-kafka's Avro
serializer against the broker's own registry is accepted, plain producers' unframed
bytes, unknown ids and other subjects' ids are refused with INVALID_RECORD, and
kafka-python reads each refused record's reason."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    SerializingProducer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.server import BackgroundBroker, BrokerConfig

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
VALIDATE_VALUES = {"confluent.value.schema.validation": "true"}
ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [{"name": "id", "type": "int"}],
    }
)
OTHER = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]})
UNKNOWN_ID = 9999


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    """One broker serving the registry for the module; each test uses its own topics."""
    log_dir = tmp_path_factory.mktemp("validation")
    config = BrokerConfig.from_properties(
        {
            **TEST_BROKER_PROPERTIES,
            "schema.registry.listeners": "http://127.0.0.1:0",
            "log.dirs": str(log_dir),
        }
    )
    with BackgroundBroker(config) as running:
        yield running


class Registry:
    """The broker's registry: confluent-kafka's client, and registrations over plain HTTP
    (the client caches what it registered, so it would not register again after a
    delete)."""

    def __init__(self, url: str, client: SchemaRegistryClient) -> None:
        self.url = url
        self.client = client

    def register(self, subject: str, schema: str, kind: str = "AVRO") -> int:
        request = urllib.request.Request(
            f"{self.url}/subjects/{subject}/versions",
            data=json.dumps({"schema": schema, "schemaType": kind}).encode(),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return int(json.load(answer)["id"])


@pytest.fixture(scope="module")
def registry(broker: BackgroundBroker) -> Iterator[Registry]:
    url = f"http://127.0.0.1:{broker.schema_registry_ports[0]}"
    with SchemaRegistryClient({"url": url}) as client:
        yield Registry(url, client)


def create_topic(broker: BackgroundBroker, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(TIMEOUT_S)


def framed(schema_id: int, payload: bytes = b"payload") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def send_each(
    broker: BackgroundBroker, topic: str, records: list[tuple[bytes | None, bytes | None]]
) -> list[tuple[int, int]]:
    """Send each record as its own request; (error code, offset) of each."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    outcomes: list[tuple[int, int]] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        code = KafkaError.NO_ERROR if error is None else error.code()
        outcomes.append((code, message.offset() if error is None else -1))

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
        assert producer.flush(TIMEOUT_S) == 0
    return outcomes


def consume_all(broker: BackgroundBroker, topic: str) -> list[tuple[int, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"read-{topic}",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[tuple[int, bytes | None]] = []
    try:
        while True:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, "no end of partition"
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                return seen
            assert error is None, error
            seen.append((message.offset(), message.value()))
    finally:
        consumer.close()


def test_avro_serializer_passes_and_unregistered_values_are_refused(
    broker: BackgroundBroker, registry: Registry
) -> None:
    create_topic(broker, "orders", VALIDATE_VALUES)
    producer = SerializingProducer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "value.serializer": AvroSerializer(registry.client, ORDER),
        }
    )
    for order_id in range(3):
        producer.produce("orders", value={"id": order_id}, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    order_id = registry.client.get_latest_version("orders-value").schema_id
    other_id = registry.register("other-value", OTHER)
    outcomes = send_each(
        broker,
        "orders",
        [
            (None, b"plain bytes"),
            (None, framed(UNKNOWN_ID)),
            (None, framed(other_id)),
            (None, b"\x00\x00"),
            (b"k", None),
            (None, framed(order_id)),
        ],
    )
    refused = KafkaError.INVALID_RECORD
    assert outcomes == [(refused, -1)] * 4 + [(KafkaError.NO_ERROR, 3), (KafkaError.NO_ERROR, 4)]
    stored = consume_all(broker, "orders")
    assert [offset for offset, _ in stored] == [0, 1, 2, 3, 4]
    assert stored[3][1] is None
    assert all(value is not None and value[:5] == framed(order_id, b"") for _, value in stored[:3])


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_one_bad_record_refuses_its_whole_batch_compressed_or_not(
    broker: BackgroundBroker, registry: Registry, compression: str
) -> None:
    topic = f"batched-{compression}"
    create_topic(broker, topic, VALIDATE_VALUES)
    schema_id = registry.register(f"{topic}-value", ORDER)
    outcomes: dict[int, int] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        index = int((message.value() or b"")[5:])
        outcomes[index] = KafkaError.NO_ERROR if error is None else error.code()

    # One linger long enough that the 20 records travel as one batch.
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "linger.ms": 1000,
            "compression.type": compression,
        }
    )
    bad = {4, 13}
    for i in range(20):
        value = framed(UNKNOWN_ID if i in bad else schema_id, b"%d" % i)
        producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S) == 0
    assert {i for i, code in outcomes.items() if code == KafkaError.INVALID_RECORD} == bad
    assert {i for i, code in outcomes.items() if code == KafkaError._INVALID_DIFFERENT_RECORD} == (
        set(range(20)) - bad
    )
    assert consume_all(broker, topic) == []


def refusal_reason(future: Any) -> str:
    """The message kafka-python fails a refused record with."""
    with pytest.raises(kafka.errors.InvalidRecordError) as raised:
        future.get(TIMEOUT_S)
    return str(raised.value.args[0])


def test_kafka_python_reads_each_refused_records_reason(
    broker: BackgroundBroker, registry: Registry
) -> None:
    create_topic(broker, "reasons", VALIDATE_VALUES)
    other_id = registry.register("reasons-other-value", OTHER)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1000)
    futures = [
        producer.send("reasons", value=value, partition=0)
        for value in (b"\x07" + bytes(8), framed(UNKNOWN_ID), framed(other_id))
    ]
    producer.flush(TIMEOUT_S)
    producer.close()
    assert [refusal_reason(future) for future in futures] == [
        "the value has unknown magic byte 7 (expected 0)",
        f"the value's schema id {UNKNOWN_ID} is unknown to the schema registry",
        f"the value's schema id {other_id} is not registered under subject reasons-value",
    ]


def test_redpanda_aliases_validate_keys_by_record_name(
    broker: BackgroundBroker, registry: Registry
) -> None:
    create_topic(
        broker,
        "people",
        {
            "redpanda.key.schema.id.validation": "true",
            "redpanda.key.subject.name.strategy": "RecordNameStrategy",
        },
    )
    by_record = registry.register("com.acme.Order", ORDER)
    by_topic = registry.register("people-key", OTHER)
    outcomes = send_each(
        broker,
        "people",
        [
            (framed(by_record), b"values are not validated"),
            (framed(by_topic), None),
            (None, b"a null key passes"),
        ],
    )
    assert [code for code, _ in outcomes] == [
        KafkaError.NO_ERROR,
        KafkaError.INVALID_RECORD,
        KafkaError.NO_ERROR,
    ]


def test_topic_record_names_take_a_json_schemas_title(
    broker: BackgroundBroker, registry: Registry
) -> None:
    strategy = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
    create_topic(
        broker,
        "sensors",
        {**VALIDATE_VALUES, "confluent.value.subject.name.strategy": strategy},
    )
    reading = json.dumps({"title": "Reading", "type": "object"})
    titled = registry.register("sensors-Reading", reading, "JSON")
    untitled = registry.register("sensors-value", json.dumps({"type": "string"}), "JSON")
    outcomes = send_each(broker, "sensors", [(None, framed(titled)), (None, framed(untitled))])
    assert [code for code, _ in outcomes] == [KafkaError.NO_ERROR, KafkaError.INVALID_RECORD]


def test_a_soft_deleted_subject_no_longer_admits_its_ids(
    broker: BackgroundBroker, registry: Registry
) -> None:
    create_topic(broker, "revoked", VALIDATE_VALUES)
    schema_id = registry.register("revoked-value", ORDER)
    assert send_each(broker, "revoked", [(None, framed(schema_id))]) == [(KafkaError.NO_ERROR, 0)]
    registry.client.delete_subject("revoked-value")
    assert send_each(broker, "revoked", [(None, framed(schema_id))]) == [
        (KafkaError.INVALID_RECORD, -1)
    ]
    assert registry.register("revoked-value", ORDER) == schema_id
    assert send_each(broker, "revoked", [(None, framed(schema_id))]) == [(KafkaError.NO_ERROR, 1)]


def alter_error(broker: BackgroundBroker, topic: str, name: str, value: str) -> KafkaError | None:
    """The error IncrementalAlterConfigs answers for setting ``name`` on ``topic``."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    (answer,) = admin.incremental_alter_configs([resource]).values()
    failure = answer.exception(TIMEOUT_S)
    return None if failure is None else failure.args[0]


def test_configs_are_altered_checked_and_described_with_their_types(
    broker: BackgroundBroker, registry: Registry
) -> None:
    create_topic(broker, "altered", {})
    assert send_each(broker, "altered", [(None, b"plain")]) == [(KafkaError.NO_ERROR, 0)]
    for name, value in (
        ("confluent.value.schema.validation", "maybe"),
        ("confluent.value.subject.name.strategy", "TopicNameStrategy"),
    ):
        error = alter_error(broker, "altered", name, value)
        assert error is not None, name
        assert error.code() == KafkaError.INVALID_CONFIG, name
        assert name in error.str()
    assert alter_error(broker, "altered", "confluent.value.schema.validation", "true") is None
    assert send_each(broker, "altered", [(None, b"plain")]) == [(KafkaError.INVALID_RECORD, -1)]
    alias = alter_error(broker, "altered", "redpanda.value.schema.id.validation", "true")
    assert alias is not None
    assert alias.code() == KafkaError.INVALID_CONFIG
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described: dict[str, Any] = client.describe_configs(
            [KafkaPythonResource(ConfigResourceType.TOPIC, "altered")], config_filter="all"
        )
    finally:
        client.close()
    entry = described["topic"]["altered"]["confluent.value.schema.validation"]
    assert (entry["value"], entry["config_type"]) == ("true", "BOOLEAN")


def test_validation_needs_a_broker_serving_the_registry(
    tickwheel_session_broker: BackgroundBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": tickwheel_session_broker.bootstrap_servers})
    topic = NewTopic("unvalidatable", 1, 1, config=VALIDATE_VALUES)
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([topic])["unvalidatable"].result(TIMEOUT_S)
    error: KafkaError = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "confluent.value.schema.validation" in error.str()
    assert "schema.registry.listeners is unset" in error.str()


def test_a_validating_topic_refuses_records_once_the_registry_is_gone(tmp_path: Path) -> None:
    with_registry = {
        **TEST_BROKER_PROPERTIES,
        "schema.registry.listeners": "http://127.0.0.1:0",
        "log.dirs": str(tmp_path),
    }
    with BackgroundBroker(BrokerConfig.from_properties(with_registry)) as first:
        create_topic(first, "kept", VALIDATE_VALUES)
    without = {k: v for k, v in with_registry.items() if k != "schema.registry.listeners"}
    with BackgroundBroker(BrokerConfig.from_properties(without)) as second:
        producer = kafka.KafkaProducer(bootstrap_servers=second.bootstrap_servers)
        future = producer.send("kept", value=framed(1), partition=0)
        producer.flush(TIMEOUT_S)
        producer.close()
        with pytest.raises(kafka.errors.InvalidRecordError):
            future.get(TIMEOUT_S)
