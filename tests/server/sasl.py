"""Shared settings of the SASL tests: a SASL_PLAINTEXT listener with PLAIN and SCRAM."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{ADMIN}" password="{ADMIN_PASSWORD}" '
    f'user_{ADMIN}="{ADMIN_PASSWORD}" user_{ALICE}="{ALICE_PASSWORD}";'
)
SASL_PROPERTIES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
"""Broker properties: one SASL_PLAINTEXT listener, PLAIN users admin and alice."""
TIMEOUT_S = 15.0
MECHANISM_TYPES = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


def client_config(
    servers: str, mechanism: str = "PLAIN", user: str = ALICE, password: str = ALICE_PASSWORD
) -> dict[str, Any]:
    """confluent-kafka's settings for ``user`` over SASL_PLAINTEXT."""
    return {
        "bootstrap.servers": servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def create_scram_user(
    servers: str, user: str, password: str, mechanism: str, iterations: int = 4096
) -> None:
    """Create ``user`` through AdminClient.alter_user_scram_credentials (as admin, PLAIN)."""
    admin = AdminClient(client_config(servers, "PLAIN", ADMIN, ADMIN_PASSWORD))
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(MECHANISM_TYPES[mechanism], iterations), password.encode()
    )
    futures = admin.alter_user_scram_credentials([upsertion])
    futures[user].result(TIMEOUT_S)
