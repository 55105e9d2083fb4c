"""``TransactionApis``: the transaction coordinator's requests as kio entities in and out.

=======================  ===  ========  ==============================================
API                      key  versions  notes
=======================  ===  ========  ==============================================
FindCoordinator          10   1-4       key_type 1 (transaction); the group side has 0
InitProducerId           22   0-4       with a transactional id (v3+: producer id and
                                        epoch of a resuming producer, KIP-360)
AddPartitionsToTxn       24   0-3       the ``v3_and_below_*`` fields (v4+ is broker
                                        to broker, not served)
AddOffsetsToTxn          25   0-3
EndTxn                   26   0-3
DescribeTransactions     65   0
ListTransactions         66   0-1
=======================  ===  ========  ==============================================

Versions before PRODUCER_FENCED existed get INVALID_PRODUCER_EPOCH instead, exactly
where Kafka's ``KafkaApis`` down-maps it: InitProducerId below v4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn below v2 (aiokafka sends v0 of all of them and librdkafka
v0 of the middle two, and neither knows code 90). AddPartitionsToTxn answers
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist and OPERATION_NOT_ATTEMPTED
for the others, adding none. Responses are built with ``build_entity`` (fields a
version lacks are dropped).

Concurrency: event-loop thread only; a coordinator callback resolves the awaited future
on the same thread.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator._locator import CoordinatorLocator
from tickwheel.coordinator.transaction._coordinator import (
    InitProducerIdResult,
    TransactionCoordinator,
)
from tickwheel.coordinator.transaction._metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from tickwheel.protocol import ApiKey, VersionRange, build_entity, response_schema
from tickwheel.replica import TopicPartition

T = TypeVar("T")

INIT_PRODUCER_ID_KEY = ApiKey.INIT_PRODUCER_ID
ADD_PARTITIONS_TO_TXN_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
ADD_OFFSETS_TO_TXN_KEY = ApiKey.ADD_OFFSETS_TO_TXN
END_TXN_KEY = ApiKey.END_TXN
DESCRIBE_TRANSACTIONS_KEY = ApiKey.DESCRIBE_TRANSACTIONS
LIST_TRANSACTIONS_KEY = ApiKey.LIST_TRANSACTIONS

TRANSACTION_API_VERSIONS: Mapping[int, VersionRange] = {
    ADD_PARTITIONS_TO_TXN_KEY: VersionRange(0, 3),
    ADD_OFFSETS_TO_TXN_KEY: VersionRange(0, 3),
    END_TXN_KEY: VersionRange(0, 3),
    DESCRIBE_TRANSACTIONS_KEY: VersionRange(0, 0),
    LIST_TRANSACTIONS_KEY: VersionRange(0, 1),
}
"""The transaction APIs served only by this package, and their versions."""

TRANSACTION_API_NAMES: Mapping[int, str] = {
    ADD_PARTITIONS_TO_TXN_KEY: "AddPartitionsToTxn",
    ADD_OFFSETS_TO_TXN_KEY: "AddOffsetsToTxn",
    END_TXN_KEY: "EndTxn",
    DESCRIBE_TRANSACTIONS_KEY: "DescribeTransactions",
    LIST_TRANSACTIONS_KEY: "ListTransactions",
}

COORDINATOR_TYPE_TRANSACTION = 1
# The first version of each API that knows PRODUCER_FENCED (KafkaApis down-maps below).
_PRODUCER_FENCED_SINCE: Mapping[int, int] = {
    INIT_PRODUCER_ID_KEY: 4,
    ADD_PARTITIONS_TO_TXN_KEY: 2,
    ADD_OFFSETS_TO_TXN_KEY: 2,
    END_TXN_KEY: 2,
}
_INIT_PRODUCER_ID_RESUMES = 3  # v3+: producer_id and producer_epoch (KIP-360)
_FIND_COORDINATOR_BATCHED = 4
_NO_NODE = -1
_MS_PER_S = 1000


def _version(request: RequestPayload) -> int:
    return int(type(request).__version__)


def _api_key(request: RequestPayload) -> int:
    return int(type(request).__api_key__)


def _respond(request: RequestPayload, values: Mapping[str, Any]) -> ResponsePayload:
    cls = response_schema(_api_key(request), _version(request))
    return build_entity(cls, {"throttle_time": 0, **values})


def client_error(request: RequestPayload, error: ErrorCode) -> ErrorCode:
    """``error`` as the request's version knows it (PRODUCER_FENCED down-map)."""
    since = _PRODUCER_FENCED_SINCE.get(_api_key(request))
    if error == ErrorCode.producer_fenced and since is not None and _version(request) < since:
        return ErrorCode.invalid_producer_epoch
    return error


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / _MS_PER_S, tz=datetime.UTC)


class _Answer:
    """Awaits the one value a coordinator callback delivers (on the loop's thread)."""

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def deliver(self, value: Any) -> None:
        if not self.future.done():  # the connection may have gone and cancelled us
            self.future.set_result(value)


class TransactionApis:
    """Request handlers for the transaction APIs over one ``TransactionCoordinator``."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        locate: CoordinatorLocator,
        *,
        partition_exists: Callable[[str, int], bool],
        offsets_partition: Callable[[str], TopicPartition],
    ) -> None:
        self.coordinator = coordinator
        self._locate = locate
        self._partition_exists = partition_exists
        self._offsets_partition = offsets_partition

    # -- FindCoordinator ----------------------------------------------------------

    def _find(self, key: str) -> dict[str, Any]:
        if not key:
            return {"error_code": ErrorCode.invalid_request, "node_id": _NO_NODE}
        if not self.coordinator.active:
            return {"error_code": ErrorCode.coordinator_not_available, "node_id": _NO_NODE}
        node = self._locate(self.coordinator.state.partition_for(key))
        if node is None:
            return {"error_code": ErrorCode.coordinator_not_available, "node_id": _NO_NODE}
        return {
            "error_code": ErrorCode.none,
            "node_id": node.node_id,
            "host": node.host,
            "port": node.port,
        }

    def find_coordinator(self, request: Any) -> ResponsePayload:
        """The broker coordinating a transactional id (v4: several at once)."""
        defaults = {"host": "", "port": _NO_NODE, "error_message": None}
        if _version(request) >= _FIND_COORDINATOR_BATCHED:
            coordinators = [
                {**defaults, "key": key, **self._find(key)} for key in request.coordinator_keys
            ]
            return _respond(request, {"coordinators": coordinators})
        return _respond(request, {**defaults, **self._find(request.key)})

    # -- InitProducerId -----------------------------------------------------------

    async def init_producer_id(self, request: Any) -> ResponsePayload:
        """InitProducerId with a transactional id."""
        expected: tuple[int, int] | None = None
        if _version(request) >= _INIT_PRODUCER_ID_RESUMES:
            pid, epoch = int(request.producer_id), int(request.producer_epoch)
            if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
                return self._init_answer(request, InitProducerIdResult(ErrorCode.invalid_request))
            if pid != NO_PRODUCER_ID:
                expected = (pid, epoch)
        timeout_ms = int(request.transaction_timeout / datetime.timedelta(milliseconds=1))
        answer = _Answer()
        await self.coordinator.handle_init_producer_id(
            request.transactional_id, timeout_ms, expected, answer.deliver
        )
        result: InitProducerIdResult = await answer.future
        return self._init_answer(request, result)

    def _init_answer(self, request: Any, result: InitProducerIdResult) -> ResponsePayload:
        return _respond(
            request,
            {
                "error_code": client_error(request, result.error),
                "producer_id": result.producer_id,
                "producer_epoch": result.producer_epoch,
            },
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------

    async def add_partitions_to_txn(self, request: Any) -> ResponsePayload:
        """AddPartitionsToTxn v0-3: one transaction, one error for every partition."""
        requested = [
            TopicPartition(topic.name, int(partition))
            for topic in request.v3_and_below_topics
            for partition in topic.partitions
        ]
        unknown = {tp for tp in requested if not self._partition_exists(tp.topic, tp.partition)}
        errors: dict[TopicPartition, ErrorCode]
        if unknown:
            errors = {
                tp: ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.operation_not_attempted
                for tp in requested
            }
        else:
            answer = _Answer()
            self.coordinator.add_partitions(
                request.v3_and_below_transactional_id,
                int(request.v3_and_below_producer_id),
                int(request.v3_and_below_producer_epoch),
                set(requested),
                answer.deliver,
            )
            error = client_error(request, await answer.future)
            errors = dict.fromkeys(requested, error)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "partition_error_code": error}
            )
        return _respond(
            request,
            {
                "results_by_topic_v3_and_below": [
                    {"name": name, "results_by_partition": results}
                    for name, results in by_topic.items()
                ]
            },
        )

    async def add_offsets_to_txn(self, request: Any) -> ResponsePayload:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins."""
        answer = _Answer()
        self.coordinator.add_partitions(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            {self._offsets_partition(request.group_id)},
            answer.deliver,
        )
        return _respond(request, {"error_code": client_error(request, await answer.future)})

    # -- EndTxn -------------------------------------------------------------------

    async def end_txn(self, request: Any) -> ResponsePayload:
        """EndTxn: commit or abort."""
        answer = _Answer()
        self.coordinator.end_transaction(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            commit=bool(request.committed),
            from_client=True,
            callback=answer.deliver,
        )
        return _respond(request, {"error_code": client_error(request, await answer.future)})

    # -- DescribeTransactions / ListTransactions ------------------------------------

    async def describe_transactions(self, request: Any) -> ResponsePayload:
        """DescribeTransactions v0."""
        states = []
        for transactional_id in request.transactional_ids:
            described = self.coordinator.describe(transactional_id)
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(described.partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            states.append(
                {
                    "error_code": described.error,
                    "transactional_id": transactional_id,
                    "transaction_state": described.state,
                    "transaction_timeout": datetime.timedelta(milliseconds=described.timeout_ms),
                    "transaction_start_time": _datetime(described.start_timestamp),
                    "producer_id": described.producer_id,
                    "producer_epoch": described.producer_epoch,
                    "topics": [
                        {"topic": topic, "partitions": partitions}
                        for topic, partitions in by_topic.items()
                    ],
                }
            )
        return _respond(request, {"transaction_states": states})

    async def list_transactions(self, request: Any) -> ResponsePayload:
        """ListTransactions v0-1 (v1: the duration filter)."""
        result = self.coordinator.list_transactions(
            tuple(request.state_filters),
            tuple(int(pid) for pid in request.producer_id_filters),
            int(getattr(request, "duration_filter", -1)),
        )
        return _respond(
            request,
            {
                "error_code": result.error,
                "unknown_state_filters": list(result.unknown_state_filters),
                "transaction_states": [
                    {
                        "transactional_id": listed.transactional_id,
                        "producer_id": listed.producer_id,
                        "transaction_state": listed.state.state_name,
                    }
                    for listed in result.transactions
                ],
            },
        )


TransactionApiHandler = Callable[[TransactionApis, Any], Awaitable[ResponsePayload]]
"""One transaction API's handler: the broker's ``TransactionApis`` and a request body in,
the response body out."""

TRANSACTION_API_HANDLERS: Mapping[int, TransactionApiHandler] = {
    ADD_PARTITIONS_TO_TXN_KEY: TransactionApis.add_partitions_to_txn,
    ADD_OFFSETS_TO_TXN_KEY: TransactionApis.add_offsets_to_txn,
    END_TXN_KEY: TransactionApis.end_txn,
    DESCRIBE_TRANSACTIONS_KEY: TransactionApis.describe_transactions,
    LIST_TRANSACTIONS_KEY: TransactionApis.list_transactions,
}
"""The handler of each API of ``TRANSACTION_API_VERSIONS``, which the broker's API table
calls directly. The broker's FindCoordinator and InitProducerId, which serve other keys
too, call ``find_coordinator`` and ``init_producer_id`` themselves."""
