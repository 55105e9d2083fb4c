"""``CoordinatorPersister``: the durable ``Persister`` of share state, over the share
coordinators of the cluster.

A share-partition's leader reads and writes its state through this persister (Kafka's
``DefaultStatePersister``). It finds the share-partition's coordinator -- the leader of
its ``__share_group_state`` partition, through ``locate`` -- and asks it: this broker's
own ``ShareCoordinator`` directly when it is the one (always, on a single node), another
broker with the inter-broker requests ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, InitializeShareGroupState and ReadShareGroupStateSummary (keys
84, 85, 86, 83, 87) through a ``ShareStateTransport``.

This is Kafka's design rather than an equivalent folded into the share-partition's own
broker: a share-partition and its state live on different brokers in general, and only
a coordinator that owns the state's partition can order the writes of every leader the
share-partition ever has (fencing an old one by its leader epoch). Keeping the Kafka
requests also lets the state be inspected and tested on the wire.

Errors that mean "ask again" -- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT, a lost connection, a coordinator not yet
known (the topic is being created, a leader is being elected) -- are retried every
``retry_backoff_ms`` until ``timeout_ms`` has passed since the call began; any other error,
or the deadline, raises ``PersisterError`` with the error the client should see.

Each write carries a share-partition's whole state, so the writes of one share-partition
must land in the order they were made: they go one at a time per share-partition (a
retried write is never overtaken by a later one).

Concurrency contract: event-loop thread only; calls for different share-partitions may
be in flight at once (the transport orders requests on each connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.share_state._coordinator import NO_LEADER_EPOCH, ShareCoordinator
from tickwheel.share_delivery import PersisterError, ShareGroupState, SharePartitionKey

_log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRIABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.request_timed_out,
    }
)
_MS_PER_S = 1000.0

ShareCoordinatorLocator = Callable[[int], int | None]
"""The broker id leading a ``__share_group_state`` partition, or None while unknown."""


class ShareStateTransport(Protocol):
    """Share-state requests to another broker's share coordinator."""

    async def read_state(
        self, broker_id: int, key: SharePartitionKey, leader_epoch: int
    ) -> tuple[ErrorCode, ShareGroupState | None]:
        """ReadShareGroupState; None when the share-partition was never initialized."""
        ...

    async def read_summary(
        self, broker_id: int, key: SharePartitionKey
    ) -> tuple[ErrorCode, ShareGroupState | None]:
        """ReadShareGroupStateSummary (the state without its batches)."""
        ...

    async def write_state(
        self, broker_id: int, key: SharePartitionKey, state: ShareGroupState
    ) -> ErrorCode:
        """WriteShareGroupState of the whole state."""
        ...

    async def initialize_state(
        self, broker_id: int, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> ErrorCode:
        """InitializeShareGroupState."""
        ...

    async def delete_state(self, broker_id: int, key: SharePartitionKey) -> ErrorCode:
        """DeleteShareGroupState."""
        ...

    async def close(self) -> None:
        """Close every connection."""
        ...


@dataclass(slots=True)
class _KeyLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class CoordinatorPersister:
    """``tickwheel.share_delivery.Persister`` over the share coordinators, local or remote."""

    def __init__(
        self,
        coordinator: ShareCoordinator,
        *,
        broker_id: int,
        locate: ShareCoordinatorLocator,
        transport: ShareStateTransport | None = None,
        timeout_ms: int,
        retry_backoff_ms: int = 100,
    ) -> None:
        self._coordinator = coordinator
        self._broker_id = broker_id
        self._locate = locate
        self._transport = transport
        self._timeout_ms = timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._writing: dict[SharePartitionKey, _KeyLock] = {}

    @contextlib.asynccontextmanager
    async def _one_writer(self, key: SharePartitionKey) -> AsyncIterator[None]:
        """Hold ``key``'s write turn (first come, first served)."""
        entry = self._writing.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._writing[key]

    async def read_state(self, key: SharePartitionKey) -> ShareGroupState | None:
        """The stored state of ``key``, or None when it was never initialized."""

        async def local() -> tuple[ErrorCode, ShareGroupState | None]:
            return self._coordinator.read_state(key)

        def remote(
            transport: ShareStateTransport, broker_id: int
        ) -> Awaitable[tuple[ErrorCode, ShareGroupState | None]]:
            return transport.read_state(broker_id, key, NO_LEADER_EPOCH)

        _error, state = await self._call(key, "read", local, remote, _error_of_pair)
        return state

    async def read_summary(self, key: SharePartitionKey) -> ShareGroupState | None:
        """The state of ``key`` without its batches, or None (an administrator's read)."""

        async def local() -> tuple[ErrorCode, ShareGroupState | None]:
            error, state = self._coordinator.read_state(key)
            if state is not None:
                state = ShareGroupState(
                    state.state_epoch, state.leader_epoch, state.start_offset, ()
                )
            return error, state

        def remote(
            transport: ShareStateTransport, broker_id: int
        ) -> Awaitable[tuple[ErrorCode, ShareGroupState | None]]:
            return transport.read_summary(broker_id, key)

        _error, state = await self._call(key, "read the summary of", local, remote, _error_of_pair)
        return state

    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> None:
        """Store ``state`` as the whole state of ``key``; durable when this returns."""

        def remote(transport: ShareStateTransport, broker_id: int) -> Awaitable[ErrorCode]:
            return transport.write_state(broker_id, key, state)

        async with self._one_writer(key):
            await self._call(
                key, "write", lambda: self._coordinator.write_state(key, state), remote, _same
            )

    async def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> None:
        """Start ``key`` at ``start_offset`` with nothing in flight, at ``state_epoch``."""

        def remote(transport: ShareStateTransport, broker_id: int) -> Awaitable[ErrorCode]:
            return transport.initialize_state(broker_id, key, state_epoch, start_offset)

        async with self._one_writer(key):
            await self._call(
                key,
                "initialize",
                lambda: self._coordinator.initialize_state(key, state_epoch, start_offset),
                remote,
                _same,
            )

    async def delete_state(self, key: SharePartitionKey) -> None:
        """Forget the state of ``key``."""

        def remote(transport: ShareStateTransport, broker_id: int) -> Awaitable[ErrorCode]:
            return transport.delete_state(broker_id, key)

        await self._call(key, "delete", lambda: self._coordinator.delete_state(key), remote, _same)

    async def _call(
        self,
        key: SharePartitionKey,
        action: str,
        local: Callable[[], Awaitable[T]],
        remote: Callable[[ShareStateTransport, int], Awaitable[T]],
        error_of: Callable[[T], ErrorCode],
    ) -> T:
        deadline_s = time.monotonic() + self._timeout_ms / _MS_PER_S
        partition = self._coordinator.partition_for(key)
        while True:
            answer = await self._ask(partition, local, remote)
            error = ErrorCode.coordinator_not_available if answer is None else error_of(answer)
            if answer is not None and error is ErrorCode.none:
                return answer
            if error not in _RETRIABLE or time.monotonic() >= deadline_s:
                raise PersisterError(
                    error, f"could not {action} the share state of {key}: {error.name}"
                )
            await asyncio.sleep(self._retry_backoff_ms / _MS_PER_S)

    async def _ask(
        self,
        partition: int,
        local: Callable[[], Awaitable[T]],
        remote: Callable[[ShareStateTransport, int], Awaitable[T]],
    ) -> T | None:
        """The coordinator's answer, or None when there is no coordinator to ask."""
        broker_id = self._locate(partition)
        if broker_id == self._broker_id:
            return await local()
        if broker_id is None or self._transport is None:
            return None
        try:
            return await remote(self._transport, broker_id)
        except OSError as exc:  # TimeoutError included
            _log.info("share coordinator %d unreachable: %s", broker_id, exc)
            return None


def _error_of_pair(answer: tuple[ErrorCode, ShareGroupState | None]) -> ErrorCode:
    return answer[0]


def _same(answer: ErrorCode) -> ErrorCode:
    return answer
