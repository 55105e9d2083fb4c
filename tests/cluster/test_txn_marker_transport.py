"""``KafkaTxnMarkerTransport``: markers as WriteTxnMarkers v1, answers per partition.

The far end is a minimal server in the test that decodes the request with the broker's
own codec and answers from a table, since serving WriteTxnMarkers is the log side's.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.cluster import BrokerChannels, ChannelSettings, KafkaTxnMarkerTransport
from tickwheel.cluster._znodes import BrokerEndpoint
from tickwheel.protocol import (
    ApiKey,
    VersionRange,
    build_entity,
    decode_request,
    encode_response,
    response_schema,
)
from tickwheel.replica import TopicPartition, TxnMarker

pytestmark = pytest.mark.asyncio
WRITE_TXN_MARKERS = ApiKey.WRITE_TXN_MARKERS


async def serve(answers: dict[tuple[str, int], ErrorCode], seen: list[Any]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        request = decode_request(
            await reader.readexactly(size), {WRITE_TXN_MARKERS: VersionRange(1, 1)}
        )
        body: Any = request.body
        seen.append(body)
        response = build_entity(
            response_schema(WRITE_TXN_MARKERS, 1),
            {
                "markers": [
                    {
                        "producer_id": marker.producer_id,
                        "topics": [
                            {
                                "name": topic.name,
                                "partitions": [
                                    {
                                        "partition_index": p,
                                        "error_code": answers[(topic.name, p)],
                                    }
                                    for p in topic.partition_indexes
                                ],
                            }
                            for topic in marker.topics
                        ],
                    }
                    for marker in body.markers
                ]
            },
        )
        writer.write(encode_response(request.correlation_id, response))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def test_markers_travel_as_write_txn_markers_v1() -> None:
    seen: list[Any] = []
    answers = {("a", 0): ErrorCode.none, ("a", 1): ErrorCode.not_leader_or_follower}
    server = await serve(answers, seen)
    port = server.sockets[0].getsockname()[1]
    transport = KafkaTxnMarkerTransport(
        BrokerChannels(
            lambda broker_id: BrokerEndpoint(broker_id, "127.0.0.1", port),
            ChannelSettings("test", 5_000),
        )
    )
    marker = TxnMarker(
        producer_id=42,
        producer_epoch=3,
        coordinator_epoch=7,
        commit=False,
        partitions=(TopicPartition("a", 0), TopicPartition("a", 1)),
    )
    try:
        results = await transport.write_txn_markers(1, [marker])
    finally:
        await transport.close()
        server.close()
        await server.wait_closed()
    assert results == {
        42: {
            TopicPartition("a", 0): ErrorCode.none,
            TopicPartition("a", 1): ErrorCode.not_leader_or_follower,
        }
    }
    ((sent,),) = [body.markers for body in seen]
    assert (sent.producer_id, sent.producer_epoch, sent.coordinator_epoch) == (42, 3, 7)
    assert sent.transaction_result is False
    assert [(t.name, t.partition_indexes) for t in sent.topics] == [("a", (0, 1))]


async def test_an_unknown_broker_raises() -> None:
    transport = KafkaTxnMarkerTransport(
        BrokerChannels(lambda _: None, ChannelSettings("test", 1_000))
    )
    with pytest.raises(ConnectionError):
        await transport.write_txn_markers(5, [])
