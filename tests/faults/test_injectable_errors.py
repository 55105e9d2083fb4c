"""Every error ``INJECTABLE`` lists, injected into a real broker and read off the wire
where its API carries it, with the throttle time; the leader hints (KIP-951) an injected
leader error carries, on the wire and as librdkafka reads them; and the table in
docs/testing.md, which is the list's own.

One broker serves the whole module (``tickwheel_session_broker``); each case's rule
hits one request and is gone.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequestTopic

from server.wire import WireClient, create_topic
from tickwheel.faults import (
    INJECTABLE,
    ErrorPlace,
    FaultPlan,
    InjectableApi,
    injectable_errors_table,
)
from tickwheel.faults._rules import api_name
from tickwheel.protocol import ApiKey, encode_request
from tickwheel.server import BackgroundBroker
from tickwheel.server.apis import SUPPORTED_VERSIONS

from .test_answers import partition_errors, request

pytestmark = pytest.mark.integration

CLIENT_ID = "injectable-test"
PAIRS = [("injected", 0)]
TESTING_DOC = Path(__file__).parents[2] / "docs" / "testing.md"
DELIVERY_TIMEOUT_S = 30.0
CASES = [
    pytest.param(entry, error, id=f"{api_name(entry.api)}-{error.name}")
    for entry in INJECTABLE
    for error in entry.errors
]


def version_of(entry: InjectableApi) -> int:
    served = SUPPORTED_VERSIONS[entry.api]
    return served.max_version if entry.version is None else entry.version


def body_of(api: ApiKey, version: int, pairs: list[tuple[str, int]] = PAIRS) -> Any:
    """A request of ``api`` at ``version`` naming ``pairs`` (Metadata: their topic; a
    Produce asks acks=1, so a handler answers what the fault leaves it)."""
    body: Any = request(api, version, pairs).body
    if api == ApiKey.METADATA:
        names = dict.fromkeys(topic for topic, _ in pairs)
        topics = tuple(MetadataRequestTopic(name=name, topic_id=None) for name in names)
        return dataclasses.replace(body, topics=topics, allow_auto_topic_creation=False)
    if api == ApiKey.PRODUCE:
        return dataclasses.replace(body, acks=1)
    return body


def answer(broker: BackgroundBroker, api: ApiKey, version: int, body: Any) -> Any:
    """The decoded answer to ``body`` (a request entity) sent as it is."""
    client = WireClient(broker.bootstrap_servers)
    try:
        client.sock.sendall(encode_request(1, body, client_id=CLIENT_ID))
        correlation_id, decoded = client.receive(api, version)
        assert correlation_id == 1
        return decoded
    finally:
        client.close()


@pytest.mark.parametrize(("entry", "error"), CASES)
def test_an_injected_error_is_answered_where_its_api_carries_it(
    tickwheel_session_broker: BackgroundBroker,
    tickwheel_faults: FaultPlan,
    entry: InjectableApi,
    error: ErrorCode,
) -> None:
    version = version_of(entry)
    served = SUPPORTED_VERSIONS[entry.api]
    assert served.min_version <= version <= served.max_version
    handle = tickwheel_faults.add(api=entry.api, error=error, count=1)
    body = answer(tickwheel_session_broker, entry.api, version, body_of(entry.api, version))
    assert handle.spent
    assert body.throttle_time is not None
    place = entry.place_of(error)
    if place is ErrorPlace.PARTITION:
        assert partition_errors(entry.api, version, body) == dict.fromkeys(PAIRS, error)
        if hasattr(body, "error_code"):
            assert body.error_code == ErrorCode.none
    elif place is ErrorPlace.TOPIC:
        assert [(t.name, t.error_code, t.partitions) for t in body.topics] == [
            ("injected", error, ())
        ]
        assert [b.port for b in body.brokers] == [tickwheel_session_broker.port]
    elif place is ErrorPlace.COORDINATOR_KEY:
        assert [(c.key, c.error_code) for c in body.coordinators] == [
            ("g1", error),
            ("g2", error),
        ]
    else:
        assert body.error_code == error


def test_the_table_in_the_testing_page_is_the_list() -> None:
    assert injectable_errors_table() in TESTING_DOC.read_text(encoding="utf-8")


def hinted_topic(broker: BackgroundBroker, name: str, partitions: int = 1) -> None:
    client = WireClient(broker.bootstrap_servers)
    try:
        create_topic(client, name, partitions=partitions)
    finally:
        client.close()


def test_an_injected_not_leader_names_the_leader_and_its_endpoint(
    tickwheel_session_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    broker = tickwheel_session_broker
    broker_id = broker.broker.config.broker_id
    hinted_topic(broker, "hinted", partitions=2)
    pairs = [("hinted", 0), ("hinted", 1)]
    tickwheel_faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", partition=1, count=1)
    produced = answer(broker, ApiKey.PRODUCE, 12, body_of(ApiKey.PRODUCE, 12, pairs))
    leaders = {
        p.index: (p.error_code, p.current_leader.leader_id)
        for p in produced.responses[0].partition_responses
    }
    assert leaders[1] == (ErrorCode.not_leader_or_follower, broker_id)
    # The other partition went to the handler: no leader error, no hint.
    assert leaders[0][1] == -1
    assert [(n.node_id, n.host, n.port) for n in produced.node_endpoints] == [
        (broker_id, "127.0.0.1", broker.port)
    ]
    tickwheel_faults.add(api="Fetch", error="FENCED_LEADER_EPOCH", count=1)
    fetched = answer(broker, ApiKey.FETCH, 12, body_of(ApiKey.FETCH, 12, pairs))
    assert {
        (p.partition_index, p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch)
        for p in fetched.responses[0].partitions
    } == {(index, ErrorCode.fenced_leader_epoch, broker_id, 0) for index in (0, 1)}
    tickwheel_faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
    older = answer(broker, ApiKey.PRODUCE, 9, body_of(ApiKey.PRODUCE, 9, pairs))
    assert not hasattr(older, "node_endpoints")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_librdkafka_takes_the_leader_from_the_hint(
    tickwheel_session_broker: BackgroundBroker, tickwheel_faults: FaultPlan
) -> None:
    broker = tickwheel_session_broker
    broker_id = broker.broker.config.broker_id
    hinted_topic(broker, "hinted-librdkafka")
    lines = _Lines()
    logger = logging.getLogger("injectable.librdkafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    handle = tickwheel_faults.add(
        api="Produce", topic="hinted-librdkafka", error="NOT_LEADER_OR_FOLLOWER", count=1
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "debug": "metadata", "linger.ms": 0},
        logger=logger,
    )
    try:
        failed: list[str] = []
        producer.produce(
            "hinted-librdkafka",
            b"retried",
            on_delivery=lambda err, _: failed.append(str(err)) if err else None,
        )
        assert producer.flush(DELIVERY_TIMEOUT_S) == 0
        assert failed == []
        assert handle.spent
        updated = re.compile(
            rf"hinted-librdkafka\(.*\)\[0\]: updated with leader {broker_id} and epoch 0"
        )
        assert any(updated.search(line) for line in lines.lines), lines.lines[-20:]
    finally:
        logger.removeHandler(lines)
