"""Every request kind refused as Kafka's KafkaApis refuses it, over the wire.

A broker with Kafka's ACL authorizer where ``User:ANONYMOUS`` (every PLAINTEXT client)
may only READ topic ``orders`` and group ``readers`` (and create topics, to set up):
each request below asks for more and must come back with the authorization error
Kafka answers, in the place Kafka puts it (whole request, per resource, per
partition), and the broker must keep serving.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tickwheel.security import AccessControlEntry, PatternType, ResourcePattern
from tickwheel.security import AclOperation as Op
from tickwheel.security import AclPermissionType as Permission
from tickwheel.security import ResourceType as Resource
from tickwheel.server import BackgroundBroker, Broker, BrokerConfig

from .wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundBroker]:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path_factory.mktemp("acl-refusals")),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "offsets.topic.num.partitions": "1",
            "auto.create.topics.enable": "false",
        }
    )
    with BackgroundBroker(config) as running:
        grants = {
            ResourcePattern(Resource.CLUSTER, "kafka-cluster", PatternType.LITERAL): Op.CREATE,
            ResourcePattern(Resource.TOPIC, "orders", PatternType.LITERAL): Op.READ,
            ResourcePattern(Resource.TOPIC, "secret", PatternType.LITERAL): Op.DESCRIBE,
            ResourcePattern(Resource.GROUP, "readers", PatternType.LITERAL): Op.READ,
        }

        async def grant(started: Broker) -> None:
            store = started.context.acl_store
            assert store is not None
            for pattern, operation in grants.items():
                entry = AccessControlEntry("User:ANONYMOUS", "*", operation, Permission.ALLOW)
                await store.update(pattern, [entry], ())

        running.call(grant)
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        for future in admin.create_topics(
            [NewTopic("orders", 1, 1), NewTopic("secret", 1, 1), NewTopic("hidden", 1, 1)]
        ).values():
            future.result(TIMEOUT_S)
        wait_for_group_coordinator(running.bootstrap_servers, "readers")
        yield running


def wait_for_group_coordinator(bootstrap_servers: str, group_id: str) -> None:
    """Make the broker create ``__consumer_offsets`` and load it (a first FindCoordinator
    does), then wait until the group's offsets are served."""
    client = WireClient(bootstrap_servers)
    fetch = {"groups": [{"group_id": group_id, "topics": None}]}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while True:
            client.call(10, 4, {"key_type": 0, "coordinator_keys": [group_id]})
            if client.call(9, 8, fetch).groups[0].error_code == ErrorCode.none:
                return
            assert time.monotonic() < deadline, "the group coordinator never loaded"
            time.sleep(0.05)
    finally:
        client.close()


@pytest.fixture
def wire(broker: BackgroundBroker) -> Iterator[WireClient]:
    client = WireClient(broker.bootstrap_servers)
    yield client
    client.close()


def partition_errors(topics: Any, partitions_field: str = "partitions") -> dict[str, list[int]]:
    return {
        getattr(t, "name", None) or getattr(t, "topic", ""): [
            int(p.error_code) for p in getattr(t, partitions_field)
        ]
        for t in topics
    }


CASES: list[tuple[str, int, int, dict[str, Any], Callable[[Any], Any], Any]] = [
    (
        "DescribeCluster (served to anyone; no operations without DESCRIBE)",
        60,
        0,
        {"include_cluster_authorized_operations": True},
        lambda r: (r.error_code, r.cluster_authorized_operations, len(r.brokers)),
        (0, 0, 1),
    ),
    (
        "DescribeCluster (operations not asked)",
        60,
        0,
        {"include_cluster_authorized_operations": False},
        lambda r: (r.error_code, r.cluster_authorized_operations),
        (0, -(2**31)),
    ),
    (
        "Metadata v10 (no cluster operations without DESCRIBE on the cluster)",
        3,
        10,
        {
            "topics": [],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False,
        },
        lambda r: (r.cluster_authorized_operations, len(r.brokers)),
        (0, 1),
    ),
    (
        "Metadata v10 (cluster operations not asked)",
        3,
        10,
        {
            "topics": [],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
        lambda r: r.cluster_authorized_operations,
        -(2**31),
    ),
    (
        "ElectLeaders",
        43,
        2,
        {
            "election_type": 0,
            "topic_partitions": [{"topic": "orders", "partitions": [0]}],
            "timeout": 1000,
        },
        lambda r: r.error_code,
        CLUSTER_DENIED,
    ),
    (
        "AlterPartitionReassignments (ALTER on the cluster; every partition refused too)",
        45,
        1,
        {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        lambda r: (r.error_code, [p.error_code for t in r.responses for p in t.partitions]),
        (CLUSTER_DENIED, [CLUSTER_DENIED]),
    ),
    (
        "ListPartitionReassignments (DESCRIBE on the cluster)",
        46,
        0,
        {"topics": None},
        lambda r: (r.error_code, r.topics),
        (CLUSTER_DENIED, ()),
    ),
    (
        "UpdateFeatures (ALTER on the cluster; no per-feature results)",
        57,
        1,
        {
            "feature_updates": [
                {"feature": "group.version", "max_version_level": 0, "upgrade_type": 2}
            ],
            "timeout": 1000,
        },
        lambda r: (r.error_code, r.results),
        (CLUSTER_DENIED, ()),
    ),
    (
        "WriteTxnMarkers",
        27,
        1,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": "orders", "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        lambda r: r.markers[0].topics[0].partitions[0].error_code,
        CLUSTER_DENIED,
    ),
    (
        "DescribeConfigs",
        32,
        4,
        {
            "resources": [
                {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
                {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
                {"resource_type": 16, "resource_name": "metrics", "configuration_keys": None},
                {"resource_type": 99, "resource_name": "what", "configuration_keys": None},
            ]
        },
        lambda r: [x.error_code for x in r.results],
        [TOPIC_DENIED, CLUSTER_DENIED, CLUSTER_DENIED, ErrorCode.invalid_request],
    ),
    (
        "IncrementalAlterConfigs",
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "orders",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
                }
            ],
            "validate_only": False,
        },
        lambda r: [x.error_code for x in r.responses],
        [TOPIC_DENIED],
    ),
    (
        "DeleteTopics",
        20,
        4,
        {"topic_names": ["orders"], "timeout": 1000},
        lambda r: [x.error_code for x in r.responses],
        [TOPIC_DENIED],
    ),
    (
        "CreatePartitions",
        37,
        3,
        {
            "topics": [{"name": "orders", "count": 2, "assignments": None}],
            "timeout": 1000,
            "validate_only": True,
        },
        lambda r: [x.error_code for x in r.results],
        [TOPIC_DENIED],
    ),
    (
        "DeleteRecords",
        21,
        2,
        {
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 1000,
        },
        lambda r: partition_errors(r.topics),
        {"orders": [TOPIC_DENIED]},
    ),
    (
        "ListOffsets",
        2,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                for n in ("orders", "nobody")
            ],
        },
        lambda r: partition_errors(r.topics),
        {"orders": [0], "nobody": [TOPIC_DENIED]},
    ),
    (
        "OffsetForLeaderEpoch",
        23,
        4,
        {
            "replica_id": -1,
            "topics": [{"topic": "nobody", "partitions": [{"partition": 0, "leader_epoch": 0}]}],
        },
        lambda r: partition_errors(r.topics),
        {"nobody": [TOPIC_DENIED]},
    ),
    (
        "DescribeProducers",
        61,
        0,
        {"topics": [{"name": "nobody", "partition_indexes": [0]}]},
        lambda r: partition_errors(r.topics),
        {"nobody": [TOPIC_DENIED]},
    ),
    (
        "OffsetCommit",
        8,
        8,
        {
            "group_id": "readers",
            "member_id": "",
            "generation_id_or_member_epoch": -1,
            "topics": [
                {
                    "name": n,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}
                    ],
                }
                for n in ("orders", "secret")
            ],
        },
        lambda r: partition_errors(r.topics),
        {"orders": [0], "secret": [TOPIC_DENIED]},
    ),
    (
        "OffsetCommit to another group",
        8,
        8,
        {
            "group_id": "others",
            "member_id": "",
            "generation_id_or_member_epoch": -1,
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}
                    ],
                }
            ],
        },
        lambda r: partition_errors(r.topics),
        {"orders": [GROUP_DENIED]},
    ),
    (
        "OffsetFetch",
        9,
        8,
        {
            "groups": [
                {
                    "group_id": g,
                    "topics": [
                        {"name": "orders", "partition_indexes": [0]},
                        {"name": "nobody", "partition_indexes": [0]},
                    ],
                }
                for g in ("readers", "others")
            ]
        },
        lambda r: {g.group_id: (g.error_code, partition_errors(g.topics)) for g in r.groups},
        {"readers": (0, {"orders": [0], "nobody": [TOPIC_DENIED]}), "others": (GROUP_DENIED, {})},
    ),
    (
        "ReadShareGroupState",
        84,
        0,
        {
            "group_id": "g",
            "topics": [
                {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "leader_epoch": 0}]}
            ],
        },
        lambda r: r.results[0].partitions[0].error_code,
        CLUSTER_DENIED,
    ),
    (
        "InitProducerId (idempotent)",
        22,
        4,
        {"transactional_id": None, "transaction_timeout": 1000},
        lambda r: r.error_code,
        CLUSTER_DENIED,
    ),
    (
        "InitProducerId (transactional)",
        22,
        4,
        {"transactional_id": "tx", "transaction_timeout": 1000},
        lambda r: r.error_code,
        TXN_DENIED,
    ),
    (
        "AddPartitionsToTxn",
        24,
        3,
        {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": "orders", "partitions": [0]}],
        },
        lambda r: partition_errors(r.results_by_topic_v3_and_below, "results_by_partition"),
        None,
    ),
    (
        "FindCoordinator (group)",
        10,
        4,
        {"key_type": 0, "coordinator_keys": ["readers", "others"]},
        lambda r: sorted((c.key, c.error_code) for c in r.coordinators),
        [("others", GROUP_DENIED), ("readers", 0)],
    ),
    (
        "FindCoordinator (transaction)",
        10,
        3,
        {"key_type": 1, "key": "tx"},
        lambda r: r.error_code,
        TXN_DENIED,
    ),
    (
        "DescribeLogDirs",
        35,
        4,
        {"topics": None},
        lambda r: (r.error_code, r.results),
        (CLUSTER_DENIED, ()),
    ),
    (
        "AlterReplicaLogDirs",
        34,
        2,
        {"dirs": [{"path": "/elsewhere", "topics": [{"name": "orders", "partitions": [0]}]}]},
        lambda r: [(t.topic_name, [p.error_code for p in t.partitions]) for t in r.results],
        [("orders", [CLUSTER_DENIED])],
    ),
    (
        "DescribeClientQuotas",
        48,
        1,
        {"components": [], "strict": False},
        lambda r: (r.error_code, r.entries),
        (CLUSTER_DENIED, None),
    ),
    (
        "AlterClientQuotas",
        49,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": "mallory"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
        lambda r: [e.error_code for e in r.entries],
        [CLUSTER_DENIED],
    ),
]


@pytest.mark.parametrize(
    ("name", "api_key", "version", "values", "outcome", "expected"),
    CASES,
    ids=[case[0] for case in CASES],
)
def test_refused_as_kafka_refuses(
    wire: WireClient,
    name: str,
    api_key: int,
    version: int,
    values: dict[str, Any],
    outcome: Callable[[Any], Any],
    expected: Any,
) -> None:
    response = wire.call(api_key, version, values)
    if expected is None:  # AddPartitionsToTxn: the partition_error_code field
        (result,) = response.results_by_topic_v3_and_below
        assert [p.partition_error_code for p in result.results_by_partition] == [TXN_DENIED]
        return
    assert outcome(response) == expected


def test_a_refused_delete_reveals_neither_name_nor_id(
    broker: BackgroundBroker, wire: WireClient
) -> None:
    """As Kafka: by name, the zero topic id; by id, no name without DESCRIBE on it."""

    def topic_ids(started: Broker) -> dict[str, uuid.UUID | None]:
        return {name: started.context.topic_id(name) for name in ("secret", "hidden")}

    ids: Any = broker.call(topic_ids)
    zero = uuid.UUID(int=0)
    by_name = wire.call(20, 6, {"topics": [{"name": "hidden", "topic_id": zero}], "timeout": 1000})
    (refused,) = by_name.responses
    # kio reads the zero id as None.
    assert (refused.name, refused.topic_id, refused.error_code) == ("hidden", None, TOPIC_DENIED)
    by_id = wire.call(
        20,
        6,
        {
            "topics": [{"name": None, "topic_id": ids[n]} for n in ("hidden", "secret")],
            "timeout": 1000,
        },
    )
    assert [(r.name, r.topic_id, r.error_code) for r in by_id.responses] == [
        (None, ids["hidden"], TOPIC_DENIED),
        ("secret", ids["secret"], TOPIC_DENIED),
    ]
