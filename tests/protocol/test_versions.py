"""``convert``: an entity carried to another version of its API and back."""

import dataclasses
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v13.request import FetchTopic
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsRequestV1
from kio.schema.list_offsets.v7.request import ListOffsetsRequest
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseTopic
from kio.static.protocol import Entity

from tickwheel.protocol import ApiKey, convert, default_entity, request_schema, response_schema

# Pairs (an old version, a newer one) of requests and responses: the newer has every field
# of the older and more.
_PAIRS = [
    (request_schema(ApiKey.LIST_OFFSETS, 1), request_schema(ApiKey.LIST_OFFSETS, 7)),
    (response_schema(ApiKey.LIST_OFFSETS, 1), response_schema(ApiKey.LIST_OFFSETS, 7)),
    (request_schema(ApiKey.JOIN_GROUP, 0), request_schema(ApiKey.JOIN_GROUP, 7)),
    (response_schema(ApiKey.METADATA, 1), response_schema(ApiKey.METADATA, 12)),
    (request_schema(ApiKey.OFFSET_COMMIT, 5), request_schema(ApiKey.OFFSET_COMMIT, 9)),
    (response_schema(ApiKey.DESCRIBE_GROUPS, 0), response_schema(ApiKey.DESCRIBE_GROUPS, 5)),
]


@pytest.mark.parametrize(("old", "new"), _PAIRS, ids=lambda cls: cls.__module__)
@given(data=st.data())
def test_a_round_trip_through_a_newer_version_keeps_every_field(
    old: type[Entity], new: type[Entity], data: st.DataObject
) -> None:
    entity = data.draw(st.from_type(old))
    newer = convert(new, entity)
    assert type(newer) is new
    assert convert(old, newer) == entity


def test_fields_the_old_version_lacks_take_kafkas_defaults() -> None:
    old = ListOffsetsRequestV1(replica_id=-1, topics=())  # type: ignore[arg-type]
    new = convert(ListOffsetsRequest, old)
    assert new.isolation_level == 0  # no default in the schema: the type's zero
    assert new.replica_id == -1


def test_an_entity_of_the_target_class_is_returned_as_it_is() -> None:
    entity = default_entity(ListOffsetsRequest)
    assert convert(ListOffsetsRequest, entity) is entity


def test_a_default_entity_holds_each_types_zero_or_the_schemas_default() -> None:
    metadata = default_entity(MetadataResponse)
    assert metadata.cluster_id is None  # nullable
    assert metadata.brokers == ()
    assert metadata.controller_id == -1  # the schema's default
    response = default_entity(ListOffsetsResponse)
    assert response.throttle_time == datetime.timedelta(0)
    for field in dataclasses.fields(response):
        assert hasattr(response, field.name)


def test_an_error_code_defaults_to_none_and_a_uuid_to_null() -> None:
    assert default_entity(FetchTopic).topic_id is None
    assert default_entity(MetadataResponseTopic).error_code is ErrorCode.none
