"""``SchemasLog``: the registry's ``_schemas`` topic, written and read through the replica layer.

The topic has one partition, ``cleanup.policy=compact``, and is created on first need
(``create_topic``, which the broker supplies: the broker decides how topics are made).
``append`` writes records as one uncompressed v2 batch with acks=all, as the
coordinators write their state topics, and returns once the batch is committed or
raises ``RegistryError`` (50001) with the append's error. ``read_new`` returns the
records from the last one read up to the log's end, so the registry's store is the
topic read in order, whether the records came from this registry or were already there
(a ``_schemas`` topic another registry wrote).

Concurrency: event-loop thread only; ``append`` yields the loop while it waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from tickwheel.coordinator._batches import build_batch
from tickwheel.coordinator._state_log import StateLogError, read_to_end
from tickwheel.log import AppendOrigin, LogError
from tickwheel.registry._errors import store_error
from tickwheel.registry._records import SCHEMAS_TOPIC
from tickwheel.replica import ACKS_ALL, ProducePartitionResult, ReplicaManager, TopicPartition

SCHEMAS_PARTITION = TopicPartition(SCHEMAS_TOPIC, 0)
SCHEMAS_TOPIC_CONFIGS: Mapping[str, str] = {"cleanup.policy": "compact"}
_READ_CHUNK_BYTES = 1 << 20


class SchemasLog:
    """The ``_schemas`` partition this broker hosts."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        *,
        create_topic: Callable[[], None],
        clock_ms: Callable[[], int],
        timeout_ms: int,
    ) -> None:
        self._replica_manager = replica_manager
        self._create_topic = create_topic
        self._clock_ms = clock_ms
        self._timeout_ms = timeout_ms
        self._next_offset = 0

    def read_new(self) -> list[tuple[int, bytes, bytes | None]]:
        """``(offset, key, value)`` of the records not read yet, up to the log's end."""
        hosted = self._replica_manager.get_partition(SCHEMAS_PARTITION)
        if hosted is None or hosted.log.log_end_offset <= self._next_offset:
            return []
        try:
            records = list(
                read_to_end(hosted.log, _READ_CHUNK_BYTES, start_offset=self._next_offset)
            )
        except StateLogError as exc:
            raise store_error(str(exc)) from exc
        self._next_offset = hosted.log.log_end_offset
        return records

    async def append(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Write ``records`` and wait until they are committed."""
        if self._replica_manager.get_partition(SCHEMAS_PARTITION) is None:
            try:
                self._create_topic()
            except (OSError, LogError) as exc:
                raise store_error(f"cannot create {SCHEMAS_TOPIC}: {exc}") from exc
        done: asyncio.Future[ProducePartitionResult] = asyncio.get_running_loop().create_future()

        def appended(results: Mapping[TopicPartition, ProducePartitionResult]) -> None:
            if not done.done():
                done.set_result(results[SCHEMAS_PARTITION])

        self._replica_manager.append_records(
            self._timeout_ms,
            ACKS_ALL,
            {SCHEMAS_PARTITION: build_batch(records, self._clock_ms())},
            appended,
            origin=AppendOrigin.COORDINATOR,
        )
        result = await done
        error = ErrorCode(result.error_code)
        if error is not ErrorCode.none:
            raise store_error(f"writing to {SCHEMAS_TOPIC} failed: {error.name}")
