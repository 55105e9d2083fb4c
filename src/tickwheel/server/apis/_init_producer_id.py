"""InitProducerId (key 22): a producer id for an idempotent producer.

Each call hands out a producer id never used before (the registry reserves ids in
blocks on disk, so a restart does not reuse one; in a cluster, blocks claimed in
ZooKeeper, so no two brokers hand out the same id), at epoch 0; the log then
deduplicates that producer's batches by sequence number. Transactions need a
transaction coordinator, which this broker does not have: a request with a
``transactional_id`` gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the answer FindCoordinator
gives for a transactional id too (see ``tickwheel.coordinator.NO_TRANSACTIONS_ERROR``: a
retriable code such as COORDINATOR_NOT_AVAILABLE leaves clients retrying forever; this
one every client treats as fatal, so ``init_transactions`` fails at once).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.coordinator import NO_TRANSACTIONS_ERROR
from tickwheel.protocol import DecodedRequest, VersionRange
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_FIRST_EPOCH = 0
_NO_PRODUCER_ID = -1
_NO_EPOCH = -1


async def handle_init_producer_id(context: BrokerContext, request: DecodedRequest) -> Response:
    """Allocate a fresh producer id, or refuse a transactional one."""
    body: Any = request.body
    if body.transactional_id is not None:
        return reply(
            request,
            {
                "throttle_time": 0,
                "error_code": NO_TRANSACTIONS_ERROR,
                "producer_id": _NO_PRODUCER_ID,
                "producer_epoch": _NO_EPOCH,
            },
        )
    return reply(
        request,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "producer_id": await context.cluster.allocate_producer_id()
            if context.cluster is not None
            else context.topics.allocate_producer_id(),
            "producer_epoch": _FIRST_EPOCH,
        },
    )


INIT_PRODUCER_ID = ApiSpec(22, "InitProducerId", VersionRange(0, 4), handle_init_producer_id)
