"""SASL in a ZooKeeper cluster of three in-process brokers.

A SCRAM user created through one broker is kept at ``/config/users/<user>`` in Kafka's
form and logs in on every broker; brokers whose only listener is SASL_PLAINTEXT log in
to each other with SCRAM-SHA-256 (the admin's credential written to ZooKeeper before
they start, as Kafka's documentation does it) and replicate.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode

from server.sasl import ADMIN, ADMIN_PASSWORD, PLAIN_JAAS
from server.wire import WireClient
from tickwheel.cluster import ZooKeeperServer
from tickwheel.security import (
    SCRAM_SHA_256,
    PlainClient,
    SaslClient,
    ScramClient,
)
from tickwheel.server import BackgroundBroker

from .helpers import WAIT_S, ZOOKEEPER_TICK_MS, wait_for
from .sasl import in_process_brokers, scram_jaas, write_scram_credential

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

HANDSHAKE, AUTHENTICATE, ALTER_SCRAM = 17, 36, 51


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zookeeper", tick_ms=ZOOKEEPER_TICK_MS) as server:
        yield server


def _brokers(
    tmp_path: Path, zookeeper: ZooKeeperServer, properties: dict[str, str]
) -> contextlib.AbstractContextManager[list[BackgroundBroker]]:
    sasl = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    return in_process_brokers(tmp_path, zookeeper, {**sasl, **properties})


def _login(servers: str, client: SaslClient) -> WireClient:
    wire = WireClient(servers)
    try:
        handshake = wire.call(HANDSHAKE, 1, {"mechanism": client.mechanism})
        assert handshake.error_code == ErrorCode.none
        token: bytes | None = client.initial_response()
        while token is not None:
            answer = wire.call(AUTHENTICATE, 2, {"auth_bytes": token})
            assert answer.error_code == ErrorCode.none, answer.error_message
            token = client.evaluate(answer.auth_bytes)
    except BaseException:
        wire.close()
        raise
    return wire


def test_a_scram_user_created_on_one_broker_logs_in_on_every_broker(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    properties = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    with _brokers(tmp_path, zookeeper, properties) as brokers:
        endpoints = [str(b.endpoint("SASL_PLAINTEXT")) for b in brokers]
        admin = _login(endpoints[0], PlainClient(ADMIN, ADMIN_PASSWORD))
        salt = b"cluster-salt"
        answer = admin.call(
            ALTER_SCRAM,
            0,
            {
                "deletions": [],
                "upsertions": [
                    {
                        "name": "bob",
                        "mechanism": SCRAM_SHA_256.type_code,
                        "iterations": 4096,
                        "salt": salt,
                        "salted_password": SCRAM_SHA_256.salted_password("bob-secret", salt, 4096),
                    }
                ],
            },
        )
        admin.close()
        assert [(r.user, r.error_code) for r in answer.results] == [("bob", ErrorCode.none)]
        zk = KazooClient(hosts=zookeeper.connect)
        zk.start()
        try:
            data, _ = zk.get("/config/users/bob")
            changes = zk.get_children("/config/changes")
        finally:
            zk.stop()
            zk.close()
        stored = json.loads(data)
        assert stored["version"] == 1
        assert stored["config"]["SCRAM-SHA-256"].startswith("salt=Y2x1c3Rlci1zYWx0,stored_key=")
        assert changes, "a change notification told every broker"
        for endpoint in endpoints:
            deadline = time.monotonic() + WAIT_S
            while True:
                try:
                    _login(endpoint, ScramClient(SCRAM_SHA_256.name, "bob", "bob-secret")).close()
                    break
                except AssertionError:
                    if time.monotonic() > deadline:
                        raise


def test_brokers_replicate_over_a_sasl_scram_inter_broker_listener(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    write_scram_credential(zookeeper, ADMIN, ADMIN_PASSWORD, SCRAM_SHA_256.name)
    properties = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram_jaas(
            ADMIN, ADMIN_PASSWORD
        ),
        "min.insync.replicas": "3",
    }
    with _brokers(tmp_path, zookeeper, properties) as brokers:
        client = {
            "bootstrap.servers": ",".join(b.bootstrap_servers for b in brokers),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD,
        }
        admin = AdminClient(client)
        created = admin.create_topics([NewTopic("replicated", 1, 3)], operation_timeout=WAIT_S)
        created["replicated"].result(WAIT_S)
        producer = Producer({**client, "acks": "all"})
        delivered: list[object] = []

        def on_delivery(error: object, _message: object) -> None:
            delivered.append(error)

        def produced() -> bool:
            producer.produce("replicated", b"over sasl", partition=0, on_delivery=on_delivery)
            producer.flush(WAIT_S)
            return delivered[-1] is None

        # min.insync.replicas=3: acks=all succeeds only once both followers fetched
        # (logged in over SCRAM) and joined the ISR.
        wait_for(produced, "an acks=all produce with three in-sync replicas")
