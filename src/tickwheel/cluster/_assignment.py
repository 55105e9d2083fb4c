"""Replica assignment for new partitions, as Kafka's ``AdminUtils`` does it (no racks).

Brokers are sorted by id. The first replica of partition ``p`` is broker
``(p + start_index) % n``; the others follow it at a shift that grows by one every
``n`` partitions, so that the followers of one broker are spread over the others
instead of always being its neighbours. With 5 brokers, 10 partitions, RF 3 and both
random starts 0::

    p0: 0 1 2    p5: 0 2 3
    p1: 1 2 3    p6: 1 3 4
    p2: 2 3 4    p7: 2 4 0
    p3: 3 4 0    p8: 3 0 1
    p4: 4 0 1    p9: 4 1 2

``start_index`` and the initial shift are random unless given, so that many topics
with few partitions do not all lead on the lowest broker ids.

Pure; safe from any thread.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from kio.schema.errors import ErrorCode


class AssignmentError(ValueError):
    """An assignment that cannot be made: carries the Kafka error to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def _replica_index(first_index: int, shift: int, replica: int, num_brokers: int) -> int:
    """Where replica ``replica + 1`` of a partition led by ``first_index`` sits."""
    return (first_index + 1 + (shift + replica) % (num_brokers - 1)) % num_brokers


def assign_replicas(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    start_index: int | None = None,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (preferred leader first) for partitions
    ``start_partition .. start_partition + num_partitions - 1``."""
    brokers = sorted(set(broker_ids))
    if num_partitions <= 0:
        raise AssignmentError(
            ErrorCode.invalid_partitions, f"number of partitions must be positive: {num_partitions}"
        )
    if replication_factor <= 0:
        raise AssignmentError(
            ErrorCode.invalid_replication_factor,
            f"replication factor must be positive: {replication_factor}",
        )
    if replication_factor > len(brokers):
        raise AssignmentError(
            ErrorCode.invalid_replication_factor,
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available brokers",
        )
    chooser = rng or random.Random()
    count = len(brokers)
    first_start = chooser.randrange(count) if start_index is None else start_index
    shift = chooser.randrange(count) if replica_shift is None else replica_shift
    assignment: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition)
    for _ in range(num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first_index = (partition + first_start) % count
        replicas = [brokers[first_index]]
        replicas += [
            brokers[_replica_index(first_index, shift, j, count)]
            for j in range(replication_factor - 1)
        ]
        assignment[partition] = tuple(replicas)
        partition += 1
    return assignment
