"""InitProducerId and the log's deduplication of an idempotent producer's retries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from replica.records import batch
from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

PRODUCE = ApiKey.PRODUCE
INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
METADATA = ApiKey.METADATA


def init_producer_id(client: WireClient, transactional_id: str | None = None) -> Any:
    return client.call(
        INIT_PRODUCER_ID,
        4,
        {"transactional_id": transactional_id, "transaction_timeout": 60_000},
    )


def produce(client: WireClient, records: bytes) -> Any:
    body = client.call(
        PRODUCE,
        9,
        {
            "acks": -1,
            "timeout": 1000,
            "topic_data": [{"name": "idem", "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return body.responses[0].partition_responses[0]


def test_a_retried_batch_is_appended_once(tickwheel_broker: BackgroundBroker) -> None:
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        client.call(METADATA, 4, {"topics": [{"name": "idem"}], "allow_auto_topic_creation": True})
        answer = init_producer_id(client)
        assert answer.error_code == ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        first = batch(b"a", b"b", producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(client, first).base_offset == 0
        retried = produce(client, first)
        assert (retried.error_code, retried.base_offset) == (ErrorCode.none, 0)
        second = batch(b"c", producer_id=pid, producer_epoch=epoch, base_sequence=2)
        assert produce(client, second).base_offset == 2
        gap = batch(b"d", producer_id=pid, producer_epoch=epoch, base_sequence=9)
        assert produce(client, gap).error_code == ErrorCode.out_of_order_sequence_number
    finally:
        client.close()
    # The retried duplicate and the refused batch add no records to MessagesInPerSec.
    text = tickwheel_broker.call(lambda broker: broker.context.metrics.render())
    assert isinstance(text, bytes)
    series = 'kafka_server_BrokerTopicMetrics_MessagesInPerSec_total{topic="idem"} '
    (line,) = [line for line in text.decode().splitlines() if line.startswith(series)]
    assert float(line.removeprefix(series)) == 3


def test_producer_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "1",
        }
    )
    seen: list[int] = []
    for _ in range(2):
        with BackgroundBroker(config) as broker:
            client = WireClient(broker.bootstrap_servers)
            try:
                seen += [init_producer_id(client).producer_id for _ in range(3)]
            finally:
                client.close()
    assert len(set(seen)) == len(seen)
