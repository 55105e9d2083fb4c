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

Each handler takes the kio request of the newest version served and answers with that
version's response (the broker converts both from and to the version sent); each API's
``ShareStateApi`` names it, its versions, its handler and its refusal (every
share-partition one error, as the broker answers a request it does not authorize).

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.delete_share_group_state.v0 import response as delete_v0
from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.initialize_share_group_state.v0 import response as initialize_v0
from kio.schema.initialize_share_group_state.v0.request import (
    InitializeShareGroupStateRequest,
)
from kio.schema.initialize_share_group_state.v0.request import (
    PartitionData as InitializePartition,
)
from kio.schema.read_share_group_state.v0 import response as read_v0
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest
from kio.schema.read_share_group_state_summary.v1 import response as summary_v1
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
)
from kio.schema.types import BrokerId
from kio.schema.write_share_group_state.v1 import response as write_v1
from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest
from kio.static.primitive import i8, i16, i32, i64
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator._locator import CoordinatorNode
from tickwheel.coordinator.share_state._coordinator import NO_LEADER_EPOCH, ShareCoordinator
from tickwheel.protocol import NO_THROTTLE, ApiKey, VersionRange, decode_topic_id
from tickwheel.share_delivery import (
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

SHARE_KEY_MIN_VERSION = 6
_NO_NODE = -1

UNINITIALIZED_START_OFFSET = -1
"""The start offset read for a share-partition that has no state (Kafka's)."""
DEFAULT_STATE_EPOCH = 0
_NO_TOPIC_ID = uuid.UUID(int=0)


class _PartitionRequest(Protocol):
    """A partition of any share-state request."""

    @property
    def partition(self) -> i32: ...


_P_co = TypeVar("_P_co", bound=_PartitionRequest, covariant=True)
_P = TypeVar("_P", bound=_PartitionRequest)
_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)
_R_contra = TypeVar("_R_contra", contravariant=True)
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)
Request = TypeVar("Request", bound=RequestPayload)
Answer = TypeVar("Answer", bound=ResponsePayload)


class _TopicRequest(Protocol[_P_co]):
    """A topic of any share-state request."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[_P_co]: ...


class _WireBatch(Protocol):
    """A state batch as the share-state requests and responses carry it."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def delivery_state(self) -> int: ...
    @property
    def delivery_count(self) -> int: ...


class _PartitionError(Protocol[_R_co]):
    """One API's answer for a partition that gets only an error code and message: its
    partition result class, or a function that adds the values of a missing state."""

    def __call__(
        self, *, partition: i32, error_code: ErrorCode, error_message: str | None
    ) -> _R_co: ...


class _TopicResult(Protocol[_R_contra, _T_co]):
    """One API's topic result class."""

    def __call__(
        self, *, topic_id: uuid.UUID | None, partitions: tuple[_R_contra, ...]
    ) -> _T_co: ...


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.none else error.name


def batches_to_wire(state: ShareGroupState) -> list[dict[str, Any]]:
    """A state's batches as the requests carry them (values for ``build_entity``)."""
    return [
        {
            "first_offset": batch.first_offset,
            "last_offset": batch.last_offset,
            "delivery_state": int(batch.delivery_state),
            "delivery_count": batch.delivery_count,
        }
        for batch in state.state_batches
    ]


def batches_from_wire(batches: Iterable[_WireBatch]) -> tuple[PersisterStateBatch, ...]:
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


async def _per_partition(
    group_id: str,
    topics: Sequence[_TopicRequest[_P]],
    answer: Callable[[SharePartitionKey, _P], Awaitable[_R]],
    failed: _PartitionError[_R],
    topic_result: _TopicResult[_R, _T],
) -> tuple[_T, ...]:
    """``answer``'s result for each share-partition of a request, by topic; a partition
    named without a group id or topic id gets ``failed`` with INVALID_REQUEST."""
    results = []
    for topic in topics:
        topic_id = topic.topic_id
        partitions = []
        for partition in topic.partitions:
            if not group_id or topic_id is None or topic_id == _NO_TOPIC_ID:
                error = ErrorCode.invalid_request
                partitions.append(
                    failed(
                        partition=partition.partition,
                        error_code=error,
                        error_message=_message(error),
                    )
                )
            else:
                key = SharePartitionKey(group_id, topic_id, int(partition.partition))
                partitions.append(await answer(key, partition))
        results.append(topic_result(topic_id=topic_id, partitions=tuple(partitions)))
    return tuple(results)


def _each_failed(
    topics: Sequence[_TopicRequest[_PartitionRequest]],
    failed: _PartitionError[_R],
    topic_result: _TopicResult[_R, _T],
    error: ErrorCode,
    message: str,
) -> tuple[_T, ...]:
    """``failed`` with ``error`` and ``message`` for every share-partition of a request,
    by topic."""
    return tuple(
        topic_result(
            topic_id=topic.topic_id,
            partitions=tuple(
                failed(partition=p.partition, error_code=error, error_message=message)
                for p in topic.partitions
            ),
        )
        for topic in topics
    )


def _read_result(
    *, partition: i32, error_code: ErrorCode, error_message: str | None
) -> read_v0.PartitionResult:
    """A read's answer with no state: start offset -1, state epoch 0 (Kafka's)."""
    return read_v0.PartitionResult(
        partition=partition,
        error_code=error_code,
        error_message=error_message,
        state_epoch=i32(DEFAULT_STATE_EPOCH),
        start_offset=i64(UNINITIALIZED_START_OFFSET),
        state_batches=(),
    )


def _summary_result(
    *, partition: i32, error_code: ErrorCode, error_message: str | None
) -> summary_v1.PartitionResult:
    """A summary's answer with no state: start offset -1, no leader epoch, state epoch 0."""
    return summary_v1.PartitionResult(
        partition=partition,
        error_code=error_code,
        error_message=error_message,
        state_epoch=i32(DEFAULT_STATE_EPOCH),
        leader_epoch=i32(NO_LEADER_EPOCH),
        start_offset=i64(UNINITIALIZED_START_OFFSET),
    )


class ShareStateApis:
    """Request handlers for keys 83-87 (and FindCoordinator's share key type) over one
    ``ShareCoordinator``: each takes the request of the newest version served and
    answers with the response of that version."""

    def __init__(
        self,
        coordinator: ShareCoordinator,
        locate: Callable[[int], CoordinatorNode | None],
    ) -> None:
        self.coordinator = coordinator
        self._locate = locate

    def find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """The brokers coordinating share-partitions ``group:topicId:partition`` (v6)."""
        return FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            coordinators=tuple(self._coordinator_of(text) for text in request.coordinator_keys),
        )

    def _coordinator_of(self, text: str) -> Coordinator:
        key = parse_coordinator_key(text)
        node = None if key is None else self._locate(self.coordinator.partition_for(key))
        if node is None:
            error = (
                ErrorCode.invalid_request if key is None else ErrorCode.coordinator_not_available
            )
            return Coordinator(
                key=text,
                node_id=BrokerId(_NO_NODE),
                host="",
                port=i32(_NO_NODE),
                error_code=error,
                error_message=error.name,
            )
        return Coordinator(
            key=text,
            node_id=BrokerId(node.node_id),
            host=node.host,
            port=i32(node.port),
            error_code=ErrorCode.none,
            error_message=None,
        )

    async def initialize_state(
        self, request: InitializeShareGroupStateRequest
    ) -> initialize_v0.InitializeShareGroupStateResponse:
        """InitializeShareGroupState."""
        results = await _per_partition(
            request.group_id,
            request.topics,
            self._initialize,
            initialize_v0.PartitionResult,
            initialize_v0.InitializeStateResult,
        )
        return initialize_v0.InitializeShareGroupStateResponse(results=results)

    async def read_state(
        self, request: ReadShareGroupStateRequest
    ) -> read_v0.ReadShareGroupStateResponse:
        """ReadShareGroupState."""
        results = await _per_partition(
            request.group_id, request.topics, self._read, _read_result, read_v0.ReadStateResult
        )
        return read_v0.ReadShareGroupStateResponse(results=results)

    async def write_state(
        self, request: WriteShareGroupStateRequest
    ) -> write_v1.WriteShareGroupStateResponse:
        """WriteShareGroupState."""
        results = await _per_partition(
            request.group_id,
            request.topics,
            self._write,
            write_v1.PartitionResult,
            write_v1.WriteStateResult,
        )
        return write_v1.WriteShareGroupStateResponse(results=results)

    async def delete_state(
        self, request: DeleteShareGroupStateRequest
    ) -> delete_v0.DeleteShareGroupStateResponse:
        """DeleteShareGroupState."""
        results = await _per_partition(
            request.group_id,
            request.topics,
            self._delete,
            delete_v0.PartitionResult,
            delete_v0.DeleteStateResult,
        )
        return delete_v0.DeleteShareGroupStateResponse(results=results)

    async def read_state_summary(
        self, request: ReadShareGroupStateSummaryRequest
    ) -> summary_v1.ReadShareGroupStateSummaryResponse:
        """ReadShareGroupStateSummary."""
        results = await _per_partition(
            request.group_id,
            request.topics,
            self._read_summary,
            _summary_result,
            summary_v1.ReadStateSummaryResult,
        )
        return summary_v1.ReadShareGroupStateSummaryResponse(results=results)

    async def _initialize(
        self, key: SharePartitionKey, partition: InitializePartition
    ) -> initialize_v0.PartitionResult:
        error = await self.coordinator.initialize_state(
            key, int(partition.state_epoch), int(partition.start_offset)
        )
        return initialize_v0.PartitionResult(
            partition=partition.partition, error_code=error, error_message=_message(error)
        )

    async def _read(
        self, key: SharePartitionKey, partition: ReadPartition
    ) -> read_v0.PartitionResult:
        error, state = self.coordinator.read_state(key, int(partition.leader_epoch))
        if error is not ErrorCode.none or state is None:
            return _read_result(
                partition=partition.partition, error_code=error, error_message=_message(error)
            )
        return read_v0.PartitionResult(
            partition=partition.partition,
            error_code=error,
            state_epoch=i32(state.state_epoch),
            start_offset=i64(state.start_offset),
            state_batches=tuple(
                read_v0.StateBatch(
                    first_offset=i64(batch.first_offset),
                    last_offset=i64(batch.last_offset),
                    delivery_state=i8(int(batch.delivery_state)),
                    delivery_count=i16(batch.delivery_count),
                )
                for batch in state.state_batches
            ),
        )

    async def _read_summary(
        self, key: SharePartitionKey, partition: _PartitionRequest
    ) -> summary_v1.PartitionResult:
        error, state = self.coordinator.read_state(key)
        if error is not ErrorCode.none or state is None:
            return _summary_result(
                partition=partition.partition, error_code=error, error_message=_message(error)
            )
        return summary_v1.PartitionResult(
            partition=partition.partition,
            error_code=error,
            state_epoch=i32(state.state_epoch),
            leader_epoch=i32(state.leader_epoch),
            start_offset=i64(state.start_offset),
        )

    async def _write(
        self, key: SharePartitionKey, partition: WritePartition
    ) -> write_v1.PartitionResult:
        try:
            batches = batches_from_wire(partition.state_batches)
        except ValueError:
            error = ErrorCode.invalid_request
        else:
            state = ShareGroupState(
                int(partition.state_epoch),
                int(partition.leader_epoch),
                int(partition.start_offset),
                batches,
            )
            error = await self.coordinator.write_state(key, state)
        return write_v1.PartitionResult(
            partition=partition.partition, error_code=error, error_message=_message(error)
        )

    async def _delete(
        self, key: SharePartitionKey, partition: _PartitionRequest
    ) -> delete_v0.PartitionResult:
        error = await self.coordinator.delete_state(key)
        return delete_v0.PartitionResult(
            partition=partition.partition, error_code=error, error_message=_message(error)
        )


@dataclass(frozen=True, slots=True)
class ShareStateApi(Generic[Request, Answer]):
    """One share-state API: its key, name and versions served, the request class of the
    newest, ``ShareStateApis``' answer to it, and ``refuse``: the answer that gives
    every share-partition of a request one error code and message (a refused request)."""

    api_key: ApiKey
    name: str
    versions: VersionRange
    request: type[Request]
    answer: Callable[[ShareStateApis, Request], Awaitable[Answer]]
    refuse: Callable[[Request, ErrorCode, str], Answer]


INITIALIZE_SHARE_GROUP_STATE = ShareStateApi(
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    "InitializeShareGroupState",
    VersionRange(0, 0),
    InitializeShareGroupStateRequest,
    ShareStateApis.initialize_state,
    lambda request, error, message: initialize_v0.InitializeShareGroupStateResponse(
        results=_each_failed(
            request.topics,
            initialize_v0.PartitionResult,
            initialize_v0.InitializeStateResult,
            error,
            message,
        )
    ),
)
READ_SHARE_GROUP_STATE = ShareStateApi(
    ApiKey.READ_SHARE_GROUP_STATE,
    "ReadShareGroupState",
    VersionRange(0, 0),
    ReadShareGroupStateRequest,
    ShareStateApis.read_state,
    lambda request, error, message: read_v0.ReadShareGroupStateResponse(
        results=_each_failed(request.topics, _read_result, read_v0.ReadStateResult, error, message)
    ),
)
WRITE_SHARE_GROUP_STATE = ShareStateApi(
    ApiKey.WRITE_SHARE_GROUP_STATE,
    "WriteShareGroupState",
    VersionRange(0, 1),
    WriteShareGroupStateRequest,
    ShareStateApis.write_state,
    lambda request, error, message: write_v1.WriteShareGroupStateResponse(
        results=_each_failed(
            request.topics, write_v1.PartitionResult, write_v1.WriteStateResult, error, message
        )
    ),
)
DELETE_SHARE_GROUP_STATE = ShareStateApi(
    ApiKey.DELETE_SHARE_GROUP_STATE,
    "DeleteShareGroupState",
    VersionRange(0, 0),
    DeleteShareGroupStateRequest,
    ShareStateApis.delete_state,
    lambda request, error, message: delete_v0.DeleteShareGroupStateResponse(
        results=_each_failed(
            request.topics, delete_v0.PartitionResult, delete_v0.DeleteStateResult, error, message
        )
    ),
)
READ_SHARE_GROUP_STATE_SUMMARY = ShareStateApi(
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    "ReadShareGroupStateSummary",
    VersionRange(0, 1),
    ReadShareGroupStateSummaryRequest,
    ShareStateApis.read_state_summary,
    lambda request, error, message: summary_v1.ReadShareGroupStateSummaryResponse(
        results=_each_failed(
            request.topics, _summary_result, summary_v1.ReadStateSummaryResult, error, message
        )
    ),
)
