"""``IsrManager``: the leader's record of its followers, and the ISR's shrink and growth.

For every partition this broker leads it keeps the ``LeaderAndIsr`` last read or
written (with its version in the coordination service), and for every follower
Kafka's fetch bookkeeping, kept in the partition's ``ReplicaState``:

- A fetch at or past the leader's log end means the follower is caught up *now*.
- A fetch at or past the log end the leader had at the follower's *previous* fetch
  means it was caught up *then*: it has read everything it was shown.
- ``last_caught_up_time_ms`` keeps the later of those instants (Kafka's rule).

Two changes follow from it, each a conditional write through the injected
``IsrWriter`` (the cluster's ZooKeeper client) and applied here only once it won:

- Shrink: an ISR member not caught up for ``replica.lag.time.max.ms`` is removed.
  Checked every half of that interval, as Kafka schedules its ``isr-expiration``.
  The high watermark is then the minimum over a smaller ISR, so it may move and
  complete the produces that waited only for that follower.
- Expansion: a follower outside the ISR whose log end reached the high watermark and
  the start of the current leader epoch is added back.

At most one write per partition is in flight; a write that loses (the version moved)
changes nothing here, and the newer state arrives through the cluster's watch.

Concurrency: event-loop thread only, like the ``ReplicaManager`` it serves; writes
run as tasks on the same loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tickwheel._tasks import cancel_and_wait
from tickwheel.purgatory import TopicPartitionOperationKey
from tickwheel.replica._leader_and_isr import LeaderAndIsr
from tickwheel.replica._manager import ReplicaManager
from tickwheel.replica._partition import Partition, ReplicaState
from tickwheel.replica._types import TopicPartition
from tickwheel.timer import Clock, SystemClock

_log = logging.getLogger(__name__)

IsrWriter = Callable[[TopicPartition, LeaderAndIsr], Awaitable[LeaderAndIsr | None]]
"""Writes a proposed state conditionally on its ``version``; returns the state as
stored (with its new version), or None when the stored version no longer matched."""

_CHECKS_PER_LAG_TIME = 2
_MS_PER_S = 1000.0


@dataclass(slots=True)
class _Leadership:
    """A partition this broker leads: its last known state and where its epoch began."""

    state: LeaderAndIsr
    epoch_start_offset: int
    write_in_flight: bool = False


def record_follower_fetch(
    replica: ReplicaState, fetch_offset: int, leader_end_offset: int, now_ms: int
) -> None:
    """Update a follower's caught-up bookkeeping from a fetch at ``fetch_offset``."""
    if fetch_offset >= leader_end_offset:
        replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
    elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
        replica.last_caught_up_time_ms = max(
            replica.last_caught_up_time_ms, replica.last_fetch_time_ms
        )
    replica.last_fetch_leader_log_end_offset = leader_end_offset
    replica.last_fetch_time_ms = now_ms


class IsrManager:
    """Tracks followers of the partitions led here; shrinks and expands their ISR."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        writer: IsrWriter,
        *,
        replica_lag_time_max_ms: int,
        clock: Clock | None = None,
    ) -> None:
        self._replica_manager = replica_manager
        self._writer = writer
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._clock = clock or SystemClock()
        self._led: dict[TopicPartition, _Leadership] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self._checker: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic shrink check; must run on the event loop.

        Leaderships taken before (a broker rejoining its cluster leads from the stored
        state before it registers, and no follower can fetch from it until it does)
        count their in-sync followers as caught up now.
        """
        now_ms = self._clock.now_ms()
        for tp in self._led:
            partition = self._replica_manager.get_partition(tp)
            if partition is None:
                continue
            for replica in partition.remote_replicas.values():
                if replica.broker_id in partition.isr:
                    replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
        self._checker = asyncio.get_running_loop().create_task(self._check_periodically())

    async def stop(self) -> None:
        """Stop the check and abandon writes in flight."""
        tasks = [*self._writes, *([self._checker] if self._checker else [])]
        await cancel_and_wait(*tasks)
        self._checker = None

    async def wait_for_writes(self) -> None:
        """Return once every ISR write in flight has been answered and applied."""
        while self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def _check_periodically(self) -> None:
        interval_s = max(1, self.replica_lag_time_max_ms // _CHECKS_PER_LAG_TIME) / _MS_PER_S
        while True:
            await asyncio.sleep(interval_s)
            self.maybe_shrink_isr()

    # -- leadership ------------------------------------------------------------------

    def became_leader(self, partition: Partition, state: LeaderAndIsr) -> None:
        """Start tracking ``partition``, just made leader at ``state``'s epoch.

        Every follower starts with an unknown log end; those in the ISR count as caught
        up now, so none is dropped before it has had ``replica.lag.time.max.ms`` to fetch.
        """
        now_ms = self._clock.now_ms()
        end_offset = partition.log.log_end_offset
        for replica in partition.remote_replicas.values():
            replica.log_end_offset = -1
            replica.last_fetch_leader_log_end_offset = -1
            replica.last_fetch_time_ms = now_ms
            replica.last_caught_up_time_ms = now_ms if replica.broker_id in state.isr else 0
        self._led[partition.topic_partition] = _Leadership(state, end_offset)

    def state_changed(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """A newer state of a partition still led here at the same epoch (an ISR change)."""
        led = self._led.get(tp)
        if led is None or state.version <= led.state.version:
            return
        led.state = state
        self._apply_isr(tp, state)

    def replicas_changed(self, partition: Partition, replicas: tuple[int, ...]) -> None:
        """``partition``, led here, is now assigned ``replicas`` (a reassignment): track
        the followers added, from an unknown log end and out of the ISR until they
        catch up, and forget those removed."""
        local = partition.local_broker_id
        now_ms = self._clock.now_ms()
        partition.assigned_replicas = replicas
        partition.remote_replicas = {
            broker_id: partition.remote_replicas.get(broker_id)
            or ReplicaState(broker_id, last_fetch_time_ms=now_ms)
            for broker_id in replicas
            if broker_id != local
        }
        partition.maybe_increment_leader_hw()

    def stopped_leading(self, tp: TopicPartition) -> None:
        """Forget a partition no longer led here."""
        self._led.pop(tp, None)

    # -- follower fetches ------------------------------------------------------------

    def on_follower_fetch(self, partition: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched ``partition`` from ``fetch_offset``: update it, maybe expand."""
        replica = partition.remote_replicas.get(replica_id)
        led = self._led.get(partition.topic_partition)
        if replica is None or led is None or not partition.is_leader:
            return
        record_follower_fetch(
            replica, fetch_offset, partition.log.log_end_offset, self._clock.now_ms()
        )
        if (
            replica_id not in partition.isr
            and replica.log_end_offset >= partition.log.high_watermark
            and replica.log_end_offset >= led.epoch_start_offset
        ):
            _log.info(
                "expanding ISR of %s from %s to add %d",
                partition.topic_partition,
                sorted(partition.isr),
                replica_id,
            )
            self._propose(partition.topic_partition, (*partition.isr, replica_id))

    def maybe_shrink_isr(self) -> None:
        """Drop from each ISR the followers not caught up for ``replica.lag.time.max.ms``."""
        now_ms = self._clock.now_ms()
        for tp in list(self._led):
            partition = self._replica_manager.get_partition(tp)
            if partition is None or not partition.is_leader:
                continue
            lagging = {
                broker_id
                for broker_id in partition.isr
                if broker_id != partition.local_broker_id
                and (replica := partition.remote_replicas.get(broker_id)) is not None
                and now_ms - replica.last_caught_up_time_ms > self.replica_lag_time_max_ms
            }
            if lagging:
                _log.info(
                    "shrinking ISR of %s from %s: %s not caught up for %d ms",
                    tp,
                    sorted(partition.isr),
                    sorted(lagging),
                    self.replica_lag_time_max_ms,
                )
                self._propose(tp, tuple(partition.isr - lagging))

    # -- writes ----------------------------------------------------------------------

    def _propose(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        led = self._led.get(tp)
        if led is None or led.write_in_flight:
            return
        led.write_in_flight = True
        task = asyncio.get_running_loop().create_task(self._write(tp, led, led.state.with_isr(isr)))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, tp: TopicPartition, led: _Leadership, proposed: LeaderAndIsr) -> None:
        try:
            written = await self._writer(tp, proposed)
        except Exception:
            _log.exception("writing the ISR of %s failed", tp)
            written = None
        finally:
            led.write_in_flight = False
        if written is None:
            _log.info("ISR change of %s lost to a newer state; waiting for it", tp)
            return
        if self._led.get(tp) is led and written.version > led.state.version:
            led.state = written
            self._apply_isr(tp, written)

    def _apply_isr(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """Make ``state``'s ISR the partition's, then move the HW and wake waiters."""
        partition = self._replica_manager.get_partition(tp)
        if partition is None or not partition.is_leader:
            return
        partition.isr = set(state.isr)
        partition.maybe_increment_leader_hw()
        # Even without a HW move, produces re-check the ISR against min.insync.replicas.
        key = TopicPartitionOperationKey(tp.topic, tp.partition)
        for purgatory in self._replica_manager.purgatories:
            purgatory.check_and_complete(key)
