"""Shared helpers of the SASL cluster tests: in-process brokers on one ZooKeeper, and a
SCRAM credential written to ZooKeeper before the brokers start (Kafka's documented way
to give brokers the credential they log in to each other with)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from kazoo.client import KazooClient  # type: ignore[import-untyped]

from tickwheel.cluster import ZooKeeperServer
from tickwheel.security import SCRAM_SHA_256, SCRAM_SHA_512, credential_to_string
from tickwheel.server import BackgroundBroker, BrokerConfig

from .helpers import CLUSTER_PROPERTIES

BROKERS = 3
_SCRAM_MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def scram_jaas(user: str, password: str) -> str:
    """A ScramLoginModule JAAS line: the credential a broker logs in to the others with."""
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


def write_scram_credential(
    zookeeper: ZooKeeperServer, user: str, password: str, mechanism: str
) -> None:
    """Store ``user``'s salted ``mechanism`` credential at ``/config/users/<user>``."""
    credential = _SCRAM_MECHANISMS[mechanism].credential(password)
    document = {"version": 1, "config": {mechanism: credential_to_string(credential)}}
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start()
    try:
        zk.create(f"/config/users/{user}", json.dumps(document).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


@contextlib.contextmanager
def in_process_brokers(
    base_dir: Path, zookeeper: ZooKeeperServer, properties: dict[str, str]
) -> Iterator[list[BackgroundBroker]]:
    """``BROKERS`` brokers on their own threads, with the cluster tests' short times and
    ``properties`` on top, stopped at the end."""
    with contextlib.ExitStack() as stack:
        brokers = []
        for broker_id in range(BROKERS):
            config = BrokerConfig.from_properties(
                {
                    **CLUSTER_PROPERTIES,
                    "broker.id": str(broker_id),
                    "log.dirs": str(base_dir / f"broker-{broker_id}"),
                    "zookeeper.connect": zookeeper.connect,
                    **properties,
                }
            )
            brokers.append(stack.enter_context(BackgroundBroker(config)))
        yield brokers
