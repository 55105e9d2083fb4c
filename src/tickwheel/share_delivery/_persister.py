"""The share-state persister: where a share-partition's start offset and record states live.

A share-partition (``SharePartition``) reads its state through a ``Persister`` when it is
first used (``read_state``; None means the group never consumed it, and
``share.auto.offset.reset`` picks the start offset), and writes its whole state --
start offset and every in-flight batch at or after it -- before it answers an
acknowledgement or moves its start offset (``write_state``). Records that are acquired
when the state is written are written as AVAILABLE with their delivery count: after a
restart nobody holds a lock, so they are delivered again, while accepted and rejected
ones are not. The shape is Kafka's ``Persister`` (``ReadShareGroupState`` /
``WriteShareGroupState`` / ``DeleteShareGroupState``), one share-partition per call.

The broker's persister is the share coordinator's, durable in ``__share_group_state``
(``tickwheel.coordinator.share_state.CoordinatorPersister``); the tests keep states in a dict.

Concurrency: the persister's methods are awaited on the broker's event loop.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    """A record's delivery state, with Kafka's numeric values (3 is unused)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """A share group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A run of offsets ``first_offset..last_offset`` in one state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareGroupState:
    """A share-partition's durable state."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...]


class PersisterError(Exception):
    """A read, write or delete that failed, with the Kafka error the client gets."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


class Persister(Protocol):
    """Where share-partition states are kept."""

    async def read_state(self, key: SharePartitionKey) -> ShareGroupState | None:
        """The stored state, or None when the share-partition was never initialized."""
        ...

    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> None:
        """Replace the state of ``key``; durable when it returns; PersisterError if not."""
        ...

    async def delete_state(self, key: SharePartitionKey) -> None:
        """Forget the state of ``key``."""
        ...
