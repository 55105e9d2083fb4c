"""``GroupApis`` at every advertised version: a request sent at that version, read as the
newest version the coordinator knows, and its answer converted back and encoded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v7.request import JoinGroupRequest
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest
from kio.static.primitive import i8

from tickwheel.coordinator import CoordinatorNode
from tickwheel.coordinator.group import (
    GROUP_API_VERSIONS,
    LEAVE_GROUP_BATCHED,
    OFFSETS_TOPIC,
    GroupApis,
    OffsetValue,
    one_member_leaving,
)
from tickwheel.replica import TopicPartition

from .harness import Harness, answered, make_config, sent

NODE = CoordinatorNode(7, "127.0.0.1", 9092)
CLIENT = "test-client"


@pytest.fixture
def harness() -> Iterator[Harness]:
    # No initial delay: a lone member's join completes at once.
    h = Harness(make_config(group_initial_rebalance_delay_ms=0))
    yield h
    h.close()


@pytest.fixture
def apis(harness: Harness) -> GroupApis:
    return GroupApis(harness.coordinator, lambda _partition: NODE)


def versions(api_key: int) -> list[int]:
    supported = GROUP_API_VERSIONS[api_key]
    return list(range(supported.min_version, supported.max_version + 1))


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator(apis: GroupApis, version: int) -> None:
    body = sent(FindCoordinatorRequest, version, {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
    response = answered(apis.find_coordinator(body), version)
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators] == [
        ("g1", 7, "127.0.0.1", 9092, ErrorCode.none),
        ("g2", 7, "127.0.0.1", 9092, ErrorCode.none),
    ]


@pytest.mark.parametrize(
    ("key_type", "key", "error"),
    # Transactional ids (1) reach tickwheel.coordinator.transaction, never GroupApis.
    [
        (1, "tx", ErrorCode.invalid_request),
        (9, "tx", ErrorCode.invalid_request),
        (0, "", ErrorCode.invalid_request),
    ],
)
def test_find_coordinator_refusals(
    apis: GroupApis, key_type: int, key: str, error: ErrorCode
) -> None:
    body = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))
    (coordinator,) = apis.find_coordinator(body).coordinators
    assert (coordinator.error_code, coordinator.node_id, coordinator.port) == (error, -1, -1)


def test_find_coordinator_without_a_leader(harness: Harness) -> None:
    apis = GroupApis(harness.coordinator, lambda _partition: None)
    (coordinator,) = apis.find_coordinator(
        FindCoordinatorRequest(coordinator_keys=("g",))
    ).coordinators
    assert coordinator.error_code is ErrorCode.coordinator_not_available


async def join(apis: GroupApis, version: int, group_id: str, member_id: str = "") -> Any:
    body = {
        "group_id": group_id,
        "session_timeout": 10_000,
        "rebalance_timeout": 20_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"subscription"}],
    }
    response = await apis.join_group(
        sent(JoinGroupRequest, version, body), api_version=version, client_id=CLIENT
    )
    return answered(response, version)


@pytest.mark.asyncio
@pytest.mark.parametrize("version", versions(11))
async def test_a_member_lives_through_every_group_api(apis: GroupApis, version: int) -> None:
    group_id = f"group-v{version}"
    joined = await join(apis, version, group_id)
    if version >= 4:
        assert joined.error_code is ErrorCode.member_id_required
        joined = await join(apis, version, group_id, joined.member_id)
    assert joined.error_code is ErrorCode.none
    assert joined.leader == joined.member_id
    assert [m.metadata for m in joined.members] == [b"subscription"]
    member_id, generation = joined.member_id, joined.generation_id

    sync_version = min(version, GROUP_API_VERSIONS[14].max_version)
    synced = answered(
        await apis.sync_group(
            sent(
                SyncGroupRequest,
                sync_version,
                {
                    "group_id": group_id,
                    "generation_id": generation,
                    "member_id": member_id,
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                    "assignments": [{"member_id": member_id, "assignment": b"all of it"}],
                },
            )
        ),
        sync_version,
    )
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all of it")

    beat_version = min(version, GROUP_API_VERSIONS[12].max_version)
    beat = answered(
        await apis.heartbeat(
            sent(
                HeartbeatRequest,
                beat_version,
                {"group_id": group_id, "generation_id": generation, "member_id": member_id},
            )
        ),
        beat_version,
    )
    assert beat.error_code is ErrorCode.none

    commit_version = max(2, min(version + 2, GROUP_API_VERSIONS[8].max_version))
    committed = answered(
        await apis.offset_commit(
            sent(
                OffsetCommitRequest,
                commit_version,
                {
                    "group_id": group_id,
                    "generation_id_or_member_epoch": generation,
                    "member_id": member_id,
                    "retention_time": -1,
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 42,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": None,
                                }
                            ],
                        }
                    ],
                },
            )
        ),
        commit_version,
    )
    assert committed.topics[0].partitions[0].error_code is ErrorCode.none

    fetch_version = max(1, min(version, GROUP_API_VERSIONS[9].max_version))
    fetched = answered(
        apis.offset_fetch(
            sent(
                OffsetFetchRequest,
                fetch_version,
                {"group_id": group_id, "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
            ),
            api_version=fetch_version,
        ),
        fetch_version,
    )
    offsets = {p.partition_index: p.committed_offset for p in fetched.topics[0].partitions}
    assert offsets == {0: 42, 1: -1}

    describe_body = {"groups": [group_id], "include_authorized_operations": False}
    describe_version = min(version, 5)
    described = answered(
        apis.describe_groups(sent(DescribeGroupsRequest, describe_version, describe_body)),
        describe_version,
    )
    (group,) = described.groups
    assert (group.group_state, group.protocol_data) == ("Stable", "range")
    assert [m.member_assignment for m in group.members] == [b"all of it"]

    leave_version = min(version, GROUP_API_VERSIONS[13].max_version)
    leave_body: dict[str, Any] = {"group_id": group_id, "member_id": member_id}
    if leave_version >= 3:
        leave_body["members"] = [{"member_id": member_id, "group_instance_id": None}]
    leaving = (
        sent(LeaveGroupRequest, leave_version, leave_body)
        if leave_version >= LEAVE_GROUP_BATCHED
        else one_member_leaving(sent(LeaveGroupRequestV2, leave_version, leave_body))
    )
    left = answered(await apis.leave_group(leaving, api_version=leave_version), leave_version)
    assert left.error_code is ErrorCode.none

    list_body = {"states_filter": [], "types_filter": []}
    list_version = min(version, 5)
    listed = answered(
        apis.list_groups(sent(ListGroupsRequest, list_version, list_body)), list_version
    )
    assert (group_id, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}

    delete_version = min(version, 2)
    deleted = answered(
        apis.delete_groups(sent(DeleteGroupsRequest, delete_version, {"groups_names": [group_id]})),
        delete_version,
    )
    assert deleted.results[0].error_code is ErrorCode.none


@pytest.mark.parametrize("version", [2, 7])
def test_offset_fetch_of_all_partitions(apis: GroupApis, version: int) -> None:
    body = sent(OffsetFetchRequest, version, {"group_id": "g", "topics": None})
    fetched = answered(apis.offset_fetch(body, api_version=version), version)
    assert (fetched.error_code, fetched.topics) == (ErrorCode.none, ())


def test_offset_fetch_v1_puts_errors_on_partitions(harness: Harness, apis: GroupApis) -> None:
    harness.coordinator.on_resigned(harness.coordinator.partition_for("g"))
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [3]}]}
    fetched = answered(apis.offset_fetch(sent(OffsetFetchRequest, 1, body), api_version=1), 1)
    assert fetched.topics[0].partitions[0].error_code is ErrorCode.not_coordinator


@pytest.mark.asyncio
async def test_list_groups_v0(apis: GroupApis) -> None:
    response = apis.list_groups(sent(ListGroupsRequest, 0, {}))
    assert answered(response, 0).error_code is ErrorCode.none


@pytest.mark.parametrize("version", versions(47))
def test_offset_delete(harness: Harness, version: int) -> None:
    apis = GroupApis(
        harness.coordinator,
        lambda _partition: NODE,
        partition_exists=lambda topic, partition: topic == "t" and partition < 2,
    )
    harness.coordinator.handle_commit_offsets(
        "g", "", None, -1, {("t", 0): OffsetValue(5, -1, "", 0)}, lambda _errors: None
    )
    body = {
        "group_id": "g",
        "topics": [
            {"name": "t", "partitions": [{"partition_index": 0}, {"partition_index": 5}]},
            {"name": "missing", "partitions": [{"partition_index": 0}]},
        ],
    }
    deleted = answered(apis.offset_delete(sent(OffsetDeleteRequest, version, body)), version)
    assert deleted.error_code is ErrorCode.none
    assert {
        (t.name, p.partition_index): p.error_code for t in deleted.topics for p in t.partitions
    } == {
        ("t", 0): ErrorCode.none,
        ("t", 5): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert harness.coordinator.handle_fetch_offsets("g", None)[1] == {}
    # The group went with its last offset.
    again = answered(apis.offset_delete(sent(OffsetDeleteRequest, version, body)), version)
    assert again.error_code is ErrorCode.group_id_not_found
    assert {(t.name, p.partition_index) for t in again.topics for p in t.partitions} == {
        ("t", 5),
        ("missing", 0),
    }


def txn_offset_commit_body(group_id: str, partitions: list[int]) -> dict[str, Any]:
    return {
        "transactional_id": "app",
        "group_id": group_id,
        "producer_id": 77,
        "producer_epoch": 0,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    }
                    for p in partitions
                ],
            }
        ],
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("version", versions(28))
async def test_txn_offset_commit(harness: Harness, version: int) -> None:
    apis = GroupApis(
        harness.coordinator,
        lambda _partition: NODE,
        partition_exists=lambda topic, partition: topic == "t" and partition < 2,
    )
    group_id = f"txn-v{version}"
    body = sent(TxnOffsetCommitRequest, version, txn_offset_commit_body(group_id, [0, 5]))
    committed = answered(await apis.txn_offset_commit(body, api_version=version), version)
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
        (0, ErrorCode.none),
        (5, ErrorCode.unknown_topic_or_partition),
    ]
    fetch = {"group_id": group_id, "topics": [{"name": "t", "partition_indexes": [0]}]}

    def fetched(require_stable: bool) -> tuple[int, ErrorCode]:
        asked = sent(OffsetFetchRequest, 7, {**fetch, "require_stable": require_stable})
        (partition,) = apis.offset_fetch(asked, api_version=7).topics[0].partitions
        return partition.committed_offset, partition.error_code

    assert fetched(True) == (-1, ErrorCode.unstable_offset_commit)
    assert fetched(False) == (-1, ErrorCode.none)
    partition = TopicPartition(OFFSETS_TOPIC, harness.coordinator.partition_for(group_id))
    harness.coordinator.on_transaction_completed(77, [partition], True)
    assert fetched(True) == (42, ErrorCode.none)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("version", "error"),
    [(0, ErrorCode.coordinator_not_available), (2, ErrorCode.coordinator_load_in_progress)],
)
async def test_txn_offset_commit_while_loading(
    harness: Harness, apis: GroupApis, version: int, error: ErrorCode
) -> None:
    # Kafka maps LOAD_IN_PROGRESS to COORDINATOR_NOT_AVAILABLE before v2 (KAFKA-7296).
    harness.manager._loading_partitions.add(harness.coordinator.partition_for("loading"))
    body = sent(TxnOffsetCommitRequest, version, txn_offset_commit_body("loading", [0]))
    response = answered(await apis.txn_offset_commit(body, api_version=version), version)
    assert response.topics[0].partitions[0].error_code is error
