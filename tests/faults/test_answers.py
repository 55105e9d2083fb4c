"""Error answers of every API the issue names, at every version served, decoded back.

Each answer is built from the request alone, encoded, and read back with kio's decoder
for the version the client asked for: the error must be where a client reads it (on
each partition of a partitioned API, on each coordinator key, or top-level), the
correlation id echoed, and the partitions' other fields at Kafka's "unknown" values.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tickwheel.faults import error_answer
from tickwheel.faults._answers import merged_answer, without_partitions
from tickwheel.faults._shape import request_partitions, topic_shape
from tickwheel.protocol import (
    SIZE_PREFIX_BYTES,
    ApiKey,
    DecodedRequest,
    default_entity,
    reader_for,
    request_schema,
    response_schema,
)
from tickwheel.server.apis import SUPPORTED_VERSIONS

CORRELATION_ID = 7
LAST_PER_PARTITION_ADD_PARTITIONS_VERSION = 3
PARTITIONED = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.OFFSET_COMMIT,
)
WHOLE_REQUEST = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.END_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
)
ERRORS = (
    ErrorCode.not_leader_or_follower,
    ErrorCode.out_of_order_sequence_number,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.request_timed_out,
    ErrorCode.unknown_server_error,
)


def versions(api: ApiKey) -> list[int]:
    served = SUPPORTED_VERSIONS[api]
    return list(range(served.min_version, served.max_version + 1))


def request(
    api: ApiKey, version: int, pairs: list[tuple[str, int]] | None = None
) -> DecodedRequest:
    """A request of ``api`` at ``version``, naming ``pairs`` where it names partitions."""
    cls = request_schema(api, version)
    body: Any = default_entity(cls)
    shape = topic_shape(cls)
    if shape is not None and pairs is not None:
        topics = []
        for name in dict.fromkeys(topic for topic, _ in pairs):
            indexes = [partition for topic, partition in pairs if topic == name]
            partitions = (
                tuple(indexes)
                if shape.index is None
                else tuple(
                    dataclasses.replace(default_entity(shape.partition_class), **{shape.index: i})
                    for i in indexes
                )
            )
            topic = dataclasses.replace(
                default_entity(shape.topic_class),
                **{shape.name: name, shape.partitions: partitions},
            )
            topics.append(topic)
        body = dataclasses.replace(body, **{shape.topics: tuple(topics)})
    if hasattr(body, "coordinator_keys"):
        body = dataclasses.replace(body, coordinator_keys=("g1", "g2"))
    header_cls: Any = cls.__header_schema__
    header = header_cls(
        request_api_key=api,
        request_api_version=version,
        correlation_id=CORRELATION_ID,
        client_id="c",
    )
    return DecodedRequest(header=header, body=body)


def decoded(api: ApiKey, version: int, frame: bytes) -> Any:
    cls = response_schema(api, version)
    flexible = int(cls.__header_schema__.__version__) >= 1
    header_bytes = 5 if flexible else 4
    assert int.from_bytes(frame[:SIZE_PREFIX_BYTES]) == len(frame) - SIZE_PREFIX_BYTES
    assert int.from_bytes(frame[SIZE_PREFIX_BYTES : SIZE_PREFIX_BYTES + 4]) == CORRELATION_ID
    start = SIZE_PREFIX_BYTES + header_bytes
    body, read_bytes = reader_for(cls)(frame, start)
    assert start + read_bytes == len(frame)
    return body


def partition_errors(api: ApiKey, version: int, body: Any) -> dict[tuple[str, int], Any]:
    shape = topic_shape(response_schema(api, version))
    assert shape is not None
    assert shape.index is not None
    assert shape.error is not None
    return {
        (getattr(topic, shape.name), getattr(partition, shape.index)): getattr(
            partition, shape.error
        )
        for topic in getattr(body, shape.topics)
        for partition in getattr(topic, shape.partitions)
    }


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("api", PARTITIONED)
def test_a_partitioned_api_carries_the_error_on_each_partition(
    api: ApiKey, error: ErrorCode
) -> None:
    pairs = [("a", 0), ("a", 2), ("b", 1)]
    for version in versions(api):
        answer = decoded(api, version, error_answer(request(api, version, pairs), error, pairs))
        assert partition_errors(api, version, answer) == dict.fromkeys(pairs, error), version
        if hasattr(answer, "error_code"):
            assert answer.error_code == ErrorCode.none


def test_an_errored_partition_has_kafkas_unknown_values() -> None:
    pairs = [("a", 0)]
    produce = decoded(
        ApiKey.PRODUCE,
        9,
        error_answer(request(ApiKey.PRODUCE, 9, pairs), ErrorCode.not_leader_or_follower, pairs),
    )
    partition = produce.responses[0].partition_responses[0]
    assert (partition.base_offset, partition.log_start_offset) == (-1, -1)
    fetch = decoded(
        ApiKey.FETCH,
        12,
        error_answer(request(ApiKey.FETCH, 12, pairs), ErrorCode.not_leader_or_follower, pairs),
    )
    partition = fetch.responses[0].partitions[0]
    assert (partition.high_watermark, partition.last_stable_offset, partition.records) == (
        -1,
        -1,
        None,
    )
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (-1, -1)


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("api", WHOLE_REQUEST)
def test_a_whole_request_api_carries_the_error_at_the_top(api: ApiKey, error: ErrorCode) -> None:
    for version in versions(api):
        answer = decoded(api, version, error_answer(request(api, version), error, None))
        assert answer.error_code == error, version


def test_init_producer_id_answers_no_producer() -> None:
    answer = decoded(
        ApiKey.INIT_PRODUCER_ID,
        4,
        error_answer(
            request(ApiKey.INIT_PRODUCER_ID, 4), ErrorCode.coordinator_load_in_progress, None
        ),
    )
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator_carries_the_error_on_each_key(version: int) -> None:
    api = ApiKey.FIND_COORDINATOR
    answer = decoded(
        api, version, error_answer(request(api, version), ErrorCode.not_coordinator, None)
    )
    if version >= 4:
        assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
            ("g1", ErrorCode.not_coordinator, -1),
            ("g2", ErrorCode.not_coordinator, -1),
        ]
    else:
        assert (answer.error_code, answer.node_id) == (ErrorCode.not_coordinator, -1)


def test_add_partitions_to_txn_carries_the_error_per_partition_then_per_request() -> None:
    # Up to v3 (a producer's request) the error is on each partition; from v4 (a batch
    # of transactions, KIP-890) it is the request's, top-level, as Kafka answers a
    # request it refuses whole.
    api = ApiKey.ADD_PARTITIONS_TO_TXN
    pairs = [("a", 0), ("a", 1)]
    for version in versions(api):
        errored = request(api, version, pairs)
        if version <= LAST_PER_PARTITION_ADD_PARTITIONS_VERSION:
            answer = decoded(
                api, version, error_answer(errored, ErrorCode.concurrent_transactions, pairs)
            )
            assert partition_errors(api, version, answer) == dict.fromkeys(
                pairs, ErrorCode.concurrent_transactions
            )
        else:
            answer = decoded(
                api, version, error_answer(errored, ErrorCode.concurrent_transactions, None)
            )
            assert answer.error_code == ErrorCode.concurrent_transactions


def test_the_rest_of_a_request_goes_to_the_handler_and_the_answers_merge() -> None:
    api, version = ApiKey.PRODUCE, 9
    whole = request(api, version, [("a", 0), ("a", 1), ("b", 0)])
    hit = {("a", 1)}
    rest = without_partitions(whole, lambda topic, partition: (topic, partition) in hit)
    assert request_partitions(rest.body) == [("a", 0), ("b", 0)]
    handled = error_answer(rest, ErrorCode.none, request_partitions(rest.body))
    merged = decoded(
        api, version, merged_answer(whole, handled, ErrorCode.not_leader_or_follower, sorted(hit))
    )
    assert partition_errors(api, version, merged) == {
        ("a", 0): ErrorCode.none,
        ("a", 1): ErrorCode.not_leader_or_follower,
        ("b", 0): ErrorCode.none,
    }


@pytest.mark.parametrize("api", [*PARTITIONED, *WHOLE_REQUEST, ApiKey.FIND_COORDINATOR])
def test_every_error_code_is_answered_in_shape_at_the_newest_version(api: ApiKey) -> None:
    version = versions(api)[-1]
    pairs = [("a", 0)] if api in PARTITIONED else None
    for error in ErrorCode:
        answer = decoded(api, version, error_answer(request(api, version, pairs), error, pairs))
        if pairs is not None:
            assert partition_errors(api, version, answer) == {("a", 0): error}
        elif api == ApiKey.FIND_COORDINATOR:
            assert {c.error_code for c in answer.coordinators} == {error}
        else:
            assert answer.error_code == error
