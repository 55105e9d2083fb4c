"""Shared settings of the SASL tests: a SASL_PLAINTEXT listener with PLAIN and SCRAM, the
clients' settings, a SCRAM user made through the admin API, librdkafka's login error."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
BOB, BOB_PASSWORD = "bob", "bob-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{ADMIN}" password="{ADMIN_PASSWORD}" '
    f'user_{ADMIN}="{ADMIN_PASSWORD}" user_{ALICE}="{ALICE_PASSWORD}" '
    f'user_{BOB}="{BOB_PASSWORD}";'
)
SASL_PROPERTIES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
"""Broker properties: one SASL_PLAINTEXT listener, PLAIN users admin, alice and bob."""
TIMEOUT_S = 15.0
MECHANISM_TYPES = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


def client_config(
    servers: str,
    mechanism: str = "PLAIN",
    user: str = ALICE,
    password: str = ALICE_PASSWORD,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` over SASL_PLAINTEXT, or over what
    ``settings`` (``security.protocol=SASL_SSL`` and its ``ssl.*``) says."""
    return {
        "bootstrap.servers": servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **(settings or {}),
    }


def create_scram_user(
    servers: str,
    user: str,
    password: str,
    mechanism: str,
    iterations: int = 4096,
    settings: Mapping[str, Any] | None = None,
) -> None:
    """Create ``user`` through AdminClient.alter_user_scram_credentials (as admin, PLAIN;
    ``settings`` as for ``client_config``)."""
    admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD, settings))
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(MECHANISM_TYPES[mechanism], iterations), password.encode()
    )
    futures = admin.alter_user_scram_credentials([upsertion])
    futures[user].result(TIMEOUT_S)


def auth_error(config: dict[str, object]) -> KafkaError:
    """The authentication error librdkafka reports for ``config``'s login."""
    errors: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            errors.append(error)

    producer = Producer({**config, "error_cb": on_error})
    deadline = time.monotonic() + TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, "librdkafka reported no authentication error"
    return errors[0]
