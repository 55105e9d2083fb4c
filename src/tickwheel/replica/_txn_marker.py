"""``TxnMarker``: one WriteTxnMarkers entry (PLACEHOLDER for the txn-log branch's module).

Concurrency: immutable values, safe anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tickwheel.replica._types import TopicPartition


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT marker of one producer for some partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


TxnMarkerCallback = Callable[[dict[int, dict[TopicPartition, int]]], None]
"""``{producer_id: {tp: error code}}``, called once every marker's append finished."""
