"""``KafkaShareStateTransport``: the share coordinators of other brokers, over the wire.

The share-partitions a broker leads keep their state through ``CoordinatorPersister``;
when the coordinator of a share-partition's state is another broker, the persister asks
it with Kafka's share-state requests -- ReadShareGroupState, ReadShareGroupStateSummary,
WriteShareGroupState, InitializeShareGroupState, DeleteShareGroupState (keys 84, 87, 85,
83, 86, v0) -- through this ``ShareStateTransport``: one ``BrokerChannel`` per broker,
its requests one at a time (a lock per broker). It lives in the server layer because it
joins the cluster's channels to the share coordinator's types. A request that fails, or
an answer that does not make sense, closes the channel and raises an ``OSError`` (the
persister asks again).

Concurrency contract: event-loop thread only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.cluster import BrokerChannels, WireError
from tickwheel.coordinator.share_state import NO_LEADER_EPOCH, batches_from_wire, batches_to_wire
from tickwheel.protocol import ApiKey
from tickwheel.share_delivery import ShareGroupState, SharePartitionKey

INITIALIZE_SHARE_GROUP_STATE_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
READ_SHARE_GROUP_STATE_KEY = ApiKey.READ_SHARE_GROUP_STATE
WRITE_SHARE_GROUP_STATE_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
DELETE_SHARE_GROUP_STATE_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
READ_SHARE_GROUP_STATE_SUMMARY_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY
_SHARE_STATE_VERSION = 0


class KafkaShareStateTransport:
    """Share-state requests to other brokers' share coordinators: one ``BrokerChannel``
    per broker, its requests one at a time (a lock per broker)."""

    def __init__(self, channels: BrokerChannels) -> None:
        self._channels = channels
        self._locks: dict[int, asyncio.Lock] = {}

    async def _partition_answer(
        self, broker_id: int, api_key: int, key: SharePartitionKey, partition: Mapping[str, Any]
    ) -> Any:
        """The answer for the one partition of a share-state request to ``broker_id``.

        A failed request closes the channel (the next one reconnects) and raises.
        """
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            channel = self._channels.get(broker_id)
            values = {
                "group_id": key.group_id,
                "topics": [{"topic_id": key.topic_id, "partitions": [partition]}],
            }
            try:
                body = await channel.request(api_key, _SHARE_STATE_VERSION, values)
            except BaseException:
                await self._channels.drop(broker_id)
                raise
        try:
            (result,) = body.results
            (answer,) = result.partitions
        except ValueError as exc:
            raise WireError(f"a share-state answer for {key} has no single partition") from exc
        return answer

    async def read_state(
        self, broker_id: int, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, ShareGroupState | None]:
        """ReadShareGroupState v0; None when the share-partition has no state."""
        answer = await self._partition_answer(
            broker_id,
            READ_SHARE_GROUP_STATE_KEY,
            key,
            {"partition": key.partition, "leader_epoch": leader_epoch},
        )
        error = ErrorCode(answer.error_code)
        if error is not ErrorCode.none or int(answer.start_offset) < 0:
            return error, None
        try:
            batches = batches_from_wire(answer.state_batches)
        except ValueError as exc:
            raise WireError(f"the state of {key} holds an unknown delivery state") from exc
        state = ShareGroupState(
            int(answer.state_epoch), leader_epoch, int(answer.start_offset), batches
        )
        return error, state

    async def read_summary(
        self, broker_id: int, key: SharePartitionKey
    ) -> tuple[ErrorCode, ShareGroupState | None]:
        """ReadShareGroupStateSummary v0."""
        answer = await self._partition_answer(
            broker_id,
            READ_SHARE_GROUP_STATE_SUMMARY_KEY,
            key,
            {"partition": key.partition, "leader_epoch": NO_LEADER_EPOCH},
        )
        error = ErrorCode(answer.error_code)
        if error is not ErrorCode.none or int(answer.start_offset) < 0:
            return error, None
        state = ShareGroupState(
            int(answer.state_epoch), int(answer.leader_epoch), int(answer.start_offset), ()
        )
        return error, state

    async def write_state(
        self, broker_id: int, key: SharePartitionKey, state: ShareGroupState
    ) -> ErrorCode:
        """WriteShareGroupState v0 of the whole state."""
        answer = await self._partition_answer(
            broker_id,
            WRITE_SHARE_GROUP_STATE_KEY,
            key,
            {
                "partition": key.partition,
                "state_epoch": state.state_epoch,
                "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset,
                "state_batches": batches_to_wire(state),
            },
        )
        return ErrorCode(answer.error_code)

    async def initialize_state(
        self, broker_id: int, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        """InitializeShareGroupState v0."""
        answer = await self._partition_answer(
            broker_id,
            INITIALIZE_SHARE_GROUP_STATE_KEY,
            key,
            {"partition": key.partition, "state_epoch": state_epoch, "start_offset": start_offset},
        )
        return ErrorCode(answer.error_code)

    async def delete_state(self, broker_id: int, key: SharePartitionKey) -> ErrorCode:
        """DeleteShareGroupState v0."""
        answer = await self._partition_answer(
            broker_id, DELETE_SHARE_GROUP_STATE_KEY, key, {"partition": key.partition}
        )
        return ErrorCode(answer.error_code)

    async def close(self) -> None:
        """Close every connection."""
        await self._channels.close()
