"""The cluster id: made once, kept in every log directory's meta.properties, answered
by Metadata and DescribeCluster, and checked at every start as Kafka checks it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError
from tickwheel.server._meta_properties import (
    META_PROPERTIES,
    MetaPropertiesError,
    cluster_id_error,
    new_cluster_id,
)

from .wire import WireClient

TIMEOUT_S = 10.0
KAFKA_CLUSTER_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}")
DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
CONTROLLERS_ENDPOINT = 2


def config(*log_dirs: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": ",".join(map(str, log_dirs)),
            **extra,
        }
    )


def meta(log_dir: Path) -> dict[str, str]:
    lines = (log_dir / META_PROPERTIES).read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_new_ids_have_kafkas_shape() -> None:
    ids = {new_cluster_id() for _ in range(500)}
    assert len(ids) == 500
    for cluster_id in ids:
        assert KAFKA_CLUSTER_ID.fullmatch(cluster_id), cluster_id
        assert cluster_id_error(cluster_id) is None


@pytest.mark.parametrize(
    "bad", ["tickwheel", "", "MkU3OEVBNTcwNTJENDM2Q!", "MkU3OEVBNTcwNTJENDM2Q+", "a" * 23]
)
def test_a_configured_id_must_have_kafkas_shape(tmp_path: Path, bad: str) -> None:
    if bad:
        with pytest.raises(ConfigError, match=r"cluster\.id"):
            config(tmp_path, **{"cluster.id": bad})
    else:
        assert config(tmp_path, **{"cluster.id": bad}).cluster_id == ""


@pytest.mark.integration
def test_the_id_is_made_once_kept_and_answered(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    with BackgroundBroker(config(first, second)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        metadata = admin.list_topics(timeout=TIMEOUT_S)
    cluster_id = described.cluster_id
    assert KAFKA_CLUSTER_ID.fullmatch(cluster_id)
    assert metadata.cluster_id == cluster_id
    assert described.controller.id == 0
    assert [node.id for node in described.nodes] == [0]
    for log_dir in (first, second):
        assert meta(log_dir) == {"version": "0", "broker.id": "0", "cluster.id": cluster_id}
    with BackgroundBroker(config(first, second)) as restarted:
        admin = AdminClient({"bootstrap.servers": restarted.bootstrap_servers})
        again = admin.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert again.cluster_id == cluster_id


@pytest.mark.integration
def test_kafka_python_sees_the_same_id(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient  # noqa: PLC0415 - one client per test

    cluster_id = new_cluster_id()
    with BackgroundBroker(config(tmp_path, **{"cluster.id": cluster_id})) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert admin.describe_cluster()["cluster_id"] == cluster_id
        finally:
            admin.close()
    assert meta(tmp_path)["cluster.id"] == cluster_id


@pytest.mark.integration
def test_describe_cluster_refuses_the_controller_endpoint(tmp_path: Path) -> None:
    with BackgroundBroker(config(tmp_path)) as broker:
        client = WireClient(broker.bootstrap_servers)
        try:
            brokers = client.call(
                DESCRIBE_CLUSTER,
                1,
                {"include_cluster_authorized_operations": True, "endpoint_type": 1},
            )
            controllers = client.call(
                DESCRIBE_CLUSTER,
                1,
                {
                    "include_cluster_authorized_operations": False,
                    "endpoint_type": CONTROLLERS_ENDPOINT,
                },
            )
        finally:
            client.close()
    assert brokers.error_code == ErrorCode.none
    assert brokers.cluster_authorized_operations > 0
    assert controllers.error_code == ErrorCode.unsupported_endpoint_type
    assert controllers.brokers == ()


@pytest.mark.integration
def test_a_directory_of_another_broker_is_refused(tmp_path: Path) -> None:
    with BackgroundBroker(config(tmp_path)):
        pass
    with (
        pytest.raises(MetaPropertiesError, match=r"broker.id 0 stored in .*meta.properties"),
        BackgroundBroker(config(tmp_path, **{"broker.id": "7"})),
    ):
        pass


@pytest.mark.integration
def test_directories_of_two_clusters_are_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for log_dir in (first, second):
        with BackgroundBroker(config(log_dir)):
            pass
    with (
        pytest.raises(MetaPropertiesError, match="different clusters"),
        BackgroundBroker(config(first, second)),
    ):
        pass
    with (
        pytest.raises(MetaPropertiesError, match="another cluster"),
        BackgroundBroker(config(first, **{"cluster.id": new_cluster_id()})),
    ):
        pass
