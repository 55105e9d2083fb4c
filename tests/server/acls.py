"""Shared helpers of the ACL tests: ACL bindings, topics and ACLs created through
confluent-kafka's AdminClient, ACLs granted through the broker's store, one record
produced or consumed with its error."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tickwheel.security import AccessControlEntry, PatternType, ResourcePattern
from tickwheel.security import AclOperation as Op
from tickwheel.security import AclPermissionType as Permission
from tickwheel.security import ResourceType as Resource
from tickwheel.server import BackgroundBroker, Broker

ANONYMOUS = "User:ANONYMOUS"
TIMEOUT_S = 15.0
FAST_CLIENT = {"socket.timeout.ms": 5000, "message.timeout.ms": 5000}


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    principal: str = ANONYMOUS,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT_S)


def create_topics(admin: AdminClient, *names: str) -> None:
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(TIMEOUT_S)


def produce(bootstrap_servers: str, topic: str, **config: Any) -> KafkaError | None:
    """Produce one record and return its error (None: delivered); librdkafka raises at
    once when its metadata already says the topic is refused."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, **FAST_CLIENT, **config})
    outcome: list[KafkaError | None] = []
    try:
        producer.produce(topic, b"value", on_delivery=lambda err, _msg: outcome.append(err))
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    producer.flush(TIMEOUT_S)
    assert outcome, "the record was never delivered nor failed"
    return outcome[0]


def consume_one(
    bootstrap_servers: str, group_id: str, topic: str, **config: Any
) -> tuple[bytes | None, int]:
    """Subscribe and poll until a record or an error: (value, error code)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                return None, error.code()
            return message.value(), 0
    finally:
        consumer.close()
    raise AssertionError(f"group {group_id} consumed nothing from {topic}")


def grant(broker: BackgroundBroker, resource: Resource, name: str, *operations: Op) -> None:
    """ALLOW ``User:ANONYMOUS`` the operations on a LITERAL resource, bypassing the APIs."""
    pattern = ResourcePattern(resource, name, PatternType.LITERAL)
    entries = [AccessControlEntry(ANONYMOUS, "*", op, Permission.ALLOW) for op in operations]

    async def update(running: Broker) -> None:
        store = running.context.acl_store
        assert store is not None
        await store.update(pattern, entries, ())

    broker.call(update)
