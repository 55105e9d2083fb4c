"""Responses assembled from encoded array items are byte for byte kio's encoding."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.protocol import (
    array_item_class,
    build_entity,
    encode_entity,
    encode_response,
    encode_response_with_array,
    response_schema,
)

METADATA = 3


def _topic(name: str, partitions: int) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": uuid.uuid5(uuid.NAMESPACE_DNS, name),
        "is_internal": False,
        "partitions": [
            {
                "error_code": ErrorCode.none,
                "partition_index": index,
                "leader_id": 1,
                "leader_epoch": 3,
                "replica_nodes": [1, 2],
                "isr_nodes": [1],
                "offline_replicas": [2],
            }
            for index in range(partitions)
        ],
    }


@pytest.mark.parametrize("version", range(1, 13))
@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_metadata_response_from_encoded_topics_is_kios_encoding(version: int, count: int) -> None:
    cls = response_schema(METADATA, version)
    rest = {
        "throttle_time": 0,
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
        "cluster_id": "abc",
        "controller_id": 1,
    }
    topics = [_topic(f"t{index}", index + 1) for index in range(count)]
    item_class = array_item_class(cls, "topics")
    spliced = encode_response_with_array(
        7, cls, rest, "topics", [encode_entity(item_class, topic) for topic in topics]
    )
    assert spliced == encode_response(7, build_entity(cls, {**rest, "topics": topics}))
