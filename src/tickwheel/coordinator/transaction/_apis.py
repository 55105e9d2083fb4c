"""``TransactionApis``: the transaction coordinator's requests as typed kio entities in and out.

=======================  ===  ========  ==============================================
API                      key  versions  notes
=======================  ===  ========  ==============================================
FindCoordinator          10   1-6       key_type 1 (transaction); the group side has 0
InitProducerId           22   0-5       with a transactional id (v3+: producer id and
                                        epoch of a resuming producer, KIP-360)
AddPartitionsToTxn       24   0-5       v0-3 a client's (``v3_and_below_*`` fields);
                                        v4-5 a partition leader's batch of
                                        transactions, each ``verify_only`` or added
                                        at transaction version 2
AddOffsetsToTxn          25   0-4
EndTxn                   26   0-5       v5: transaction version 2 (the epoch is
                                        bumped and answered with the producer id)
DescribeTransactions     65   0
ListTransactions         66   0-1
=======================  ===  ========  ==============================================

Versions before PRODUCER_FENCED existed get INVALID_PRODUCER_EPOCH instead, exactly
where Kafka's ``KafkaApis`` down-maps it: InitProducerId below v4, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn below v2 (aiokafka sends v0 of all of them and librdkafka
v0 of the middle two, and neither knows code 90). AddPartitionsToTxn answers
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist and OPERATION_NOT_ATTEMPTED
for the others, adding none.

Each method is written against the newest version's classes of its API: it takes the
request as that version (``DecodedRequest.body_as``; fields an older version lacks at
Kafka's defaults, so an InitProducerId before v3 resumes no producer and a
ListTransactions v0 has no duration filter) and returns the response as that version,
which the broker converts to the version asked. FindCoordinator is v6, keys always in
``coordinator_keys``; the broker carries an older request's one key there and back.
The version asked is passed where the answer depends on it (the PRODUCER_FENCED
down-map). ``TRANSACTION_API_HANDLERS`` reads each API's request and calls its method.

Concurrency: event-loop thread only; a coordinator callback resolves the awaited future
on the same thread.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, TypeVar

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.add_partitions_to_txn.v5 import request as broker_add
from kio.schema.add_partitions_to_txn.v5 import response as broker_added
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
)
from kio.schema.describe_transactions.v0.response import (
    TransactionState as DescribedState,
)
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.list_transactions.v1.response import (
    ListTransactionsResponse,
)
from kio.schema.list_transactions.v1.response import (
    TransactionState as ListedState,
)
from kio.schema.types import BrokerId, ProducerId, TopicName, TransactionalId
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i16, i32, i32Timedelta, i64
from kio.static.protocol import ResponsePayload

from tickwheel.coordinator._locator import CoordinatorLocator
from tickwheel.coordinator.transaction._coordinator import (
    DescribedTransaction,
    EndTxnResult,
    InitProducerIdResult,
    TransactionCoordinator,
)
from tickwheel.coordinator.transaction._metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
)
from tickwheel.coordinator.transaction._verification import PartitionVerifier, TxnPartitions
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import TopicPartition

T = TypeVar("T")

INIT_PRODUCER_ID_KEY = ApiKey.INIT_PRODUCER_ID
ADD_PARTITIONS_TO_TXN_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
ADD_OFFSETS_TO_TXN_KEY = ApiKey.ADD_OFFSETS_TO_TXN
END_TXN_KEY = ApiKey.END_TXN
DESCRIBE_TRANSACTIONS_KEY = ApiKey.DESCRIBE_TRANSACTIONS
LIST_TRANSACTIONS_KEY = ApiKey.LIST_TRANSACTIONS

TRANSACTION_API_VERSIONS: Mapping[int, VersionRange] = {
    ADD_PARTITIONS_TO_TXN_KEY: VersionRange(0, 5),
    ADD_OFFSETS_TO_TXN_KEY: VersionRange(0, 4),
    END_TXN_KEY: VersionRange(0, 5),
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

# The first version of each API that knows PRODUCER_FENCED (KafkaApis down-maps below).
_PRODUCER_FENCED_SINCE: Mapping[int, int] = {
    INIT_PRODUCER_ID_KEY: 4,
    ADD_PARTITIONS_TO_TXN_KEY: 2,
    ADD_OFFSETS_TO_TXN_KEY: 2,
    END_TXN_KEY: 2,
}
_FIRST_BROKER_ADD_PARTITIONS_VERSION = 4
_FIRST_TV2_END_TXN_VERSION = 5
_NO_NODE = BrokerId(-1)
_NO_PORT = i32(-1)


def client_error(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """``error`` as version ``api_version`` of API ``api_key`` knows it (PRODUCER_FENCED
    down-map)."""
    since = _PRODUCER_FENCED_SINCE.get(api_key)
    if error == ErrorCode.producer_fenced and since is not None and api_version < since:
        return ErrorCode.invalid_producer_epoch
    return error


def described_state(described: DescribedTransaction) -> DescribedState:
    """One transactional id's entry of a DescribeTransactions response."""
    by_topic: dict[str, list[i32]] = {}
    for tp in sorted(described.partitions):
        by_topic.setdefault(tp.topic, []).append(i32(tp.partition))
    return DescribedState(
        error_code=described.error,
        transactional_id=TransactionalId(described.transactional_id),
        transaction_state=described.state,
        transaction_timeout=i32Timedelta.parse(
            datetime.timedelta(milliseconds=described.timeout_ms)
        ),
        # Kafka's -1 (no transaction started) included, as kio's reader reads it.
        transaction_start_time=tz_aware_from_i64(i64(described.start_timestamp)),
        producer_id=ProducerId(described.producer_id),
        producer_epoch=i16(described.producer_epoch),
        topics=tuple(
            TopicData(topic=TopicName(topic), partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )


class _Answer(Generic[T]):
    """Awaits the one value a coordinator callback delivers (on the loop's thread)."""

    def __init__(self) -> None:
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def deliver(self, value: T) -> None:
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
        verifier: PartitionVerifier,
    ) -> None:
        self.coordinator = coordinator
        self.verifier = verifier
        self._locate = locate
        self._partition_exists = partition_exists
        self._offsets_partition = offsets_partition

    # -- FindCoordinator ----------------------------------------------------------

    def _find(self, key: str) -> Coordinator:
        error = ErrorCode.coordinator_not_available
        if not key:
            error = ErrorCode.invalid_request
        elif self.coordinator.active:
            node = self._locate(self.coordinator.state.partition_for(key))
            if node is not None:
                return Coordinator(
                    key=key,
                    node_id=BrokerId(node.node_id),
                    host=node.host,
                    port=i32(node.port),
                    error_code=ErrorCode.none,
                    error_message=None,
                )
        return Coordinator(
            key=key, node_id=_NO_NODE, host="", port=_NO_PORT, error_code=error, error_message=None
        )

    def find_coordinator(self, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        """The brokers coordinating transactional ids."""
        return FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            coordinators=tuple(self._find(key) for key in request.coordinator_keys),
        )

    # -- InitProducerId -----------------------------------------------------------

    async def init_producer_id(
        self, request: InitProducerIdRequest, api_version: int
    ) -> InitProducerIdResponse:
        """InitProducerId with a transactional id (v3+: resuming the producer named)."""
        if request.transactional_id is None:
            raise ValueError("InitProducerId without a transactional id is not the coordinator's")
        pid, epoch = int(request.producer_id), int(request.producer_epoch)
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            result = InitProducerIdResult(ErrorCode.invalid_request)
        else:
            expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
            timeout_ms = int(request.transaction_timeout / datetime.timedelta(milliseconds=1))
            answer: _Answer[InitProducerIdResult] = _Answer()
            await self.coordinator.handle_init_producer_id(
                request.transactional_id, timeout_ms, expected, answer.deliver
            )
            result = await answer.future
        return InitProducerIdResponse(
            throttle_time=NO_THROTTLE,
            error_code=client_error(INIT_PRODUCER_ID_KEY, api_version, result.error),
            producer_id=ProducerId(result.producer_id),
            producer_epoch=i16(result.producer_epoch),
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------

    async def add_partitions_to_txn(
        self, request: AddPartitionsToTxnRequest, api_version: int
    ) -> AddPartitionsToTxnResponse:
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
            answer: _Answer[ErrorCode] = _Answer()
            self.coordinator.add_partitions(
                request.v3_and_below_transactional_id,
                int(request.v3_and_below_producer_id),
                int(request.v3_and_below_producer_epoch),
                set(requested),
                answer.deliver,
            )
            error = client_error(ADD_PARTITIONS_TO_TXN_KEY, api_version, await answer.future)
            errors = dict.fromkeys(requested, error)
        by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                AddPartitionsToTxnPartitionResult(
                    partition_index=i32(tp.partition), partition_error_code=error
                )
            )
        return AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=tuple(
                AddPartitionsToTxnTopicResult(
                    name=TopicName(name), results_by_partition=tuple(results)
                )
                for name, results in by_topic.items()
            ),
        )

    async def add_partitions_for_brokers(
        self, request: broker_add.AddPartitionsToTxnRequest
    ) -> broker_added.AddPartitionsToTxnResponse:
        """AddPartitionsToTxn v4-5: a partition leader's batch of transactions, each
        verified (``verify_only``) or added at transaction version 2."""
        questions = [
            TxnPartitions(
                transaction.transactional_id,
                int(transaction.producer_id),
                int(transaction.producer_epoch),
                tuple(
                    TopicPartition(topic.name, int(partition))
                    for topic in transaction.topics
                    for partition in topic.partitions
                ),
                transaction.verify_only,
            )
            for transaction in request.transactions
        ]
        answers = await self.verifier.answer(questions)
        results = []
        for question in questions:
            by_topic: dict[str, list[broker_added.AddPartitionsToTxnPartitionResult]] = {}
            for tp, error in answers[question.transactional_id].items():
                by_topic.setdefault(tp.topic, []).append(
                    broker_added.AddPartitionsToTxnPartitionResult(
                        partition_index=i32(tp.partition), partition_error_code=error
                    )
                )
            results.append(
                broker_added.AddPartitionsToTxnResult(
                    transactional_id=TransactionalId(question.transactional_id),
                    topic_results=tuple(
                        broker_added.AddPartitionsToTxnTopicResult(
                            name=TopicName(name), results_by_partition=tuple(partitions)
                        )
                        for name, partitions in by_topic.items()
                    ),
                )
            )
        return broker_added.AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            results_by_transaction=tuple(results),
        )

    async def add_offsets_to_txn(
        self, request: AddOffsetsToTxnRequest, api_version: int
    ) -> AddOffsetsToTxnResponse:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins."""
        answer: _Answer[ErrorCode] = _Answer()
        self.coordinator.add_partitions(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            {self._offsets_partition(request.group_id)},
            answer.deliver,
        )
        error = client_error(ADD_OFFSETS_TO_TXN_KEY, api_version, await answer.future)
        return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=error)

    # -- EndTxn -------------------------------------------------------------------

    async def end_txn(self, request: EndTxnRequest, api_version: int) -> EndTxnResponse:
        """EndTxn: commit or abort (v5: at transaction version 2, answering the producer
        id and the bumped epoch to go on with)."""
        answer: _Answer[EndTxnResult] = _Answer()
        self.coordinator.end_transaction(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            commit=request.committed,
            from_client=True,
            callback=answer.deliver,
            client_transaction_version=TV_2 if api_version >= _FIRST_TV2_END_TXN_VERSION else TV_0,
        )
        result = await answer.future
        return EndTxnResponse(
            throttle_time=NO_THROTTLE,
            error_code=client_error(END_TXN_KEY, api_version, result.error),
            producer_id=ProducerId(result.producer_id),
            producer_epoch=i16(result.producer_epoch),
        )

    # -- DescribeTransactions / ListTransactions ------------------------------------

    async def describe_transactions(
        self, request: DescribeTransactionsRequest
    ) -> DescribeTransactionsResponse:
        """DescribeTransactions v0."""
        return DescribeTransactionsResponse(
            throttle_time=NO_THROTTLE,
            transaction_states=tuple(
                described_state(self.coordinator.describe(transactional_id))
                for transactional_id in request.transactional_ids
            ),
        )

    async def list_transactions(self, request: ListTransactionsRequest) -> ListTransactionsResponse:
        """ListTransactions v0-1 (v1: the duration filter; -1 from v0, none)."""
        result = self.coordinator.list_transactions(
            request.state_filters,
            tuple(int(pid) for pid in request.producer_id_filters),
            int(request.duration_filter),
        )
        return ListTransactionsResponse(
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            unknown_state_filters=result.unknown_state_filters,
            transaction_states=tuple(
                ListedState(
                    transactional_id=TransactionalId(listed.transactional_id),
                    producer_id=ProducerId(listed.producer_id),
                    transaction_state=listed.state.state_name,
                )
                for listed in result.transactions
            ),
        )


TransactionApiHandler = Callable[[TransactionApis, DecodedRequest], Awaitable[ResponsePayload]]
"""One transaction API's handler: the broker's ``TransactionApis`` and a request in, the
response (of the newest version of its API) out."""


async def _add_partitions_to_txn(apis: TransactionApis, request: DecodedRequest) -> ResponsePayload:
    if request.api_version >= _FIRST_BROKER_ADD_PARTITIONS_VERSION:
        return await apis.add_partitions_for_brokers(
            request.body_as(broker_add.AddPartitionsToTxnRequest)
        )
    body = request.body_as(AddPartitionsToTxnRequest)
    return await apis.add_partitions_to_txn(body, request.api_version)


async def _add_offsets_to_txn(apis: TransactionApis, request: DecodedRequest) -> ResponsePayload:
    body = request.body_as(AddOffsetsToTxnRequest)
    return await apis.add_offsets_to_txn(body, request.api_version)


async def _end_txn(apis: TransactionApis, request: DecodedRequest) -> ResponsePayload:
    return await apis.end_txn(request.body_as(EndTxnRequest), request.api_version)


async def _describe_transactions(apis: TransactionApis, request: DecodedRequest) -> ResponsePayload:
    return await apis.describe_transactions(request.body_as(DescribeTransactionsRequest))


async def _list_transactions(apis: TransactionApis, request: DecodedRequest) -> ResponsePayload:
    return await apis.list_transactions(request.body_as(ListTransactionsRequest))


TRANSACTION_API_HANDLERS: Mapping[int, TransactionApiHandler] = {
    ADD_PARTITIONS_TO_TXN_KEY: _add_partitions_to_txn,
    ADD_OFFSETS_TO_TXN_KEY: _add_offsets_to_txn,
    END_TXN_KEY: _end_txn,
    DESCRIBE_TRANSACTIONS_KEY: _describe_transactions,
    LIST_TRANSACTIONS_KEY: _list_transactions,
}
"""The handler of each API of ``TRANSACTION_API_VERSIONS``, which the broker's API table
calls directly. The broker's FindCoordinator and InitProducerId, which serve other keys
too, call ``find_coordinator`` and ``init_producer_id`` themselves."""
