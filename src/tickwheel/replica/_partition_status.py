"""``PartitionStatus``: one partition of a delayed produce or delete-records, and its answer.

Kafka's ``ProducePartitionStatus`` and ``DeleteRecordsPartitionStatus`` are the same
shape: the offset the partition waits for, the answer so far, and whether it is still
waiting (``acks_pending``). Both operations start the same way (``preset_timeouts``):
a partition with no error yet waits, with REQUEST_TIMED_OUT preset as its answer, so an
expiring operation answers exactly its waiting partitions with that error and needs no
``on_expiration`` logic of its own; a partition that already failed keeps its error.

Concurrency: a status belongs to one delayed operation and is touched only under that
operation's lock, on the ReplicaManager's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kio.schema.errors import ErrorCode

from tickwheel.replica._types import DeleteRecordsPartitionResult, ProducePartitionResult

ResultT = TypeVar("ResultT", ProducePartitionResult, DeleteRecordsPartitionResult)


@dataclass(slots=True)
class PartitionStatus(Generic[ResultT]):
    """A partition of a delayed operation: the offset it waits for, its answer so far."""

    required_offset: int
    result: ResultT
    acks_pending: bool = False


def preset_timeouts(statuses: Iterable[PartitionStatus[ResultT]]) -> None:
    """Mark partitions without an error as waiting, answering REQUEST_TIMED_OUT until settled."""
    for status in statuses:
        status.acks_pending = status.result.error_code == ErrorCode.none
        if status.acks_pending:
            status.result = status.result.with_error_code(ErrorCode.request_timed_out)


def any_pending(statuses: Iterable[PartitionStatus[ResultT]]) -> bool:
    """Whether some partition still waits."""
    return any(status.acks_pending for status in statuses)
