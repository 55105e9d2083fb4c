"""Authorization of the transaction coordinator's APIs, as Kafka's ``KafkaApis`` does it.

With an authorizer configured, the rule of each API (``authorized_transaction_handler``,
chosen once when the broker's API table is built) checks a request before the
coordinator's method for it sees it:

- EndTxn: WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
- AddOffsetsToTxn: the same, then READ on the group (GROUP_AUTHORIZATION_FAILED);
- AddPartitionsToTxn v4+ (a partition leader's): CLUSTER_ACTION on the cluster, else
  CLUSTER_AUTHORIZATION_FAILED;
- AddPartitionsToTxn v0-3: WRITE on the transactional id (else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic: when a topic is refused
  nothing is added, its partitions are answered TOPIC_AUTHORIZATION_FAILED and the
  others OPERATION_NOT_ATTEMPTED;
- DescribeTransactions: DESCRIBE on each transactional id (the others
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED); ListTransactions lists those it may DESCRIBE.

InitProducerId's rule lives with its handler (``_init_producer_id``). A rule reads the
request as the newest version its API serves, as the coordinator does, and answers with
that version's typed response, which ``reply`` converts to the version asked.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest as BrokerAddPartitionsToTxnRequest,
)
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TransactionState,
)
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_transactions.v1.request import ListTransactionsRequest

from tickwheel.coordinator.transaction import (
    DescribedTransaction,
    TransactionService,
    described_state,
)
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorize_cluster, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import Response, refuse_whole, reply

_ADD_PARTITIONS_TO_TXN = ApiKey.ADD_PARTITIONS_TO_TXN
_FIRST_BROKER_VERSION = 4
_ADD_OFFSETS_TO_TXN = ApiKey.ADD_OFFSETS_TO_TXN
_END_TXN = ApiKey.END_TXN
_DESCRIBE_TRANSACTIONS = ApiKey.DESCRIBE_TRANSACTIONS
_LIST_TRANSACTIONS = ApiKey.LIST_TRANSACTIONS
_TXN_DENIED = ErrorCode.transactional_id_authorization_failed

AuthorizedHandler = Callable[
    [BrokerContext, TransactionService, DecodedRequest], Awaitable[Response]
]


def _txn_allowed(context: BrokerContext, request: DecodedRequest, transactional_id: str) -> bool:
    return authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _add_partitions_refused(
    context: BrokerContext, request: DecodedRequest, body: AddPartitionsToTxnRequest
) -> Response | None:
    topics = body.v3_and_below_topics
    error_by_topic: dict[str, ErrorCode] = {}
    if not _txn_allowed(context, request, body.v3_and_below_transactional_id):
        error_by_topic = dict.fromkeys((t.name for t in topics), _TXN_DENIED)
    else:
        names = [t.name for t in topics]
        allowed = authorized_names(context, request, AclOperation.WRITE, ResourceType.TOPIC, names)
        if len(allowed) == len(set(names)):
            return None
        error_by_topic = {
            name: ErrorCode.operation_not_attempted
            if name in allowed
            else ErrorCode.topic_authorization_failed
            for name in names
        }
    results = tuple(
        AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=tuple(
                AddPartitionsToTxnPartitionResult(
                    partition_index=index, partition_error_code=error_by_topic[t.name]
                )
                for index in t.partitions
            ),
        )
        for t in topics
    )
    return reply(
        request,
        AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, results_by_topic_v3_and_below=results
        ),
    )


async def _describe_transactions(
    context: BrokerContext,
    transactions: TransactionService,
    request: DecodedRequest,
) -> Response:
    body = request.body_as(DescribeTransactionsRequest)
    ids = body.transactional_ids
    allowed = authorized_names(
        context, request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids
    )
    if len(allowed) == len(set(ids)):
        return reply(request, await transactions.apis.describe_transactions(body))
    refused = tuple(
        described_state(DescribedTransaction(_TXN_DENIED, txn_id))
        for txn_id in ids
        if txn_id not in allowed
    )
    kept = tuple(txn_id for txn_id in ids if txn_id in allowed)
    states: tuple[TransactionState, ...] = ()
    if kept:
        answered = await transactions.apis.describe_transactions(
            dataclasses.replace(body, transactional_ids=kept)
        )
        states = answered.transaction_states
    return reply(
        request,
        DescribeTransactionsResponse(
            throttle_time=NO_THROTTLE, transaction_states=(*states, *refused)
        ),
    )


async def _list_transactions(
    context: BrokerContext,
    transactions: TransactionService,
    request: DecodedRequest,
) -> Response:
    answered = await transactions.apis.list_transactions(request.body_as(ListTransactionsRequest))
    allowed = authorized_names(
        context,
        request,
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        (s.transactional_id for s in answered.transaction_states),
        log_if_denied=False,
    )
    listed = tuple(s for s in answered.transaction_states if s.transactional_id in allowed)
    return reply(request, dataclasses.replace(answered, transaction_states=listed))


async def _end_txn(
    context: BrokerContext, transactions: TransactionService, request: DecodedRequest
) -> Response:
    body = request.body_as(EndTxnRequest)
    if not _txn_allowed(context, request, body.transactional_id):
        return refuse_whole(request, _TXN_DENIED)
    return reply(request, await transactions.apis.end_txn(body, request.api_version))


async def _add_offsets_to_txn(
    context: BrokerContext, transactions: TransactionService, request: DecodedRequest
) -> Response:
    body = request.body_as(AddOffsetsToTxnRequest)
    if not _txn_allowed(context, request, body.transactional_id):
        return refuse_whole(request, _TXN_DENIED)
    if not authorize(context, request, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return refuse_whole(request, ErrorCode.group_authorization_failed)
    return reply(request, await transactions.apis.add_offsets_to_txn(body, request.api_version))


async def _add_partitions_to_txn(
    context: BrokerContext, transactions: TransactionService, request: DecodedRequest
) -> Response:
    if request.api_version >= _FIRST_BROKER_VERSION:
        if not authorize_cluster(context, request, AclOperation.CLUSTER_ACTION):
            return refuse_whole(request, ErrorCode.cluster_authorization_failed)
        broker_body = request.body_as(BrokerAddPartitionsToTxnRequest)
        return reply(request, await transactions.apis.add_partitions_for_brokers(broker_body))
    body = request.body_as(AddPartitionsToTxnRequest)
    refused = _add_partitions_refused(context, request, body)
    if refused is not None:
        return refused
    return reply(request, await transactions.apis.add_partitions_to_txn(body, request.api_version))


_RULES: Mapping[int, AuthorizedHandler] = {
    _END_TXN: _end_txn,
    _ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    _ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    _DESCRIBE_TRANSACTIONS: _describe_transactions,
    _LIST_TRANSACTIONS: _list_transactions,
}


def authorized_transaction_handler(api_key: int) -> AuthorizedHandler:
    """API ``api_key``'s handler behind its authorization rule (see the module docstring)."""
    return _RULES[api_key]
