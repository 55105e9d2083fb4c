"""What every API handler shares: its description, its type, and the reply helper.

A handler is an ``async`` function ``(context, request) -> response``: the response
is a whole frame (``bytes``), a Fetch ``FetchResponseFrame`` (chunks with record
slices), or None when the request gets no answer (acks=0 produce). Handlers that wait
in a purgatory await a future that the delayed operation's callback resolves.

Handlers are typed against kio's classes of the newest version they handle: a handler
reads its request with ``request.body_as(Request)`` (an older version's request carried
to that one, its missing fields at Kafka's defaults) and answers with
``reply(request, Response(...))``, which writes the response at the version asked.
``mypy --strict`` so checks every field a handler reads or writes.

Concurrency: handlers run on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from tickwheel.log import LogError
from tickwheel.protocol import (
    DecodedRequest,
    FetchResponseFrame,
    RequestKey,
    VersionRange,
    convert,
    encode_response,
    error_response,
    response_schema,
)
from tickwheel.replica import Partition, PartitionError, TopicPartition
from tickwheel.server._context import BrokerContext

Response = bytes | FetchResponseFrame | None
Handler = Callable[[BrokerContext, DecodedRequest], Awaitable[Response]]
T = TypeVar("T")
_MS_PER_S = 1000


class CloseConnectionError(Exception):
    """Raised by a handler whose request must be answered by closing the connection.

    An acks=0 produce that fails has no response to carry the error, so Kafka closes
    the connection instead: the client notices, refreshes its metadata and reconnects.
    """


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: its key, Kafka's name for it, the versions handled, and the handler.

    ApiVersions lists ``advertised``: the versions handled, unless
    ``advertised_min_version`` lowers the floor it shows (a request below
    ``versions`` still closes the connection).
    """

    api_key: int
    name: str
    versions: VersionRange
    handle: Handler
    advertised_min_version: int | None = None

    @property
    def advertised(self) -> VersionRange:
        """The version range ApiVersions lists for this API."""
        if self.advertised_min_version is None:
            return self.versions
        return VersionRange(self.advertised_min_version, self.versions.max_version)


def reply(request: DecodedRequest, response: ResponsePayload) -> bytes:
    """The response frame to ``request``: ``response`` (a kio response of any version of
    its API, as a handler builds it at the newest it knows) at the request's version."""
    cls = response_schema(request.api_key, request.api_version)
    return encode_response(request.correlation_id, convert(cls, response))


def refuse_whole(request: DecodedRequest, error_code: ErrorCode) -> bytes:
    """The answer refusing the whole request with ``error_code`` (its top-level error
    code, every other field empty); only for APIs whose response has one."""
    frame = error_response(
        RequestKey(request.api_key, request.api_version, request.correlation_id), error_code
    )
    if frame is None:
        raise RuntimeError(f"{type(request.body).__name__} has no error code to refuse with")
    return frame


def to_ms(duration: datetime.timedelta) -> int:
    """A kio duration field in milliseconds."""
    return round(duration.total_seconds() * _MS_PER_S)


class Pending(Generic[T]):
    """A value a delayed operation's callback will deliver: ``resolve`` it, ``await`` it.

    A delayed operation may complete after its connection closed and cancelled the
    handler; ``resolve`` does nothing then.
    """

    def __init__(self) -> None:
        self._future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def resolve(self, value: T) -> None:
        """Deliver the value (once; later calls and calls after cancellation are ignored)."""
        if not self._future.done():
            self._future.set_result(value)

    def __await__(self) -> Generator[Any, None, T]:
        return self._future.__await__()


def answer_as_leader(
    context: BrokerContext,
    tp: TopicPartition,
    current_leader_epoch: int,
    answer: Callable[[Partition], T],
    refuse: Callable[[ErrorCode], T],
) -> T:
    """``answer(partition)`` from ``tp``'s leader at ``current_leader_epoch`` (-1: any);
    else ``refuse(error_code)``: the partition is not hosted here, this broker does not
    lead it at that epoch, or its log raised."""
    partition = context.replica_manager.get_partition(tp)
    if partition is None:
        return refuse(context.replica_manager.not_hosted_error(tp))
    try:
        partition.check_leader(current_leader_epoch)
        return answer(partition)
    except PartitionError as exc:
        return refuse(exc.error_code)
    except LogError as exc:
        return refuse(ErrorCode(exc.error_code))
