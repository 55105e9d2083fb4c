"""``build_entity``: plain values to the kio class of any version."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from kio.schema.produce.v3.response import ProduceResponse as ProduceV3
from kio.schema.produce.v9.response import ProduceResponse as ProduceV9

from tickwheel.protocol import build_entity

VALUES = {
    "throttle_time": 5,
    "responses": [
        {
            "name": "t",
            "partition_responses": [
                {
                    "index": 1,
                    "error_code": 0,
                    "base_offset": 42,
                    "log_append_time": 1_700_000_000_000,
                    "log_start_offset": 7,
                    "record_errors": [],
                    "error_message": None,
                }
            ],
        }
    ],
}


def test_nested_values_become_the_versions_classes_with_coerced_types() -> None:
    response = build_entity(ProduceV9, VALUES)
    partition = response.responses[0].partition_responses[0]
    assert response.throttle_time == datetime.timedelta(milliseconds=5)
    assert partition.error_code is ErrorCode.none
    assert partition.base_offset == 42
    assert partition.log_append_time == datetime.datetime(
        2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC
    )
    assert partition.log_start_offset == 7


def test_keys_an_older_version_lacks_are_dropped() -> None:
    response = build_entity(ProduceV3, VALUES)
    partition = response.responses[0].partition_responses[0]
    assert not hasattr(partition, "log_start_offset")
    assert partition.base_offset == 42
