"""Responses assembled from encoded array items are byte for byte kio's encoding."""

from __future__ import annotations

import dataclasses
import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from tickwheel.protocol import (
    ApiKey,
    array_item_class,
    convert,
    encode_entity,
    encode_response,
    encode_response_with_array,
    response_schema,
)

METADATA = ApiKey.METADATA


def _topic(name: str, partitions: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=TopicName(name),
        topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        is_internal=False,
        partitions=tuple(
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=i32(index),
                leader_id=BrokerId(1),
                leader_epoch=i32(3),
                replica_nodes=(BrokerId(1), BrokerId(2)),
                isr_nodes=(BrokerId(1),),
                offline_replicas=(BrokerId(2),),
            )
            for index in range(partitions)
        ),
    )


@pytest.mark.parametrize("version", range(1, 13))
@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_metadata_response_from_encoded_topics_is_kios_encoding(version: int, count: int) -> None:
    cls = response_schema(METADATA, version)
    rest = MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(MetadataResponseBroker(node_id=BrokerId(1), host="localhost", port=i32(9092)),),
        cluster_id="abc",
        controller_id=BrokerId(1),
        topics=(),
    )
    topics = tuple(_topic(f"t{index}", index + 1) for index in range(count))
    item_class = array_item_class(cls, "topics")
    spliced = encode_response_with_array(
        7, cls, rest, "topics", [encode_entity(item_class, topic) for topic in topics]
    )
    whole = dataclasses.replace(rest, topics=topics)
    assert spliced == encode_response(7, convert(cls, whole))


def test_the_array_given_with_the_response_must_be_empty() -> None:
    cls = response_schema(METADATA, 12)
    response = MetadataResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        brokers=(),
        topics=(_topic("t", 1),),
    )
    with pytest.raises(ValueError, match="topics must be empty"):
        encode_response_with_array(7, cls, response, "topics", [])
