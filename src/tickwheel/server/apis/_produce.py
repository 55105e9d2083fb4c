"""Produce (key 0): append record batches to partition leaders.

The handler turns the request into ``TopicPartition -> batch bytes`` and hands it to
``ReplicaManager.append_records``; record batches stay opaque bytes (the log
validates them and assigns offsets). acks=0 gets no response at all (and when it
fails, the connection is closed, as Kafka does, since no response can carry the
error); acks=1 is answered after the append; acks=all waits in the Produce purgatory
(DelayedProduce) until the high watermark covers the appended records, or the
request's timeout. Partitions are answered in the order the request listed them.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.protocol import DecodedRequest, VersionRange
from tickwheel.replica import ACKS_NONE, ProducePartitionResult, TopicPartition
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import (
    ApiSpec,
    CloseConnectionError,
    Pending,
    Response,
    reply,
    to_ms,
)


async def handle_produce(context: BrokerContext, request: DecodedRequest) -> Response:
    """Append, wait as ``acks`` requires, answer per partition."""
    body: Any = request.body
    entries: dict[TopicPartition, bytes] = {}
    invalid: dict[TopicPartition, ProducePartitionResult] = {}
    for topic in body.topic_data:
        for partition in topic.partition_data:
            tp = TopicPartition(topic.name, partition.index)
            if partition.records is None:
                invalid[tp] = ProducePartitionResult(ErrorCode.invalid_record)
            else:
                entries[tp] = partition.records
    pending: Pending[dict[TopicPartition, ProducePartitionResult]] = Pending()
    context.replica_manager.append_records(to_ms(body.timeout), body.acks, entries, pending.resolve)
    results = {**await pending, **invalid}
    for tp, records in entries.items():
        result = results[tp]
        appended = result.error_code == ErrorCode.none
        context.metrics.record_produce(
            tp.topic, len(records) if appended else 0, result.appended_messages
        )
    if body.acks == ACKS_NONE:
        failed = sorted(str(tp) for tp, r in results.items() if r.error_code != ErrorCode.none)
        if failed:
            raise CloseConnectionError(f"acks=0 produce failed for {', '.join(failed)}")
        return None
    return reply(
        request,
        {
            "responses": [
                {
                    "name": topic.name,
                    "partition_responses": [
                        _partition_response(p.index, results[TopicPartition(topic.name, p.index)])
                        for p in topic.partition_data
                    ],
                }
                for topic in body.topic_data
            ],
            "throttle_time": 0,
        },
    )


def _partition_response(index: int, result: ProducePartitionResult) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": result.error_code,
        "base_offset": result.base_offset,
        "log_append_time": None if result.log_append_time_ms < 0 else result.log_append_time_ms,
        "log_start_offset": result.log_start_offset,
        "record_errors": [],
        "error_message": result.error_message,
    }


PRODUCE = ApiSpec(0, "Produce", VersionRange(3, 9), handle_produce)
