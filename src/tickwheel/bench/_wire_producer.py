"""``WireProducer``: a minimal idempotent or transactional producer on the Kafka protocol,
for the transaction protocol no client here speaks.

librdkafka, kafka-python and aiokafka use transaction version 1 whatever a broker
finalizes, so ``tickwheel bench transactions`` measures transaction version 2 with this
producer, and the same producer's idempotent and version 1 rates beside it, so that the
ratios compare protocols and not clients. Per protocol, one transaction costs:

==========  ===========================================  ==============================
mode        before the first batch to a partition        at the end
==========  ===========================================  ==============================
idempotent  --                                           --
v1          AddPartitionsToTxn v3 (one round trip)       EndTxn v4
v2          -- (Produce v12: the leader adds it)         EndTxn v5 (the epoch bumped,
                                                         sequences start again at 0)
==========  ===========================================  ==============================

It talks to one broker (the benchmark's single node, leader and coordinator of
everything) over one blocking connection, one request at a time: each ``send`` is one
Produce (acks=all) holding one batch per partition, and it raises on any error, which
a benchmark must not hide.

Concurrency: one thread; not thread-safe.
"""

from __future__ import annotations

import enum
import time
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.bench._batches import make_batch
from tickwheel.protocol import ApiKey, BlockingClient
from tickwheel.record import TRANSACTIONAL_FLAG_MASK

_CLIENT_ID = "tickwheel-bench-wire-producer"
_TIMEOUT_S = 60.0
_TRANSACTION_TIMEOUT_MS = 60_000
_PRODUCE_TIMEOUT_MS = 30_000
_ACKS_ALL = -1
_COORDINATOR_TRANSACTION = 1
_FIND_COORDINATOR_VERSION = 3
_INIT_PRODUCER_ID_VERSION = 5
_ADD_PARTITIONS_VERSION = 3
_PRODUCE_V1_VERSION = 11
_PRODUCE_V2_VERSION = 12
_END_TXN_V1_VERSION = 4
_END_TXN_V2_VERSION = 5


class Mode(enum.Enum):
    """The producer's protocol."""

    IDEMPOTENT = "idempotent"
    V1 = "transactions v1"
    V2 = "transactions v2"


class WireProducerError(RuntimeError):
    """A request the broker refused."""


def _check(what: str, error_code: int) -> None:
    if error_code != ErrorCode.none:
        raise WireProducerError(f"{what}: {ErrorCode(error_code).name}")


class WireProducer:
    """Sends batches of one topic's partitions, in transactions unless idempotent."""

    def __init__(self, bootstrap: str, topic: str, mode: Mode, transactional_id: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self._client = BlockingClient(
            host, int(port), client_id=_CLIENT_ID, timeout_s=_TIMEOUT_S, no_delay=True
        )
        self._topic = topic
        self._mode = mode
        self._transactional_id = None if mode is Mode.IDEMPOTENT else transactional_id
        if self._transactional_id is not None:
            found = self._client.call(
                ApiKey.FIND_COORDINATOR,
                _FIND_COORDINATOR_VERSION,
                {"key": self._transactional_id, "key_type": _COORDINATOR_TRANSACTION},
            )
            _check("FindCoordinator", found.error_code)
        started = self._client.call(
            ApiKey.INIT_PRODUCER_ID,
            _INIT_PRODUCER_ID_VERSION,
            {
                "transactional_id": self._transactional_id,
                "transaction_timeout": _TRANSACTION_TIMEOUT_MS,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        _check("InitProducerId", started.error_code)
        self._producer_id = int(started.producer_id)
        self._epoch = int(started.producer_epoch)
        self._sequences: dict[int, int] = {}
        self._in_transaction: set[int] = set()

    def send(self, values: dict[int, list[bytes]]) -> None:
        """One Produce of ``values`` per partition; waits for acks=all."""
        if self._mode is Mode.V1:
            self._add_partitions([p for p in values if p not in self._in_transaction])
        attributes = 0 if self._mode is Mode.IDEMPOTENT else TRANSACTIONAL_FLAG_MASK
        now_ms = int(time.time() * 1000)
        partition_data = []
        for partition, records in values.items():
            sequence = self._sequences.get(partition, 0)
            batch = make_batch(
                records,
                timestamp_ms=now_ms,
                producer_id=self._producer_id,
                producer_epoch=self._epoch,
                base_sequence=sequence,
                attributes=attributes,
            )
            self._sequences[partition] = sequence + len(records)
            partition_data.append({"index": partition, "records": batch})
        body = self._client.call(
            ApiKey.PRODUCE,
            _PRODUCE_V2_VERSION if self._mode is Mode.V2 else _PRODUCE_V1_VERSION,
            {
                "transactional_id": self._transactional_id,
                "acks": _ACKS_ALL,
                "timeout": _PRODUCE_TIMEOUT_MS,
                "topic_data": [{"name": self._topic, "partition_data": partition_data}],
            },
        )
        for topic in body.responses:
            for answer in topic.partition_responses:
                _check(f"Produce to {topic.name}-{answer.index}", answer.error_code)
        self._in_transaction.update(values)

    def _add_partitions(self, partitions: list[int]) -> None:
        if not partitions:
            return
        body = self._client.call(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            _ADD_PARTITIONS_VERSION,
            {
                "v3_and_below_transactional_id": self._transactional_id,
                "v3_and_below_producer_id": self._producer_id,
                "v3_and_below_producer_epoch": self._epoch,
                "v3_and_below_topics": [{"name": self._topic, "partitions": partitions}],
            },
        )
        for topic in body.results_by_topic_v3_and_below:
            for result in topic.results_by_partition:
                _check("AddPartitionsToTxn", result.partition_error_code)

    def commit(self) -> None:
        """EndTxn (commit); at version 2 the next transaction runs at the bumped epoch."""
        version = _END_TXN_V2_VERSION if self._mode is Mode.V2 else _END_TXN_V1_VERSION
        body: Any = self._client.call(
            ApiKey.END_TXN,
            version,
            {
                "transactional_id": self._transactional_id,
                "producer_id": self._producer_id,
                "producer_epoch": self._epoch,
                "committed": True,
            },
        )
        _check("EndTxn", body.error_code)
        self._in_transaction.clear()
        if self._mode is Mode.V2:
            self._producer_id = int(body.producer_id)
            self._epoch = int(body.producer_epoch)
            self._sequences.clear()

    def close(self) -> None:
        """Close the connection."""
        self._client.close()
