"""TxnOffsetCommit's question to the transaction coordinator (KIP-890), before the group
coordinator writes the offsets.

The offsets of a transaction go to the group's ``__consumer_offsets`` partition, which
must be in the transaction like any partition a transactional produce writes to. With
``transaction.partition.verification.enable`` (default true), and always for v5, the
broker asks the transaction coordinator first (``PartitionVerifier``): v0-4 whether
the partition is in the ongoing transaction (the client added it with
AddOffsetsToTxn; part 1), v5 (transaction version 2) to add it (part 2: the client
sends no AddOffsetsToTxn). A refusal answers every partition of the request, and
nothing is written:
TRANSACTION_ABORTABLE from v4 and INVALID_TXN_STATE before, PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH, and the coordinator's retriable answers as
COORDINATOR_LOAD_IN_PROGRESS, which every client retries. With an authorizer, a request
without WRITE on its transactional id asks nothing: the group API's rule refuses it.

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest

from tickwheel.coordinator.group import OFFSETS_TOPIC, asked_partitions, txn_offset_commit_response
from tickwheel.coordinator.transaction import client_answer
from tickwheel.protocol import DecodedRequest
from tickwheel.replica import TopicPartition
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import Response, reply

_FIRST_ABORTABLE_VERSION = 4
_FIRST_ADD_PARTITION_VERSION = 5


async def refused_txn_offset_commit(
    context: BrokerContext, request: DecodedRequest
) -> Response | None:
    """The answer refusing a TxnOffsetCommit whose offsets partition the transaction
    coordinator does not confirm (or add), or None to go on."""
    if (
        not context.config.transaction_partition_verification_enable
        and request.api_version < _FIRST_ADD_PARTITION_VERSION
    ):
        return None
    body = request.body_as(TxnOffsetCommitRequest)
    if not authorize(
        context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
    ):
        return None
    offsets = TopicPartition(OFFSETS_TOPIC, context.groups.coordinator.partition_for(body.group_id))
    answers = await context.transactions.verifier.verify(
        body.transactional_id,
        int(body.producer_id),
        int(body.producer_epoch),
        [offsets],
        add=request.api_version >= _FIRST_ADD_PARTITION_VERSION,
    )
    error = answers[offsets]
    if error == ErrorCode.none:
        return None
    refused = client_answer(
        error,
        abortable_known=request.api_version >= _FIRST_ABORTABLE_VERSION,
        retriable=ErrorCode.coordinator_load_in_progress,
    )
    return reply(
        request, txn_offset_commit_response(asked_partitions(body.topics), lambda _tp: refused)
    )
