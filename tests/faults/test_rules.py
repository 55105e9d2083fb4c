"""Fault rules from plain values: what they accept, and the sentence a bad field gets."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32

from tickwheel.faults import FaultKind, FaultPhase, FaultPlan, FaultRuleError, parse_rule
from tickwheel.protocol import ApiKey, DecodedRequest


@pytest.mark.parametrize("api", ["Produce", "PRODUCE", "produce", 0, "0", ApiKey.PRODUCE])
def test_an_api_is_named_in_any_spelling(api: object) -> None:
    assert parse_rule({"api": api, "error": "NOT_LEADER_OR_FOLLOWER"}).api is ApiKey.PRODUCE


@pytest.mark.parametrize(
    "error", ["NOT_LEADER_OR_FOLLOWER", "not_leader_or_follower", "NotLeaderOrFollower", 6, "6"]
)
def test_an_error_is_named_in_any_spelling(error: object) -> None:
    rule = parse_rule({"api": "Produce", "error": error})
    assert (rule.kind, rule.error) == (FaultKind.ERROR, ErrorCode.not_leader_or_follower)


def test_a_full_rule_keeps_every_filter() -> None:
    rule = parse_rule(
        {
            "api": "ConsumerGroupHeartbeat",
            "kind": "drop",
            "phase": "after",
            "count": 2,
            "version": 0,
            "topic": "t",
            "partition": 1,
            "group_id": "g",
            "client_id": "c",
            "principal": "User:alice",
            "listener": "PLAINTEXT",
        }
    )
    assert (rule.api, rule.kind, rule.phase, rule.count) == (
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        FaultKind.DROP,
        FaultPhase.AFTER,
        2,
    )
    assert (rule.topic, rule.partition, rule.group_id) == ("t", 1, "g")
    assert rule.describe() == (
        "ConsumerGroupHeartbeat drop after (version=0, topic=t, partition=1, group_id=g, "
        "client_id=c, principal=User:alice, listener=PLAINTEXT)"
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"error": "NONE"}, "field 'api': required"),
        ({"api": "Prodce", "error": 6}, "field 'api': unknown API 'Prodce'"),
        ({"api": 4, "error": 6}, "field 'api': 4 is not a Kafka API key"),
        ({"api": "Produce", "error": "NOT_A_LEADER"}, "field 'error': unknown error"),
        ({"api": "Produce", "error": 9999}, "field 'error': 9999 is not a Kafka error code"),
        ({"api": "Produce"}, "field 'kind': required unless 'error' is given"),
        ({"api": "Produce", "kind": "explode"}, "field 'kind': 'explode' is not one of"),
        ({"api": "Produce", "kind": "error"}, "field 'error': required for kind 'error'"),
        ({"api": "Produce", "kind": "delay"}, "field 'delay_ms': required for kind 'delay'"),
        (
            {"api": "Produce", "kind": "delay", "delay_ms": -1},
            "field 'delay_ms': must be at least 0",
        ),
        (
            {"api": "Produce", "kind": "delay", "delay_ms": "soon"},
            "field 'delay_ms': expected an integer",
        ),
        ({"api": "Produce", "kind": "close", "delay_ms": 5}, "field 'delay_ms': only for delay"),
        ({"api": "Produce", "kind": "drop", "error": 6}, "field 'error': only for kind 'error'"),
        (
            {"api": "Produce", "error": 6, "phase": "after"},
            "field 'phase': only for close and drop",
        ),
        ({"api": "Produce", "kind": "close", "phase": "during"}, "field 'phase': 'during' is not"),
        ({"api": "Produce", "error": 6, "count": 0}, "field 'count': must be at least 1"),
        ({"api": "Produce", "error": 6, "topic": 7}, "field 'topic': expected a string"),
        ({"api": "Produce", "error": 6, "errors": 7}, "field 'errors': not a fault rule field"),
    ],
)
def test_a_bad_field_is_named(values: dict[str, object], message: str) -> None:
    with pytest.raises(FaultRuleError) as raised:
        parse_rule(values)
    assert message in str(raised.value)


def test_a_plan_is_armed_while_it_holds_a_rule() -> None:
    plan = FaultPlan()
    assert not plan.armed
    first = plan.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER")
    second = plan.add(api="Fetch", kind="delay", delay_ms=10)
    assert plan.armed
    assert plan.handles == [first, second]
    first.remove()
    first.remove()
    assert plan.handles == [second]
    plan.clear()
    assert not plan.armed
    assert plan.handles == []
    with pytest.raises(TypeError, match="not both"):
        plan.add(first.rule, count=1)


def test_the_index_finds_rules_by_topic_and_client_in_the_order_they_were_added() -> None:
    plan = FaultPlan()
    by_client = plan.add(api="Metadata", error="LEADER_NOT_AVAILABLE", client_id="other")
    by_topic = plan.add(api="Metadata", error="UNKNOWN_TOPIC_OR_PARTITION", topic="t")
    anyone = plan.add(api="Metadata", error="NOT_CONTROLLER")
    header = RequestHeader(
        request_api_key=i16(3), request_api_version=i16(12), correlation_id=i32(1), client_id="me"
    )

    def metadata(*names: str | None) -> DecodedRequest:
        topics = tuple(MetadataRequestTopic(topic_id=None, name=name) for name in names)
        body = MetadataRequest(
            topics=None if names == (None,) else topics,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return DecodedRequest(header=header, body=body)

    hit = plan.match(metadata("t"))
    assert hit is not None
    assert hit.handle is by_topic
    by_topic.remove()
    hit = plan.match(metadata("t"))
    assert hit is not None
    assert hit.handle is anyone
    anyone.remove()
    assert plan.match(metadata("t")) is None
    assert plan.match(metadata(None)) is None
    assert by_client.hits == 0
