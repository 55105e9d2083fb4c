"""Share state in a cluster: ``__share_group_state`` is replicated, its coordinator is
the leader of the state's partition, another broker asks it over the wire
(``KafkaShareStateTransport``), and a state outlives its coordinator's death."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.cluster import (
    BrokerChannel,
    BrokerChannels,
    BrokerEndpoint,
    ChannelSettings,
    LocalCluster,
)
from tickwheel.coordinator.share_state import coordinator_key
from tickwheel.protocol import ApiKey, CoordinatorType
from tickwheel.server._share_transport import KafkaShareStateTransport
from tickwheel.share_delivery import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

from .helpers import WAIT_S, local_cluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

FIND_COORDINATOR_KEY = ApiKey.FIND_COORDINATOR
SHARE_KEY_TYPE = CoordinatorType.SHARE
KEY = SharePartitionKey("sg", uuid.UUID("6a0d4c55-34a2-47d7-9b4c-0f5e1d2a3b4c"), 0)
STATE = ShareGroupState(
    state_epoch=0,
    leader_epoch=3,
    start_offset=40,
    state_batches=(
        PersisterStateBatch(40, 44, RecordState.ACKNOWLEDGED, 1),
        PersisterStateBatch(45, 45, RecordState.AVAILABLE, 2),
        PersisterStateBatch(46, 47, RecordState.ARCHIVED, 5),
    ),
)


def _transport(cluster: LocalCluster) -> KafkaShareStateTransport:
    ports = {broker.broker_id: broker.port for broker in cluster.brokers}

    def endpoint(broker_id: int) -> BrokerEndpoint | None:
        port = ports.get(broker_id)
        return None if port is None else BrokerEndpoint(broker_id, "127.0.0.1", port)

    return KafkaShareStateTransport(
        BrokerChannels(endpoint, ChannelSettings("share-state-test", 10_000))
    )


def _coordinator(cluster: LocalCluster, asked: int) -> int | None:
    """The coordinator of ``KEY`` that broker ``asked`` names (FindCoordinator v6)."""
    endpoint = BrokerEndpoint(asked, "127.0.0.1", cluster.brokers[asked].port)

    async def find() -> int | None:
        channel = BrokerChannel(endpoint, client_id="share-state-test", timeout_ms=10_000)
        try:
            body = await channel.request(
                FIND_COORDINATOR_KEY,
                6,
                {"key_type": SHARE_KEY_TYPE, "coordinator_keys": [coordinator_key(KEY)]},
            )
        finally:
            await channel.close()
        (found,) = body.coordinators
        return int(found.node_id) if found.error_code == ErrorCode.none else None

    try:
        return asyncio.run(find())
    except OSError:
        return None


def test_a_share_state_is_replicated_and_outlives_its_coordinator(tmp_path: Path) -> None:
    properties = {"share.coordinator.state.topic.num.partitions": "1"}
    with local_cluster(tmp_path, properties=properties) as cluster:
        found: list[int] = []

        def named() -> bool:
            coordinator = _coordinator(cluster, asked=0)
            found[:] = [] if coordinator is None else [coordinator]
            return bool(found)

        wait_for(named, "FindCoordinator to name the share coordinator")
        coordinator = found[0]
        other = next(b.broker_id for b in cluster.brokers if b.broker_id != coordinator)

        async def write_then_read() -> tuple[ErrorCode, ErrorCode, ShareGroupState | None]:
            transport = _transport(cluster)
            try:
                written = await transport.write_state(coordinator, KEY, STATE)
                refused, _ = await transport.read_state(other, KEY, STATE.leader_epoch)
                _, read = await transport.read_state(coordinator, KEY, STATE.leader_epoch)
            finally:
                await transport.close()
            return written, refused, read

        written, refused, read = asyncio.run(write_then_read())
        assert written == ErrorCode.none
        assert refused == ErrorCode.not_coordinator
        assert read == STATE

        cluster.brokers[coordinator].kill()
        survivor = other

        def moved() -> bool:
            now = _coordinator(cluster, asked=survivor)
            found[:] = [] if now is None else [now]
            return bool(found) and found[0] != coordinator

        wait_for(moved, "the share coordinator to move off the killed broker", WAIT_S)
        successor = found[0]

        async def after_failover() -> tuple[ShareGroupState | None, ErrorCode]:
            transport = _transport(cluster)
            try:
                _, state = await transport.read_state(successor, KEY, STATE.leader_epoch)
                stale = ShareGroupState(0, STATE.leader_epoch - 1, 0, ())
                fenced = await transport.write_state(successor, KEY, stale)
            finally:
                await transport.close()
            return state, fenced

        state, fenced = asyncio.run(after_failover())
        assert state == STATE
        assert fenced == ErrorCode.fenced_leader_epoch
