"""Partition reassignment in a three-broker cluster, through kafka-python's admin client:
a replica moves to another broker under acks=all load and nothing acknowledged is lost;
a move cancelled goes back to the original replicas and the new one is deleted; a move
whose controller dies is completed by the next one; a move throttled as
kafka-reassign-partitions throttles it copies no faster than the configured rate, and is
listed with its full replica set meanwhile (by kafka-python, Metadata and ``tickwheel
reassign list``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.cli import main
from tickwheel.cluster import LocalCluster, TopicAssignment, decode_topic, topic_path
from tickwheel.protocol import ApiKey
from tickwheel.replica import UNBOUNDED_RATE

from .helpers import (
    SESSION_TIMEOUT_MS,
    WAIT_S,
    create_topic,
    isr,
    local_cluster,
    log_bytes,
    print_broker_logs,
    read_all,
    wait_for,
    writing,
)

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

TOPIC = "moving"
MOVED = KafkaTopicPartition(TOPIC, 0)
STUCK_RECORDS = 2200
"""Records of ``RECORD_BYTES``: more than a follower's first fetch (1 MB) takes."""
THROTTLED = "throttled"
RATE_BYTES_PER_S = 100_000
RECORDS, RECORD_BYTES = 600, 1000
THROTTLE_PROPERTIES = {
    # The rate over two windows of a second, and follower fetches of at most 16 KB, so
    # that the copy is paced by the rate rather than let through in one fetch.
    "replication.quota.window.num": "2",
    "replication.quota.window.size.seconds": "1",
    "replica.fetch.max.bytes": "16384",
}


@pytest.fixture
def admin(cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def _assigned(cluster: LocalCluster) -> TopicAssignment:
    """The topic's assignment as ZooKeeper holds it."""
    data = cluster.read_znode(topic_path(TOPIC))
    assert data is not None
    return decode_topic(TOPIC, data)


def test_a_replica_moves_under_acks_all_load_and_no_acknowledged_record_is_lost(
    cluster: LocalCluster, admin: KafkaAdminClient
) -> None:
    create_topic(cluster, TOPIC, [[0, 1]], {"min.insync.replicas": "2"})
    with writing(cluster, TOPIC, 1) as writer:
        wait_for(lambda: writer.acked_since(0, 200), "records acknowledged before the move")
        assert admin.alter_partition_reassignments({MOVED: [2, 1]}) == {MOVED: None}
        wait_for(lambda: admin.list_partition_reassignments() == {}, "the move to complete")
        assert _assigned(cluster) == TopicAssignment({0: (2, 1)}, _assigned(cluster).topic_id)
        assert sorted(isr(cluster, TOPIC)) == [1, 2]
        moved_at = len(writer.acked[0])
        wait_for(lambda: writer.acked_since(0, moved_at + 200), "records acknowledged after it")
    assert not writer.failed
    values = read_all(cluster, TOPIC, 0)
    assert values == sorted(set(values)), "duplicated or reordered"
    assert set(writer.acked[0]) <= set(values), "acknowledged records lost"
    wait_for(
        lambda: (
            log_bytes(cluster.brokers[2].log_dir, TOPIC)
            == log_bytes(cluster.brokers[1].log_dir, TOPIC)
        ),
        "identical replicas on brokers 1 and 2",
    )
    wait_for(
        lambda: not (cluster.brokers[0].log_dir / f"{TOPIC}-0").exists(),
        "broker 0 to delete its replica",
        timeout_s=WAIT_S,
    )


def test_a_cancelled_move_goes_back_and_its_new_replica_is_deleted(
    cluster: LocalCluster, admin: KafkaAdminClient
) -> None:
    """Throttled to a byte a second, the new replica never catches up: the move is in
    progress until cancelled. Brokers other than the controller answer NOT_CONTROLLER."""
    create_topic(cluster, TOPIC, [[0, 1]])
    _fill(cluster, TOPIC, STUCK_RECORDS)
    _throttle(AdminClient({"bootstrap.servers": cluster.bootstrap_servers}), TOPIC, 1)
    assert admin.alter_partition_reassignments({MOVED: [0, 2]}) == {MOVED: None}
    new_replica = cluster.brokers[2].log_dir / f"{TOPIC}-0"
    wait_for(new_replica.exists, "broker 2 to start its replica")
    assert admin.list_partition_reassignments() == {
        MOVED: {"replicas": [0, 2, 1], "adding_replicas": [2], "removing_replicas": [1]}
    }
    controller = cluster.controller_id()
    other = next(b for b in cluster.brokers if b.broker_id != controller)
    wire = WireClient(other.bootstrap_servers)
    try:
        moved = wire.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            1,
            {"topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}]},
        )
        listed = wire.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"topics": None})
    finally:
        wire.close()
    assert (moved.error_code, moved.responses) == (ErrorCode.not_controller, ())
    assert (listed.error_code, listed.topics) == (ErrorCode.not_controller, ())

    assert admin.alter_partition_reassignments({MOVED: None}) == {MOVED: None}
    assert admin.list_partition_reassignments() == {}
    assert _assigned(cluster).partitions == {0: (0, 1)}
    assert sorted(isr(cluster, TOPIC)) == [0, 1]
    wait_for(lambda: not new_replica.exists(), "broker 2 to delete its replica")


def test_a_new_controller_completes_the_move_the_old_one_started(
    cluster: LocalCluster, admin: KafkaAdminClient
) -> None:
    """The move (from a broker that is not the controller to it and another one) is held
    back by the throttle while its controller dies; once the throttle is lifted the
    target catches up, and the new controller, which found the move in ZooKeeper,
    completes it."""
    old_controller = cluster.controller_id()
    assert old_controller is not None
    source, target = (b.broker_id for b in cluster.brokers if b.broker_id != old_controller)
    create_topic(cluster, TOPIC, [[source]])
    _fill(cluster, TOPIC, STUCK_RECORDS)
    _throttle(
        AdminClient({"bootstrap.servers": cluster.bootstrap_servers}),
        TOPIC,
        1,
        leaders=(source,),
        followers=(target,),
    )
    assert admin.alter_partition_reassignments({MOVED: [source, target]}) == {MOVED: None}
    wait_for((cluster.brokers[target].log_dir / f"{TOPIC}-0").exists, f"broker {target}'s replica")
    cluster.brokers[old_controller].kill()
    wait_for(
        lambda: cluster.controller_id() in (source, target),
        "a new controller",
        timeout_s=SESSION_TIMEOUT_MS / 1000 + WAIT_S,
    )
    assert _assigned(cluster).adding == {0: (target,)}
    # A client that never knew the dead broker (it could send it the configs).
    survivors = AdminClient({"bootstrap.servers": cluster.brokers[source].bootstrap_servers})
    _throttle(survivors, TOPIC, UNBOUNDED_RATE, brokers=(source, target), leaders=(), followers=())
    wait_for(
        lambda: (
            _assigned(cluster)
            == TopicAssignment({0: (source, target)}, _assigned(cluster).topic_id)
        ),
        "the new controller to complete the move",
    )
    assert sorted(isr(cluster, TOPIC)) == sorted([source, target])


def _set(admin: AdminClient, resource: ConfigResource) -> None:
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)


def _entries(**configs: str) -> list[ConfigEntry]:
    return [
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]


def _throttle(
    admin: AdminClient,
    topic: str,
    rate_bytes_per_s: int,
    *,
    brokers: Sequence[int] = (0, 1, 2),
    leaders: Sequence[int] = (0, 1),
    followers: Sequence[int] = (2,),
) -> None:
    """kafka-reassign-partitions' throttle of a move of partition 0 from ``leaders`` to
    ``followers``: the rates on ``brokers``, and the replicas on each side of the move
    listed on the topic."""
    rate = str(rate_bytes_per_s)
    for broker_id in brokers:
        _set(
            admin,
            ConfigResource(
                ConfigResource.Type.BROKER,
                str(broker_id),
                incremental_configs=_entries(
                    leader_replication_throttled_rate=rate,
                    follower_replication_throttled_rate=rate,
                ),
            ),
        )
    _set(
        admin,
        ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=_entries(
                leader_replication_throttled_replicas=",".join(f"0:{b}" for b in leaders),
                follower_replication_throttled_replicas=",".join(f"0:{b}" for b in followers),
            ),
        ),
    )

    def applied(broker_id: int) -> bool:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
        described = admin.describe_configs([resource])[resource].result(WAIT_S)
        return described["follower.replication.throttled.rate"].value == rate

    for broker_id in brokers:
        wait_for(lambda b=broker_id: applied(b), f"broker {broker_id}'s rates")


def _fill(cluster: LocalCluster, topic: str, records: int) -> None:
    """``records`` of ``RECORD_BYTES`` in partition 0, in batches of about 10 KB (a
    fetch returns at least one whole batch)."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "batch.size": 10_000}
    )
    for i in range(records):
        producer.produce(topic, f"{i:0{RECORD_BYTES}d}".encode(), partition=0)
    assert producer.flush(WAIT_S) == 0


@pytest.fixture
def throttling_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, properties=THROTTLE_PROPERTIES) as running:
        yield running
    print_broker_logs(running)


def test_a_throttled_move_copies_no_faster_than_the_rate(
    throttling_cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = throttling_cluster
    create_topic(cluster, THROTTLED, [[0, 1]])
    _fill(cluster, THROTTLED, RECORDS)
    copied_bytes = len(log_bytes(cluster.brokers[0].log_dir, THROTTLED))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    _throttle(admin, THROTTLED, RATE_BYTES_PER_S)
    reassigner = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        moved = KafkaTopicPartition(THROTTLED, 0)
        started = time.monotonic()
        assert reassigner.alter_partition_reassignments({moved: [0, 2]}) == {moved: None}
        in_progress = reassigner.list_partition_reassignments()
        listed = main(
            ["reassign", "list", "--format", "json", "-b", cluster.brokers[1].bootstrap_servers]
        )
        cli_listing = json.loads(capsys.readouterr().out)
        described = admin.list_topics(THROTTLED, timeout=WAIT_S).topics[THROTTLED]
        wait_for(
            lambda: reassigner.list_partition_reassignments() == {},
            "the throttled move to complete",
            timeout_s=WAIT_S + copied_bytes / RATE_BYTES_PER_S,
        )
        elapsed_s = time.monotonic() - started
    finally:
        reassigner.close()
    assert in_progress == {
        moved: {"replicas": [0, 2, 1], "adding_replicas": [2], "removing_replicas": [1]}
    }
    assert described.partitions[0].replicas == [0, 2, 1]
    assert (listed, cli_listing) == (
        0,
        [
            {
                "topic": THROTTLED,
                "partition": 0,
                "replicas": [0, 2, 1],
                "adding": [2],
                "removing": [1],
            }
        ],
    )
    # The two windows let up to two seconds' worth through early; the rest is paced.
    paced_s = (copied_bytes - 2 * RATE_BYTES_PER_S) / RATE_BYTES_PER_S
    assert elapsed_s >= paced_s, f"{copied_bytes} bytes copied in {elapsed_s:.1f} s"
    assert log_bytes(cluster.brokers[2].log_dir, THROTTLED) == log_bytes(
        cluster.brokers[0].log_dir, THROTTLED
    )
