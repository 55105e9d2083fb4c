"""``ShareStateApis``: the share coordinator's requests as kio entities in and out.

===============================  ===  ========  ========================================
API                              key  versions  what it does
===============================  ===  ========  ========================================
FindCoordinator                  10   6         key_type 2 (share): ``group:topicId:part``
InitializeShareGroupState        83   0         start share-partitions at an offset
ReadShareGroupState              84   0         a share-partition's whole state
WriteShareGroupState             85   0-1       replace it (v1's delivery-complete count
                                                is accepted and not kept)
DeleteShareGroupState            86   0         remove it (a tombstone)
ReadShareGroupStateSummary       87   0-1       its epochs and start offset
===============================  ===  ========  ========================================

These are broker-to-broker requests: a share-partition's leader sends them to the
coordinator of its state (``CoordinatorPersister`` on another broker), which
FindCoordinator with key type SHARE names (Kafka's ``DefaultStatePersister`` asks it;
this broker's persister reads the same answer from its metadata cache). A share-partition
that was never initialized reads as start offset -1 and state epoch 0, as Kafka answers
it. A request for a state partition not led here is answered NOT_COORDINATOR, which
makes the sender look the coordinator up again.

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator._locator import CoordinatorNode
from tickwheel.coordinator.share_state._coordinator import NO_LEADER_EPOCH, ShareCoordinator
from tickwheel.protocol import ApiKey, VersionRange, build_entity, decode_topic_id, response_schema
from tickwheel.share_delivery import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

INITIALIZE_SHARE_GROUP_STATE_KEY = ApiKey.INITIALIZE_SHARE_GROUP_STATE
READ_SHARE_GROUP_STATE_KEY = ApiKey.READ_SHARE_GROUP_STATE
WRITE_SHARE_GROUP_STATE_KEY = ApiKey.WRITE_SHARE_GROUP_STATE
DELETE_SHARE_GROUP_STATE_KEY = ApiKey.DELETE_SHARE_GROUP_STATE
READ_SHARE_GROUP_STATE_SUMMARY_KEY = ApiKey.READ_SHARE_GROUP_STATE_SUMMARY

SHARE_STATE_API_VERSIONS: Mapping[int, VersionRange] = {
    INITIALIZE_SHARE_GROUP_STATE_KEY: VersionRange(0, 0),
    READ_SHARE_GROUP_STATE_KEY: VersionRange(0, 0),
    WRITE_SHARE_GROUP_STATE_KEY: VersionRange(0, 1),
    DELETE_SHARE_GROUP_STATE_KEY: VersionRange(0, 0),
    READ_SHARE_GROUP_STATE_SUMMARY_KEY: VersionRange(0, 1),
}
"""The share coordinator's APIs and the versions served."""

SHARE_STATE_API_NAMES: Mapping[int, str] = {
    INITIALIZE_SHARE_GROUP_STATE_KEY: "InitializeShareGroupState",
    READ_SHARE_GROUP_STATE_KEY: "ReadShareGroupState",
    WRITE_SHARE_GROUP_STATE_KEY: "WriteShareGroupState",
    DELETE_SHARE_GROUP_STATE_KEY: "DeleteShareGroupState",
    READ_SHARE_GROUP_STATE_SUMMARY_KEY: "ReadShareGroupStateSummary",
}

COORDINATOR_TYPE_SHARE = 2
"""FindCoordinator's key type for a share-partition (v6+)."""
SHARE_KEY_MIN_VERSION = 6
_NO_NODE = -1

UNINITIALIZED_START_OFFSET = -1
"""The start offset read for a share-partition that has no state (Kafka's)."""
DEFAULT_STATE_EPOCH = 0
_NO_TOPIC_ID = uuid.UUID(int=0)

_NO_STATE: Mapping[int, Mapping[str, Any]] = {
    READ_SHARE_GROUP_STATE_KEY: {
        "state_epoch": DEFAULT_STATE_EPOCH,
        "start_offset": UNINITIALIZED_START_OFFSET,
        "state_batches": [],
    },
    READ_SHARE_GROUP_STATE_SUMMARY_KEY: {
        "state_epoch": DEFAULT_STATE_EPOCH,
        "leader_epoch": NO_LEADER_EPOCH,
        "start_offset": UNINITIALIZED_START_OFFSET,
    },
}
"""What a read answers for a share-partition without a state."""
_NOTHING: Mapping[str, Any] = {}

PartitionHandler = Callable[[SharePartitionKey, Any], Awaitable[dict[str, Any]]]


def _respond(request: RequestPayload, values: Mapping[str, Any]) -> ResponsePayload:
    cls = response_schema(int(type(request).__api_key__), int(type(request).__version__))
    return build_entity(cls, values)


def _failed(error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "error_message": error.name}


def batches_to_wire(state: ShareGroupState) -> list[dict[str, Any]]:
    """A state's batches as the requests and responses carry them."""
    return [
        {
            "first_offset": batch.first_offset,
            "last_offset": batch.last_offset,
            "delivery_state": int(batch.delivery_state),
            "delivery_count": batch.delivery_count,
        }
        for batch in state.state_batches
    ]


def batches_from_wire(batches: Any) -> tuple[PersisterStateBatch, ...]:
    """The batches of a request or response; ValueError for an unknown delivery state."""
    return tuple(
        PersisterStateBatch(
            int(batch.first_offset),
            int(batch.last_offset),
            RecordState(int(batch.delivery_state)),
            int(batch.delivery_count),
        )
        for batch in batches
    )


def parse_coordinator_key(text: str) -> SharePartitionKey | None:
    """The share-partition named ``group:topicId:partition``, or None if malformed."""
    group_id, _, rest = text.rpartition(":")
    group_id, _, topic_text = group_id.rpartition(":")
    topic_id = decode_topic_id(topic_text)
    if not group_id or topic_id is None or not rest.isdigit():
        return None
    return SharePartitionKey(group_id, topic_id, int(rest))


class ShareStateApis:
    """Request handlers for keys 83-87 (and FindCoordinator's share key type) over one
    ``ShareCoordinator``."""

    def __init__(
        self,
        coordinator: ShareCoordinator,
        locate: Callable[[int], CoordinatorNode | None],
    ) -> None:
        self.coordinator = coordinator
        self._locate = locate

    def find_coordinator(self, request: Any) -> ResponsePayload:
        """The brokers coordinating share-partitions ``group:topicId:partition`` (v6)."""
        coordinators = []
        for text in request.coordinator_keys:
            answer: dict[str, Any] = {
                "key": text,
                "node_id": _NO_NODE,
                "host": "",
                "port": _NO_NODE,
                "error_code": ErrorCode.none,
                "error_message": None,
            }
            key = parse_coordinator_key(text)
            node = None if key is None else self._locate(self.coordinator.partition_for(key))
            if key is None:
                answer.update(_failed(ErrorCode.invalid_request))
            elif node is None:
                answer.update(_failed(ErrorCode.coordinator_not_available))
            else:
                answer.update(node_id=node.node_id, host=node.host, port=node.port)
            coordinators.append(answer)
        return _respond(request, {"throttle_time": 0, "coordinators": coordinators})

    async def initialize_state(self, request: Any) -> ResponsePayload:
        """InitializeShareGroupState."""
        return await self._per_partition(request, self._initialize, _NOTHING)

    async def read_state(self, request: Any) -> ResponsePayload:
        """ReadShareGroupState."""
        return await self._per_partition(request, self._read, _NO_STATE[READ_SHARE_GROUP_STATE_KEY])

    async def write_state(self, request: Any) -> ResponsePayload:
        """WriteShareGroupState."""
        return await self._per_partition(request, self._write, _NOTHING)

    async def delete_state(self, request: Any) -> ResponsePayload:
        """DeleteShareGroupState."""
        return await self._per_partition(request, self._delete, _NOTHING)

    async def read_state_summary(self, request: Any) -> ResponsePayload:
        """ReadShareGroupStateSummary."""
        return await self._per_partition(
            request, self._read_summary, _NO_STATE[READ_SHARE_GROUP_STATE_SUMMARY_KEY]
        )

    async def _per_partition(
        self, request: Any, handler: PartitionHandler, no_state: Mapping[str, Any]
    ) -> ResponsePayload:
        """``handler``'s answer for each share-partition of ``request``; a partition named
        without a group id or topic id gets ``no_state`` and INVALID_REQUEST."""
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                answer: dict[str, Any] = {"partition": int(partition.partition)}
                if not request.group_id or topic.topic_id in {None, _NO_TOPIC_ID}:
                    answer.update(no_state, **_failed(ErrorCode.invalid_request))
                else:
                    key = SharePartitionKey(
                        request.group_id, topic.topic_id, int(partition.partition)
                    )
                    answer.update(await handler(key, partition))
                partitions.append(answer)
            results.append({"topic_id": topic.topic_id, "partitions": partitions})
        return _respond(request, {"results": results})

    async def _initialize(self, key: SharePartitionKey, partition: Any) -> dict[str, Any]:
        error = await self.coordinator.initialize_state(
            key, int(partition.state_epoch), int(partition.start_offset)
        )
        return _failed(error) if error is not ErrorCode.none else {"error_code": error}

    async def _read(self, key: SharePartitionKey, partition: Any) -> dict[str, Any]:
        error, state = self.coordinator.read_state(key, int(partition.leader_epoch))
        if error is not ErrorCode.none:
            return {**_NO_STATE[READ_SHARE_GROUP_STATE_KEY], **_failed(error)}
        if state is None:
            return {**_NO_STATE[READ_SHARE_GROUP_STATE_KEY], "error_code": error}
        return {
            "error_code": error,
            "state_epoch": state.state_epoch,
            "start_offset": state.start_offset,
            "state_batches": batches_to_wire(state),
        }

    async def _read_summary(self, key: SharePartitionKey, _partition: Any) -> dict[str, Any]:
        error, state = self.coordinator.read_state(key)
        summary = {**_NO_STATE[READ_SHARE_GROUP_STATE_SUMMARY_KEY], "error_code": error}
        if error is not ErrorCode.none:
            summary.update(_failed(error))
        elif state is not None:
            summary.update(
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
            )
        return summary

    async def _write(self, key: SharePartitionKey, partition: Any) -> dict[str, Any]:
        try:
            batches = batches_from_wire(partition.state_batches)
        except ValueError:
            return _failed(ErrorCode.invalid_request)
        state = ShareGroupState(
            int(partition.state_epoch),
            int(partition.leader_epoch),
            int(partition.start_offset),
            batches,
        )
        error = await self.coordinator.write_state(key, state)
        return _failed(error) if error is not ErrorCode.none else {"error_code": error}

    async def _delete(self, key: SharePartitionKey, _partition: Any) -> dict[str, Any]:
        error = await self.coordinator.delete_state(key)
        return _failed(error) if error is not ErrorCode.none else {"error_code": error}


ShareStateApiHandler = Callable[[ShareStateApis, Any], Awaitable[ResponsePayload]]
"""One share-state API's handler: the broker's ``ShareStateApis`` and a request body in,
the response body out."""

SHARE_STATE_API_HANDLERS: Mapping[int, ShareStateApiHandler] = {
    INITIALIZE_SHARE_GROUP_STATE_KEY: ShareStateApis.initialize_state,
    READ_SHARE_GROUP_STATE_KEY: ShareStateApis.read_state,
    WRITE_SHARE_GROUP_STATE_KEY: ShareStateApis.write_state,
    DELETE_SHARE_GROUP_STATE_KEY: ShareStateApis.delete_state,
    READ_SHARE_GROUP_STATE_SUMMARY_KEY: ShareStateApis.read_state_summary,
}
"""The handler of each share-state API, which the broker's API table calls directly
(FindCoordinator of share-partition keys is ``ShareStateApis.find_coordinator``)."""
