"""The consumer-protocol APIs as kio entities: ConsumerGroupHeartbeat and
ConsumerGroupDescribe at every version, and the member-epoch checks of OffsetCommit v9
and OffsetFetch v9; every response is encoded and decoded again by kio."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest
from kio.static.protocol import ResponsePayload

from coordinator.group.harness import answered, sent
from tickwheel.coordinator.group import GroupApis, GroupCoordinator
from tickwheel.coordinator.group.consumer import ConsumerGroupApis
from tickwheel.timer import InlineExecutor, SystemTimer

from .harness import REBALANCE_MS, TOPIC, TOPIC_ID, ConsumerHarness

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, OFFSET_DELETE = 68, 69, 8, 9, 16, 47


def _apis(h: ConsumerHarness) -> ConsumerGroupApis:
    def timer_for(name: str) -> SystemTimer:
        return SystemTimer(name, clock=h.clock, executor=InlineExecutor())

    classic = GroupCoordinator(h.config, h.manager, timer_for=timer_for, reaper_enabled=False)
    classic.startup()
    return ConsumerGroupApis(GroupApis(classic, lambda _p: None), h.coordinator, h.topics)


async def call(apis: ConsumerGroupApis, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """API ``api_key`` sent at ``version``, answered by ``apis`` as the broker calls it."""
    response: ResponsePayload
    if api_key == HEARTBEAT:
        body = sent(ConsumerGroupHeartbeatRequest, version, values)
        response = await apis.heartbeat(body, api_version=version, client_id="test")
    elif api_key == DESCRIBE:
        response = apis.describe(sent(ConsumerGroupDescribeRequest, version, values))
    elif api_key == OFFSET_COMMIT:
        body = sent(OffsetCommitRequest, version, values)
        response = await apis.offset_commit(body, api_version=version)
    elif api_key == OFFSET_FETCH:
        response = apis.offset_fetch(sent(OffsetFetchRequest, version, values))
    elif api_key == LIST_GROUPS:
        response = apis.list_groups(sent(ListGroupsRequest, version, values))
    else:
        response = apis.offset_delete(sent(OffsetDeleteRequest, version, values))
    return answered(response, version)


def join_body(member_id: str) -> dict[str, Any]:
    return {
        "group_id": "g",
        "member_id": member_id,
        "member_epoch": 0,
        "rebalance_timeout": REBALANCE_MS,
        "subscribed_topic_names": [TOPIC],
        "topic_partitions": [],
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1])
async def test_heartbeat_and_describe(version: int) -> None:
    h = ConsumerHarness()
    apis = _apis(h)
    # v0: the coordinator names the member; v1: the client does (KIP-1082).
    joined = await call(apis, HEARTBEAT, version, join_body("" if version == 0 else "m-1"))
    assert joined.error_code is ErrorCode.none
    member_id = joined.member_id
    assert member_id
    assert joined.member_epoch == 1
    assert (
        joined.heartbeat_interval.total_seconds() * 1000
        == h.config.group_consumer_heartbeat_interval_ms
    )
    (assigned,) = joined.assignment.topic_partitions
    assert (assigned.topic_id, sorted(assigned.partitions)) == (TOPIC_ID, [0, 1, 2, 3])

    described = await call(
        apis,
        DESCRIBE,
        version,
        {"group_ids": ["g", "nope"], "include_authorized_operations": False},
    )
    group, missing = described.groups
    assert (group.group_state, group.group_epoch, group.assignment_epoch) == ("Stable", 1, 1)
    assert group.assignor_name == "uniform"
    (member,) = group.members
    assert member.member_id == member_id
    assert member.assignment.topic_partitions[0].topic_name == TOPIC
    assert member.target_assignment == member.assignment
    if version >= 1:
        assert member.member_type == 1  # a consumer-protocol member (KIP-1099)
    assert missing.error_code is ErrorCode.group_id_not_found

    bad = await call(apis, HEARTBEAT, version, {**join_body("m-2"), "rebalance_timeout": -1})
    assert bad.error_code is ErrorCode.invalid_request
    assert bad.error_message
    if version >= 1:  # KIP-1082: a v1 client names its member itself
        nameless = await call(apis, HEARTBEAT, version, join_body(""))
        assert nameless.error_code is ErrorCode.invalid_request


@pytest.mark.asyncio
async def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    h = ConsumerHarness()
    apis = _apis(h)
    joined = await call(apis, HEARTBEAT, 1, join_body("m"))
    topics = [
        {
            "name": TOPIC,
            "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}],
        }
    ]

    async def commit(version: int, epoch: int, member_id: str = "m") -> ErrorCode:
        body = {
            "group_id": "g",
            "member_id": member_id,
            "generation_id_or_member_epoch": epoch,
            "topics": topics,
        }
        response = await call(apis, OFFSET_COMMIT, version, body)
        error: ErrorCode = response.topics[0].partitions[0].error_code
        return error

    assert await commit(9, joined.member_epoch) is ErrorCode.none
    assert await commit(9, joined.member_epoch + 1) is ErrorCode.stale_member_epoch
    assert await commit(9, joined.member_epoch, "other") is ErrorCode.unknown_member_id
    assert await commit(8, joined.member_epoch) is ErrorCode.unsupported_version

    async def fetch(member_id: str | None, epoch: int) -> Any:
        body = {
            "groups": [
                {
                    "group_id": "g",
                    "member_id": member_id,
                    "member_epoch": epoch,
                    "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}],
                }
            ],
            "require_stable": True,
        }
        response = await call(apis, OFFSET_FETCH, 9, body)
        return response.groups[0]

    fetched = await fetch("m", joined.member_epoch)
    assert fetched.error_code is ErrorCode.none
    offsets = {p.partition_index: p.committed_offset for p in fetched.topics[0].partitions}
    assert offsets == {0: 5, 1: -1}
    assert (await fetch("m", 7)).error_code is ErrorCode.stale_member_epoch
    assert (await fetch(None, -1)).error_code is ErrorCode.none  # an admin's fetch


@pytest.mark.asyncio
async def test_list_groups_by_type_and_state() -> None:
    h = ConsumerHarness()
    apis = _apis(h)
    await call(apis, HEARTBEAT, 1, join_body("m"))
    h.manager.get_or_add_group("classic-empty")
    listed = await call(apis, LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert {(g.group_id, g.group_type, g.group_state) for g in listed.groups} == {
        ("g", "consumer", "Stable"),
        ("classic-empty", "classic", "Empty"),
    }
    consumer = await call(apis, LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [g.group_id for g in consumer.groups] == ["g"]
    empty = await call(apis, LIST_GROUPS, 5, {"states_filter": ["Empty"], "types_filter": []})
    assert [g.group_id for g in empty.groups] == ["classic-empty"]


@pytest.mark.asyncio
async def test_offset_delete_keeps_the_subscribed_topics_offsets() -> None:
    h = ConsumerHarness()
    h.topics.add("other", 1)
    apis = _apis(h)
    joined = await call(apis, HEARTBEAT, 1, join_body("m"))
    for topic in (TOPIC, "other"):
        body = {
            "group_id": "g",
            "member_id": "m",
            "generation_id_or_member_epoch": joined.member_epoch,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}
                    ],
                }
            ],
        }
        await call(apis, OFFSET_COMMIT, 9, body)
    topics = [{"name": t, "partitions": [{"partition_index": 0}]} for t in (TOPIC, "other")]
    deleted = await call(apis, OFFSET_DELETE, 0, {"group_id": "g", "topics": topics})
    assert deleted.error_code is ErrorCode.none
    errors = {t.name: t.partitions[0].error_code for t in deleted.topics}
    assert errors == {TOPIC: ErrorCode.group_subscribed_to_topic, "other": ErrorCode.none}
