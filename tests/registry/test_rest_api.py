"""The registry a broker serves, through confluent-kafka's SchemaRegistryClient and Avro
serdes unchanged, and through raw HTTP for Confluent's error bodies."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from security.certs import write_certificates
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
REGISTRY_ON = {"schema.registry.listeners": "http://127.0.0.1:0"}


def user(*extra: dict[str, Any]) -> Schema:
    fields = [{"name": "name", "type": "string"}, *extra]
    return Schema(json.dumps({"type": "record", "name": "User", "fields": fields}), "AVRO")


V1 = user()
V2 = user({"name": "age", "type": "int", "default": 0})
INCOMPATIBLE = user({"name": "email", "type": "string"})


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return dict(REGISTRY_ON)


def registry_url(broker: BackgroundBroker) -> str:
    return f"http://127.0.0.1:{broker.schema_registry_ports[0]}"


@pytest.fixture
def client(tickwheel_broker: BackgroundBroker) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url(tickwheel_broker)}) as client:
        yield client


def refusal(call: Any, *args: Any, **kwargs: Any) -> tuple[int, int]:
    with pytest.raises(SchemaRegistryError) as refused:
        call(*args, **kwargs)
    return refused.value.http_status_code, refused.value.error_code


def test_avro_serializer_and_deserializer_round_trip_through_the_broker(
    tickwheel_broker: BackgroundBroker, client: SchemaRegistryClient
) -> None:
    serializer = AvroSerializer(client, V2.schema_str)
    deserializer = AvroDeserializer(client)
    context = SerializationContext("users", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    producer.produce("users", serializer({"name": "ada", "age": 36}, context))
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": tickwheel_broker.bootstrap_servers,
            "group.id": "readers",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["users"])
        message = consumer.poll(TIMEOUT_S)
        assert message is not None
        assert message.error() is None
        assert deserializer(message.value(), context) == {"name": "ada", "age": 36}
    finally:
        consumer.close()
    assert client.get_subjects() == ["users-value"]
    assert client.get_latest_version("users-value").version == 1


def test_versions_lookup_and_an_incompatible_schema_refused_with_409(
    client: SchemaRegistryClient,
) -> None:
    first = client.register_schema("users-value", V1)
    second = client.register_schema("users-value", V2)
    assert second != first
    assert client.register_schema("users-value", V2) == second  # already there
    assert client.get_versions("users-value") == [1, 2]
    found = client.lookup_schema("users-value", V1)
    assert (found.version, found.schema_id) == (1, first)
    assert client.get_version("users-value", 2).schema_id == second
    assert client.get_schema(second).schema_str == json.dumps(
        json.loads(V2.schema_str), separators=(",", ":")
    )
    assert client.test_compatibility("users-value", INCOMPATIBLE) is False
    assert client.test_compatibility("users-value", V2) is True
    assert refusal(client.register_schema, "users-value", INCOMPATIBLE) == (409, 409)
    assert client.get_versions("users-value") == [1, 2]
    # The same schema under another subject keeps its id.
    assert client.register_schema("people-value", V1) == first
    versions = client.get_schema_versions(first)
    assert {(v.subject, v.version) for v in versions} == {("users-value", 1), ("people-value", 1)}


def test_compatibility_per_subject(client: SchemaRegistryClient) -> None:
    client.register_schema("strict", V1)
    client.register_schema("loose", V1)
    client.set_compatibility("loose", "NONE")
    assert client.get_compatibility("loose") == "NONE"
    assert client.get_compatibility() == "BACKWARD"
    assert client.register_schema("loose", INCOMPATIBLE) > 0
    assert refusal(client.register_schema, "strict", INCOMPATIBLE) == (409, 409)
    client.set_compatibility(level="NONE")
    client.set_compatibility("strict", "FULL")
    assert refusal(client.register_schema, "strict", INCOMPATIBLE) == (409, 409)
    assert refusal(client.set_compatibility, "strict", "SIDEWAYS") == (422, 42203)


def test_soft_and_hard_delete_with_their_error_codes(
    tickwheel_broker: BackgroundBroker, client: SchemaRegistryClient
) -> None:
    first = client.register_schema("s", V1)
    client.register_schema("s", V2)
    assert refusal(client.delete_version, "s", 1, permanent=True) == (404, 40407)
    assert client.delete_version("s", 1) == 1
    assert refusal(client.get_version, "s", 1) == (404, 40402)
    assert refusal(client.delete_version, "s", 1) == (404, 40406)
    assert client.get_versions("s") == [2]
    assert client.get_schema(first).schema_str  # soft-deleted: the id still answers
    assert client.delete_version("s", 1, permanent=True) == 1
    # Asked over HTTP: the client keeps schemas by id in its cache.
    assert raw(tickwheel_broker, "GET", f"/schemas/ids/{first}")[1]["error_code"] == 40403
    assert refusal(client.delete_subject, "s", permanent=True) == (404, 40405)
    assert client.delete_subject("s") == [2]
    assert refusal(client.get_versions, "s") == (404, 40401)
    assert refusal(client.lookup_schema, "s", V2) == (404, 40401)
    assert client.get_subjects() == []
    assert client.get_subjects(deleted=True) == ["s"]
    assert client.get_subjects(deleted_only=True) == ["s"]
    assert client.get_versions("s", deleted=True) == [2]
    assert refusal(client.delete_subject, "s") == (404, 40404)
    assert client.delete_subject("s", permanent=True) == [2]
    assert refusal(client.delete_subject, "s") == (404, 40401)


def test_read_only_mode_refuses_writes(client: SchemaRegistryClient) -> None:
    client.update_mode("frozen", "READONLY")
    assert client.get_mode("frozen") == "READONLY"
    assert refusal(client.register_schema, "frozen", V1) == (422, 42205)
    assert client.register_schema("open", V1) > 0
    assert client.get_subjects(subject_prefix="fro") == []  # nothing registered there
    assert client.get_subjects(subject_prefix="op") == ["open"]
    assert client.get_subjects(offset=0, limit=0) == []


def test_a_restart_keeps_subjects_and_ids(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {**TEST_BROKER_PROPERTIES, **REGISTRY_ON, "log.dirs": str(tmp_path)}
    )
    with (
        BackgroundBroker(config) as broker,
        SchemaRegistryClient({"url": registry_url(broker)}) as client,
    ):
        first = client.register_schema("a", V1)
        second = client.register_schema("b", INCOMPATIBLE)
        client.set_compatibility("a", "FULL")
    with (
        BackgroundBroker(config) as broker,
        SchemaRegistryClient({"url": registry_url(broker)}) as client,
    ):
        assert client.get_schema(first).schema_str
        assert client.lookup_schema("b", INCOMPATIBLE).schema_id == second
        assert client.get_compatibility("a") == "FULL"
        third = client.register_schema("c", V2)
        assert third not in (first, second)


def test_a_schemas_topic_written_as_confluent_writes_it_is_read(
    tickwheel_broker: BackgroundBroker, client: SchemaRegistryClient
) -> None:
    client.register_schema("mine", V1)  # the topic exists from now on
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    key = b'{"keytype":"SCHEMA","subject":"theirs","version":1,"magic":1}'
    value = json.dumps(
        {"subject": "theirs", "version": 1, "id": 40, "schema": V2.schema_str, "deleted": False}
    ).encode()
    producer.produce("_schemas", value, key)
    assert producer.flush(TIMEOUT_S) == 0
    assert client.get_version("theirs", 1).schema_id == 40
    assert client.register_schema("next", INCOMPATIBLE) == 41


def raw(
    broker: BackgroundBroker, method: str, path: str, body: bytes | None = None
) -> tuple[int, Any]:
    request = urllib.request.Request(
        registry_url(broker) + path,
        data=body,
        method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error_code", "reason"),
    [
        ("GET", "/subjects/nobody/versions", None, 404, 40401, "Subject 'nobody' not found"),
        ("GET", "/schemas/ids/999", None, 404, 40403, "Schema 999 not found"),
        ("GET", "/no/such/path", None, 404, 404, "Not Found"),
        ("POST", "/subjects/s/versions", b"{not json", 400, 400, "not JSON"),
        ("POST", "/subjects/s/versions", b"[1, 2]", 422, 422, "JSON object"),
        ("POST", "/subjects/s/versions", b'{"schema": 5}', 422, 422, "'schema'"),
        ("POST", "/subjects/s/versions", b'{"schema": "{\\"type\\": 1}"}', 422, 42201, "Invalid"),
        (
            "POST",
            "/subjects/s/versions",
            b'{"schema": "\\"int\\"", "schemaType": "THRIFT"}',
            422,
            42201,
            "THRIFT",
        ),
        ("PUT", "/config", b'{"compatibility": "SIDEWAYS"}', 422, 42203, "BACKWARD"),
        ("PUT", "/mode", b'{"mode": "SIDEWAYS"}', 422, 42204, "READONLY"),
        ("GET", "/config/nobody", None, 404, 40408, "nobody"),
        ("GET", "/subjects/s/versions/zero", None, 422, 42202, "'zero'"),
        ("DELETE", "/schemas/ids/1", None, 405, 405, "Not Allowed"),
    ],
)
def test_refusals_are_confluents_json_error_body(
    tickwheel_broker: BackgroundBroker,
    method: str,
    path: str,
    body: bytes | None,
    status: int,
    error_code: int,
    reason: str,
) -> None:
    got_status, answer = raw(tickwheel_broker, method, path, body)
    assert got_status == status
    assert set(answer) == {"error_code", "message"}
    assert answer["error_code"] == error_code
    assert reason in answer["message"]


def test_schemas_topic_is_compacted_with_one_partition(
    tickwheel_broker: BackgroundBroker, client: SchemaRegistryClient
) -> None:
    client.register_schema("s", V1)
    info = tickwheel_broker.call(lambda broker: broker.context.topics.topics["_schemas"])
    assert info.num_partitions == 1  # type: ignore[attr-defined]
    assert info.configs["cleanup.policy"] == "compact"  # type: ignore[attr-defined]


@pytest.fixture
def off_broker(tmp_path: Path) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties({**TEST_BROKER_PROPERTIES, "log.dirs": str(tmp_path)})
    with BackgroundBroker(config) as broker:
        yield broker


def test_the_registry_is_off_by_default(off_broker: BackgroundBroker) -> None:
    assert off_broker.schema_registry_ports == []


@pytest.mark.parametrize("value", ["ftp://127.0.0.1:0", "http://127.0.0.1", "127.0.0.1:8081"])
def test_a_bad_listener_is_refused_naming_the_property(tmp_path: Path, value: str) -> None:
    config = BrokerConfig.from_properties(
        {**TEST_BROKER_PROPERTIES, "log.dirs": str(tmp_path), "schema.registry.listeners": value}
    )
    with pytest.raises(ConfigError, match=r"schema\.registry\.listeners"):
        BackgroundBroker(config).start()


def test_json_schemas_register_and_are_checked(client: SchemaRegistryClient) -> None:
    closed = {"type": "object", "properties": {"name": {"type": "string"}}}
    first = client.register_schema(
        "events-value", Schema(json.dumps({**closed, "additionalProperties": False}), "JSON")
    )
    assert client.get_schema(first).schema_type == "JSON"
    grown = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}}
    assert client.register_schema("events-value", Schema(json.dumps(grown), "JSON")) != first
    narrowed = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}
    assert refusal(
        client.register_schema, "events-value", Schema(json.dumps(narrowed), "JSON")
    ) == (409, 409)
    assert refusal(client.register_schema, "events-value", V1) == (409, 409)
    assert refusal(client.register_schema, "other", Schema('{"type": "strang"}', "JSON")) == (
        422,
        42201,
    )


def test_https_listeners_serve_tls_with_the_brokers_key_store(tmp_path: Path) -> None:
    certificates = write_certificates(tmp_path / "certs")
    config = BrokerConfig.from_properties(
        {
            **TEST_BROKER_PROPERTIES,
            **certificates.broker_properties(),
            "log.dirs": str(tmp_path / "logs"),
            "schema.registry.listeners": "https://127.0.0.1:0",
        }
    )
    with BackgroundBroker(config) as broker:
        url = f"https://127.0.0.1:{broker.schema_registry_ports[0]}"
        with SchemaRegistryClient({"url": url, "ssl.ca.location": str(certificates.ca)}) as client:
            assert client.register_schema("s", V1) == 1
        plain = f"http://127.0.0.1:{broker.schema_registry_ports[0]}/subjects"
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(plain, timeout=TIMEOUT_S).close()


def test_an_https_listener_without_a_key_store_is_refused(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            **TEST_BROKER_PROPERTIES,
            "log.dirs": str(tmp_path),
            "schema.registry.listeners": "https://127.0.0.1:0",
        }
    )
    with pytest.raises(ConfigError, match=r"schema\.registry\.listeners: .*key store"):
        BackgroundBroker(config).start()


def test_import_mode_keeps_the_ids_and_versions_given(tickwheel_broker: BackgroundBroker) -> None:
    def body(schema: Schema, **extra: int) -> bytes:
        return json.dumps({"schema": schema.schema_str, **extra}).encode()

    register = "/subjects/imported/versions"
    assert raw(tickwheel_broker, "POST", register, body(V1, version=7))[1]["error_code"] == 42205
    assert raw(tickwheel_broker, "PUT", "/mode/imported", b'{"mode": "IMPORT"}') == (
        200,
        {"mode": "IMPORT"},
    )
    assert raw(tickwheel_broker, "POST", register, body(V1, id=100, version=5)) == (
        200,
        {"id": 100},
    )
    assert raw(tickwheel_broker, "GET", "/subjects/imported/versions/5")[1]["id"] == 100
    refusals = [body(V2, id=100, version=6), body(V2), body(V2, id=101, version=5)]
    for refused in refusals:
        assert raw(tickwheel_broker, "POST", register, refused)[1]["error_code"] == 42205
    assert raw(tickwheel_broker, "POST", register, body(V2, id=101, version=6))[1] == {"id": 101}
    assert raw(tickwheel_broker, "DELETE", "/mode/imported")[1] == {"mode": "IMPORT"}
    # Back to READWRITE: ids go on after the greatest imported.
    assert raw(tickwheel_broker, "POST", "/subjects/next/versions", body(INCOMPATIBLE)) == (
        200,
        {"id": 102},
    )


def test_avro_references_name_types_of_other_subjects(client: SchemaRegistryClient) -> None:
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "shop",
        "fields": [{"name": "city", "type": "string"}],
    }
    client.register_schema("address", Schema(json.dumps(address), "AVRO"))
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "shop.Address"}],
    }
    reference = SchemaReference("shop.Address", "address", 1)
    with_reference = Schema(json.dumps(customer), "AVRO", [reference])
    customer_id = client.register_schema("customer-value", with_reference)
    stored = client.get_schema(customer_id)
    assert [(r.name, r.subject, r.version) for r in stored.references] == [
        ("shop.Address", "address", 1)
    ]
    assert refusal(client.register_schema, "orphan", Schema(json.dumps(customer), "AVRO")) == (
        422,
        42201,
    )
    dangling = Schema(json.dumps(customer), "AVRO", [SchemaReference("shop.Address", "address", 9)])
    assert refusal(client.register_schema, "orphan", dangling) == (422, 42201)
    serializer = AvroSerializer(
        client, with_reference, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    context = SerializationContext("customer", MessageField.VALUE)
    data = serializer(
        {"home": {"city": "Oslo"}}, SerializationContext("customer", MessageField.VALUE)
    )
    assert AvroDeserializer(client)(data, context) == {"home": {"city": "Oslo"}}


def test_a_registry_port_in_use_is_refused_naming_the_property(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config = BrokerConfig.from_properties(
            {
                **TEST_BROKER_PROPERTIES,
                "log.dirs": str(tmp_path),
                "schema.registry.listeners": f"http://127.0.0.1:{port}",
            }
        )
        with pytest.raises(
            ConfigError, match=rf"schema\.registry\.listeners: .*127\.0\.0\.1:{port}"
        ):
            BackgroundBroker(config).start()


def test_json_serializer_and_deserializer_round_trip(client: SchemaRegistryClient) -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        }
    )
    context = SerializationContext("events", MessageField.VALUE)
    data = JSONSerializer(schema, client)({"name": "ada"}, context)
    assert JSONDeserializer(None, schema_registry_client=client)(data, context) == {"name": "ada"}
    assert client.get_latest_version("events-value").schema.schema_type == "JSON"


def test_json_references_must_name_json_schemas(client: SchemaRegistryClient) -> None:
    client.register_schema("name", Schema('{"type": "string"}', "JSON"))
    client.register_schema("avro-name", Schema('"string"', "AVRO"))
    person = json.dumps({"type": "object", "properties": {"name": {"$ref": "name.json"}}})
    good = [SchemaReference("name.json", "name", 1)]
    assert client.register_schema("person", Schema(person, "JSON", good)) > 0
    wrong_type = [SchemaReference("name.json", "avro-name", 1)]
    assert refusal(client.register_schema, "other", Schema(person, "JSON", wrong_type)) == (
        422,
        42201,
    )
