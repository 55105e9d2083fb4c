"""Error answers in the shape Kafka gives them, built from kio's response classes.

An injected error must reach the client where the client looks for it, or the test
proves nothing. Kafka answers an error where the response carries it
(``AbstractRequest.getErrorResponse`` and the handlers' per-partition errors), and so
does ``error_answer``, for any API and version, from the response class alone:

- an API with partitions (``TopicShape``: Produce, Fetch, ListOffsets, OffsetCommit,
  AddPartitionsToTxn...) gets the error on each partition the fault hits, every other
  field of those partitions at Kafka's "unknown" value (offsets, leader, epoch -1,
  no records), the top-level error code untouched; a partition whose response has a
  ``current_leader`` (Produce v10+, Fetch v12+) and whose error is a leader error gets
  the broker's leader hints (``LeaderHints``), and the response its ``node_endpoints``,
  as the handlers answer the same error;
- Metadata gets it on each topic the fault hits (``with_topic_errors``: the broker's
  own answer, those topics' errors set and partitions emptied, as Kafka answers a topic
  it cannot serve), so the client still learns the brokers;
- a response keyed by coordinator key (FindCoordinator v4+) gets it on each key;
- any other response has a top-level ``error_code`` and gets it there, the rest at
  Kafka's "unknown" values (no producer id, no generation, no member epoch).

When a fault hits only some partitions of a request the rest is answered normally:
``without_partitions`` is the request minus the hit ones, for the handler, and
``merged_answer`` adds the errored partitions to the handler's answer.

Pure apart from kio's caches; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol, cast, runtime_checkable

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity, ResponsePayload

from tickwheel.faults._shape import TopicShape, partition_index, topic_shape
from tickwheel.protocol import (
    NO_LEADER_HINTS,
    SIZE_PREFIX_BYTES,
    ApiKey,
    DecodedRequest,
    FetchResponseFrame,
    LeaderHints,
    array_item_class,
    default_entity,
    encode_response,
    reader_for,
    response_schema,
)

# The values Kafka gives the fields of an errored answer it cannot fill in.
_UNKNOWN_INT_FIELDS: Final = frozenset(
    {
        "base_offset",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "producer_id",
        "producer_epoch",
        "generation_id",
        "member_epoch",
        "node_id",
        "port",
        "leader_id",
        "leader_epoch",
        "committed_offset",
        "offset",
        "timestamp",
    }
)
_UNKNOWN: Final = -1
_HEADER_V0_BYTES: Final = 4
_HEADER_V1_BYTES: Final = 5
_COORDINATOR_KEYS: Final = "coordinator_keys"
_COORDINATORS: Final = "coordinators"
_CURRENT_LEADER: Final = "current_leader"
_NODE_ENDPOINTS: Final = "node_endpoints"


class AnswerShapeError(ValueError):
    """The response of this API and version has nowhere to carry an error."""


@runtime_checkable
class _Readable(Protocol):
    def read_bytes(self) -> bytes: ...


Hit = Callable[[str, int], bool]
Answer = bytes | FetchResponseFrame | None
"""A handler's answer: a frame, a Fetch frame in chunks, or nothing to send."""


@functools.cache
def _unknown_fields(cls: type[Entity]) -> tuple[str, ...]:
    names = (field.name for field in dataclasses.fields(cls))
    return tuple(name for name in names if name in _UNKNOWN_INT_FIELDS)


def _unknown(cls: type[Entity], **values: Any) -> Any:
    """An entity of ``cls`` at Kafka's defaults, "unknown" where Kafka says so, then
    ``values``."""
    unknown = dict.fromkeys(_unknown_fields(cls), _UNKNOWN)
    return dataclasses.replace(default_entity(cls), **{**unknown, **values})


def _errored_topics(
    shape: TopicShape,
    pairs: Iterable[tuple[str, int]],
    error: ErrorCode,
    hints: LeaderHints = NO_LEADER_HINTS,
) -> list[Any]:
    """The response's topic entries for ``pairs``, each partition errored (with its
    leader hint, where ``hints`` has one and the partition can carry it)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in pairs:
        by_topic.setdefault(topic, []).append(partition)
    if shape.partition_class is None or shape.index is None or shape.error is None:
        raise AnswerShapeError("its partitions carry no error code")
    partition_class, index, error_field = shape.partition_class, shape.index, shape.error

    def partition_entry(topic: str, partition: int) -> Any:
        entry = _unknown(partition_class, **{index: partition, error_field: error})
        leader = hints.leaders.get((topic, partition))
        if leader is None or not hasattr(entry, _CURRENT_LEADER):
            return entry
        leader_id, leader_epoch = leader
        current = dataclasses.replace(
            entry.current_leader, leader_id=leader_id, leader_epoch=leader_epoch
        )
        return dataclasses.replace(entry, current_leader=current)

    return [
        _unknown(
            shape.topic_class,
            **{
                shape.name: topic,
                shape.partitions: tuple(partition_entry(topic, p) for p in partitions),
            },
        )
        for topic, partitions in by_topic.items()
    ]


def _with_endpoints(body: Any, hints: LeaderHints) -> Any:
    """``body`` with the endpoints of ``hints`` added to its ``node_endpoints``, where
    the response has them."""
    if not hints.endpoints or not hasattr(body, _NODE_ENDPOINTS):
        return body
    body_cls: type[Entity] = type(body)
    item_cls: Any = array_item_class(body_cls, _NODE_ENDPOINTS)
    held = {endpoint.node_id: endpoint for endpoint in body.node_endpoints}
    for endpoint in hints.endpoints:
        held.setdefault(
            endpoint.node_id,
            item_cls(
                node_id=endpoint.node_id,
                host=endpoint.host,
                port=endpoint.port,
                rack=endpoint.rack,
            ),
        )
    return dataclasses.replace(body, node_endpoints=tuple(held[n] for n in sorted(held)))


def error_answer(
    request: DecodedRequest,
    error: ErrorCode,
    pairs: Sequence[tuple[str, int]] | None,
    hints: LeaderHints = NO_LEADER_HINTS,
) -> bytes:
    """The whole answer to ``request``: ``error`` on each of ``pairs`` (its partitions,
    with their leader ``hints``), or where the response carries a request-wide error.
    ``AnswerShapeError`` when it has none."""
    cls = response_schema(request.api_key, request.api_version)
    fields = {field.name for field in dataclasses.fields(cls)}
    shape = topic_shape(cls)
    if pairs is not None and shape is not None:
        topics = tuple(_errored_topics(shape, pairs, error, hints))
        body = _with_endpoints(_unknown(cls, **{shape.topics: topics}), hints)
    elif _COORDINATORS in fields and hasattr(request.body, _COORDINATOR_KEYS):
        item_cls = array_item_class(cls, _COORDINATORS)
        keys = getattr(request.body, _COORDINATOR_KEYS)
        coordinators = tuple(_unknown(item_cls, key=key, host="", error_code=error) for key in keys)
        body = _unknown(cls, **{_COORDINATORS: coordinators})
    elif "error_code" in fields:
        body = _unknown(cls, error_code=error)
    else:
        raise AnswerShapeError(f"{cls.__name__} has no error code to carry it")
    return encode_response(request.correlation_id, body)


def without_partitions(request: DecodedRequest, hit: Hit) -> DecodedRequest:
    """``request`` without the partitions ``hit`` picks (topics left empty dropped)."""
    body = request.body
    shape = topic_shape(type(body))
    if shape is None:
        return request
    kept = []
    for topic in getattr(body, shape.topics) or ():
        name = str(getattr(topic, shape.name))
        partitions = tuple(
            partition
            for partition in getattr(topic, shape.partitions) or ()
            if not hit(name, partition_index(shape, partition))
        )
        if partitions:
            kept.append(dataclasses.replace(topic, **{shape.partitions: partitions}))
    filtered = dataclasses.replace(body, **{shape.topics: tuple(kept)})
    return dataclasses.replace(request, body=filtered)


def _frame_bytes(response: Answer) -> bytes:
    if isinstance(response, bytes):
        return response
    if isinstance(response, FetchResponseFrame):
        return b"".join(
            chunk if isinstance(chunk, bytes) else _read(chunk) for chunk in response.chunks
        )
    raise AnswerShapeError("the handler sent no answer to add the error to")


def _read(chunk: object) -> bytes:
    if not isinstance(chunk, _Readable):
        raise AnswerShapeError(f"cannot read the answer's {type(chunk).__name__}")
    return chunk.read_bytes()


def _decoded(request: DecodedRequest, response: Answer) -> ResponsePayload:
    cls = response_schema(request.api_key, request.api_version)
    flexible = int(cls.__header_schema__.__version__) >= 1
    header_bytes = _HEADER_V1_BYTES if flexible else _HEADER_V0_BYTES
    body, _ = reader_for(cls)(_frame_bytes(response), SIZE_PREFIX_BYTES + header_bytes)
    return cast(ResponsePayload, body)


def merged_answer(
    request: DecodedRequest,
    response: Answer,
    error: ErrorCode,
    pairs: Sequence[tuple[str, int]],
    hints: LeaderHints = NO_LEADER_HINTS,
) -> bytes:
    """The handler's ``response`` (to the request without ``pairs``) with ``pairs``
    added, errored (with their leader ``hints``)."""
    body = _decoded(request, response)
    shape = topic_shape(type(body))
    if shape is None:
        raise AnswerShapeError(f"{type(body).__name__} has no partitions")
    topics = list(getattr(body, shape.topics))
    for errored in _errored_topics(shape, pairs, error, hints):
        name = getattr(errored, shape.name)
        at = next((i for i, t in enumerate(topics) if getattr(t, shape.name) == name), None)
        if at is None:
            topics.append(errored)
        else:
            joined = getattr(topics[at], shape.partitions) + getattr(errored, shape.partitions)
            topics[at] = dataclasses.replace(topics[at], **{shape.partitions: joined})
    merged = _with_endpoints(dataclasses.replace(body, **{shape.topics: tuple(topics)}), hints)
    return encode_response(request.correlation_id, merged)


def with_topic_errors(
    request: DecodedRequest, response: Answer, error: ErrorCode, topic: str | None
) -> bytes:
    """The handler's Metadata ``response`` with ``error`` on ``topic`` (None: on every
    topic), those topics' partitions emptied."""
    if request.api_key != ApiKey.METADATA:
        raise AnswerShapeError("topic errors are Metadata's")
    body: Any = _decoded(request, response)
    topics = tuple(
        dataclasses.replace(entry, error_code=error, partitions=())
        if topic is None or entry.name == topic
        else entry
        for entry in body.topics
    )
    return encode_response(request.correlation_id, dataclasses.replace(body, topics=topics))
