"""Basic authentication against the broker's SCRAM users, and the broker's ACLs on
``_schemas`` deciding what each user may do in the registry."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
SCHEMA = Schema('{"type": "record", "name": "R", "fields": []}', "AVRO")
PASSWORDS = {"admin": "admin-secret", "reader": "reader-secret", "writer": "writer-secret"}


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {
        "schema.registry.listeners": "http://127.0.0.1:0",
        "schema.registry.authentication.method": "BASIC",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # ANONYMOUS: the test's admin client on the plaintext listener.
        "super.users": "User:admin;User:ANONYMOUS",
    }


@pytest.fixture
def users(tickwheel_broker: BackgroundBroker) -> str:
    """The users (reader may read, writer may write) and the registry's URL."""
    admin = AdminClient({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    mechanisms = {"admin": ScramMechanism.SCRAM_SHA_512, "reader": ScramMechanism.SCRAM_SHA_256}
    upsertions = [
        UserScramCredentialUpsertion(
            user,
            ScramCredentialInfo(mechanisms.get(user, ScramMechanism.SCRAM_SHA_512), 4096),
            password.encode(),
        )
        for user, password in PASSWORDS.items()
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(TIMEOUT_S)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "_schemas",
            ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for user, operation in (("reader", AclOperation.READ), ("writer", AclOperation.WRITE))
    ]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)
    return f"http://127.0.0.1:{tickwheel_broker.schema_registry_ports[0]}"


def as_user(url: str, user: str, password: str | None = None) -> SchemaRegistryClient:
    secret = PASSWORDS.get(user, "") if password is None else password
    return SchemaRegistryClient({"url": url, "basic.auth.user.info": f"{user}:{secret}"})


def refusal(call: object, *args: object) -> tuple[int, int]:
    assert callable(call)
    with pytest.raises(SchemaRegistryError) as refused:
        call(*args)
    return refused.value.http_status_code, refused.value.error_code


def test_acls_decide_what_each_user_may_do(users: str) -> None:
    with as_user(users, "writer") as writer, as_user(users, "reader") as reader:
        schema_id = writer.register_schema("s", SCHEMA)
        assert reader.get_subjects() == ["s"]
        assert reader.get_schema(schema_id).schema_str
        assert reader.lookup_schema("s", SCHEMA).version == 1  # a POST that reads
        assert refusal(reader.register_schema, "t", SCHEMA) == (403, 40301)
        assert refusal(reader.delete_subject, "s") == (403, 40301)
        assert refusal(reader.set_compatibility, "s", "NONE") == (403, 40301)
    with as_user(users, "admin") as admin:  # a super user
        assert admin.delete_subject("s") == [1]


def test_wrong_or_missing_credentials_are_401_with_a_challenge(users: str) -> None:
    with as_user(users, "reader", "not-the-password") as wrong:
        assert refusal(wrong.get_subjects) == (401, 401)
    with as_user(users, "nobody", "x") as unknown:
        assert refusal(unknown.get_subjects) == (401, 401)
    for headers in ({}, {"Authorization": "Basic !!!"}, {"Authorization": "Bearer abc"}):
        request = urllib.request.Request(f"{users}/subjects", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=TIMEOUT_S).close()
        with refused.value as error:
            assert error.code == 401
            assert error.headers["WWW-Authenticate"].startswith("Basic realm=")
            assert json.loads(error.read())["error_code"] == 401
    token = base64.b64encode(b"reader:reader-secret").decode()
    request = urllib.request.Request(
        f"{users}/subjects", headers={"Authorization": f"Basic {token}"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        assert json.loads(answer.read()) == []
