"""``DelayedElectLeader``: an ElectLeaders answer waiting for the new leaders to be in place.

Kafka's ``DelayedElectLeader``. The controller writes each elected partition's new
state at once; the request is answered when this broker's metadata cache shows every
one of them led by the broker that was elected (so a client that refreshes its
metadata after the answer finds the new leaders), or when ``timeout_ms`` passes,
the still-pending partitions then answering the REQUEST_TIMED_OUT preset for them.
Watched under each elected partition's key in the ``ElectLeader`` purgatory, which
the ``ClusterNode`` checks whenever it records a partition state.

Concurrency: created, checked and completed on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from tickwheel.purgatory import DelayedOperation
from tickwheel.replica import TopicPartition

ElectLeadersCallback = Callable[[dict[TopicPartition, ErrorCode]], None]


class DelayedElectLeader(DelayedOperation):
    """Waits until every elected partition is led by its expected leader."""

    def __init__(
        self,
        delay_ms: int,
        expected_leaders: Mapping[TopicPartition, int],
        results: Mapping[TopicPartition, ErrorCode],
        leader_of: Callable[[TopicPartition], int],
        callback: ElectLeadersCallback,
    ) -> None:
        super().__init__(delay_ms)
        self._waiting = dict(expected_leaders)
        # Preset: what a partition still waiting answers if the timeout comes first.
        self._results = dict(results) | dict.fromkeys(expected_leaders, ErrorCode.request_timed_out)
        self._leader_of = leader_of
        self._callback = callback

    def try_complete(self) -> bool:
        """Settle the partitions whose leader is in place; complete when none is left."""
        for tp, leader in list(self._waiting.items()):
            if self._leader_of(tp) == leader:
                del self._waiting[tp]
                self._results[tp] = ErrorCode.none
        if self._waiting:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        """Nothing beyond the preset timeouts: the purgatory counts the expiration."""

    def on_complete(self) -> None:
        """Answer with every partition's result."""
        self._callback(dict(self._results))
