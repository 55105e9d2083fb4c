"""``Controller``: the one broker that moves leadership when brokers die or return.

Kafka's ZooKeeper-mode ``KafkaController``, reduced to what leadership needs. The
broker that creates the ephemeral ``/controller`` first is the controller (its epoch
in ``/controller_epoch``); when its session ends, every broker's watch fires and the
first to create the node again takes over. Its decisions:

- When the live brokers change (``/brokers/ids``), and once when it takes over, every
  partition is checked (``_election``): a partition whose leader is not live gets the
  first live in-sync replica in assignment order, at the next leader epoch, or goes
  offline (leader -1) when none is live, unless ``unclean.leader.election.enable``
  (broker default, topic override) lets an out-of-sync replica lead; a live leader's
  ISR loses the brokers that died. A returning broker that was the last in sync brings
  its offline partitions back.
- ``controlled_shutdown`` (this broker, the controller, told to stop): its
  leaderships move to other in-sync replicas, and it leaves every ISR, before it goes;
  it is not elected again until it re-registers. (Another broker hands its own
  leaderships over itself: see ``ClusterNode.controlled_shutdown``.)
- ``elect_leaders`` (ElectLeaders): preferred or unclean election of given partitions.
- ``alter_reassignments`` (AlterPartitionReassignments): Kafka's ZooKeeper-mode
  ``onPartitionReassignment``, below.
- Eligible leader replicas (KIP-966, ``_elr``), while the finalized feature
  ``eligible.leader.replicas.version`` is 1: every state this controller (or a
  leader, through ``with_elr``) writes keeps the partition's ELR and last known
  leader; a broker change takes the dead brokers out of the ISR, the leader too, and
  elects from the ELR when the ISR is empty, before any unclean election. A broker
  whose registration says it did not shut down cleanly (``previous_broker_epoch``
  -1, read afresh from its znode) leaves every ISR and ELR it is in when it
  registers, then is electable again (Kafka fences it until then); the controller
  then rewrites that registration with the broker's own epoch, so a controller
  taking over later (which treats every live broker as newly registered, since
  brokers may have registered while there was none) does not take it out again.
  ``clear_elr`` empties the ELRs when the feature is turned off or a topic's
  ``min.insync.replicas`` changes (every topic's when the cluster default does), as
  Kafka's ``ClearElrRecord``.
- ``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``,
  a broker whose share of non-preferred leaderships exceeds
  ``leader.imbalance.per.broker.percentage`` gets its preferred leaderships back.

Reassignment (``_reassignment`` has the replica sets: RS, ORS, TRS, AR, RR), in
Kafka's phases, each step a fenced ZooKeeper write:

- U: the topic znode gets ``RS = TRS + ORS`` with AR and RR (a reassignment
  replacing another drops from the ISR the replicas neither keeps, in the same
  transaction).
- A (TRS not all in the ISR): the leader epoch is bumped. Every broker learns RS from
  the topic's watch: an added replica starts following the leader, which tracks it and
  adds it to the ISR once caught up (``IsrManager``).
- B (every replica of TRS in the ISR; checked on each state change of the
  partition): the leader stays if it is in TRS and live, else the first live in-sync
  replica of TRS leads; the ISR loses RR; the leader epoch is bumped; and the topic
  znode gets ``RS = TRS`` with no AR or RR, all in one transaction, the assignment
  first, so that a leader never takes the new state with RR still assigned (Kafka
  sends that LeaderAndIsr with ``RS = TRS`` before it writes the assignment; here
  both travel through the znodes, so they are written together, which also leaves no
  moment at which a controller failing over could lose ORS). Each broker of RR, no
  longer assigned, deletes its replica (Kafka's StopReplica with delete).

A cancellation (null replicas) is a reassignment back to ORS: the added replicas are
dropped from the ISR and deleted, and phase B completes at once. A controller that
takes over finds the reassignments in progress in the topic znodes and completes
those whose target is in sync. A reassignment whose target never comes into sync
(a target broker dead) stays in progress until it is cancelled or replaced.

How brokers learn: every decision is a write of the partition's state znode, which
every broker watches already (``ClusterNode``), so there is no LeaderAndIsr request:
one path carries leadership to every broker, whether the controller, a leader
shrinking its ISR or a broker restarting decided it, and a broker that missed
nothing needs nothing resent. Every write is fenced twice: conditional on the state
znode's version (a concurrent ISR change makes it re-read and decide again) and, in
the same transaction, on ``/controller_epoch`` still being this controller's, so a
deposed controller can never overwrite a newer decision.

Cost: each changed partition is one fenced transaction. A broker change (a dead
leader: a new leader for each partition it led and a smaller ISR for every partition
it was in, at replication factor 3 with three brokers every partition) decides every
partition first and then sends all their transactions at once, pipelined, waiting
for the replies together, as Kafka's controller sends its ``SetData`` requests
(``KafkaZkClient.updateLeaderAndIsr``): the round costs about one ZooKeeper round
trip plus ZooKeeper's own work per write, not a round trip and a thread hop per
partition. A write that lost a race is decided again on its own. Other decisions
(controlled shutdown, ElectLeaders, rebalancing) write one partition at a time.
Each broker-change round is logged at INFO with how many states it wrote and how long
the writes took. (Kafka also batches its LeaderAndIsr and UpdateMetadata requests per
broker; here brokers learn from their watches of the state znodes, nothing is sent.)

Concurrency: lives on the broker's event loop; ZooKeeper writes run in worker
threads. Checks are serialised by one ``asyncio.Lock``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from tickwheel.cluster._election import (
    ElectionError,
    drop_dead_from_isr,
    elect_offline,
    elect_preferred,
    elect_unclean,
)
from tickwheel.cluster._elr import cleared, effective_min_isr, elect, tracked
from tickwheel.cluster._metadata import MetadataCache
from tickwheel.cluster._reassignment import ReplicaAssignment, invalid_target
from tickwheel.cluster._zk import ZK_UNAVAILABLE, ControllerEpoch, ControllerMovedError, ZkClient
from tickwheel.replica import NO_LEADER, LeaderAndIsr, TopicPartition

_log = logging.getLogger(__name__)
_WRITE_ATTEMPTS = 5
"""How often a decision is re-made after losing a race for the state znode."""
_TRUE = "true"


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Kafka's controller settings (broker properties)."""

    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    min_insync_replicas: int = 1
    """The broker default of ``min.insync.replicas``, which the ELR rules apply."""


Decide = Callable[[TopicPartition, tuple[int, ...], LeaderAndIsr, set[int]], LeaderAndIsr | None]
"""A rule: (partition, replicas, its state, electable brokers) -> new state or None."""


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """Kafka's error for one partition of AlterPartitionReassignments, and its message."""

    error_code: ErrorCode
    message: str | None = None


_REASSIGNED = ReassignmentResult(ErrorCode.none)


@dataclass(frozen=True, slots=True)
class Decision:
    """What deciding one partition came to: Kafka's error, and the state written if any."""

    error_code: ErrorCode
    written: LeaderAndIsr | None = None


class Controller:
    """Leader elections for the whole cluster, while this broker is the controller."""

    def __init__(
        self,
        zk: ZkClient,
        cache: MetadataCache,
        settings: ControllerSettings,
        record: Callable[[TopicPartition, LeaderAndIsr], None],
        elr_enabled: Callable[[], bool],
    ) -> None:
        self._zk = zk
        self._cache = cache
        # Hands a written state to this broker's own event queue, where it is applied
        # in order with the watches' events (which bring it again, and are ignored).
        self._record = record
        # What this controller wrote, until the cache has applied it: a decision made
        # while the write is still queued must start from it, not from the older
        # cached state (which could, say, still name a leader just taken offline).
        self._written: dict[TopicPartition, LeaderAndIsr] = {}
        # The same for the assignments it wrote (reassignments).
        self._assignments: dict[TopicPartition, ReplicaAssignment] = {}
        self._settings = settings
        self._elr_enabled = elr_enabled
        # The cluster's dynamic default of min.insync.replicas, if one is set.
        self._default_min_isr: int | None = None
        # The live brokers of the last broker change, and those of the round being
        # decided that registered after an unclean shutdown.
        self._registered: set[int] = set()
        self._unclean_shutdown: set[int] = set()
        self._epoch: ControllerEpoch | None = None
        self._shutting_down: set[int] = set()
        self._lock = asyncio.Lock()
        self._rebalance: asyncio.Task[None] | None = None
        # Seconds spent waiting on ZooKeeper writes since the current round began.
        self._zk_write_s = 0.0

    @property
    def active(self) -> bool:
        """Whether this broker is the controller."""
        return self._epoch is not None

    @property
    def epoch(self) -> int:
        """The controller epoch this broker won (0 when it is not the controller)."""
        return 0 if self._epoch is None else self._epoch.epoch

    async def activate(self, epoch: ControllerEpoch) -> None:
        """Take over at ``epoch``: check every partition, start the rebalance task."""
        self._epoch = epoch
        self._shutting_down.clear()
        self._written.clear()
        self._assignments.clear()
        self._registered.clear()
        if self._settings.auto_leader_rebalance_enable and self._rebalance is None:
            self._rebalance = asyncio.get_running_loop().create_task(
                self._rebalance_loop(), name="leader-rebalance"
            )
        await self.on_brokers_changed()
        for tp in self.reassigning():
            await self.on_partition_state(tp)

    def deactivate(self) -> None:
        """Stop deciding (another broker was elected, or this one stops)."""
        if self._epoch is not None:
            _log.info("broker resigns as controller (epoch %d)", self._epoch.epoch)
        self._epoch = None
        if self._rebalance is not None:
            self._rebalance.cancel()
            self._rebalance = None

    def _deposed(self) -> None:
        """A fenced write found a newer controller: stop deciding."""
        _log.warning("a newer controller was elected; broker stops deciding")
        self.deactivate()

    # -- broker changes ----------------------------------------------------------------

    def _current(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """``tp``'s newest known state: cached, or written here and not yet applied."""
        cached = self._cache.partition_states.get(tp)
        written = self._written.get(tp)
        if written is None:
            return cached
        if cached is not None and cached.version >= written.version:
            del self._written[tp]
            return cached
        return written

    def _electable(self) -> set[int]:
        return set(self._cache.brokers) - self._shutting_down

    def _unclean(self, topic: str) -> bool:
        info = self._cache.topics.get(topic)
        override = info.configs.get("unclean.leader.election.enable") if info else None
        if override is None:
            return self._settings.unclean_leader_election_enable
        return override.strip().lower() == _TRUE

    def set_default_min_isr(self, value: str | None) -> bool:
        """Take the cluster's dynamic default of ``min.insync.replicas`` (None: the
        broker's static one); True if the default in force changed."""
        dynamic = int(value) if value is not None and value.strip().isdigit() else None
        changed = dynamic != self._default_min_isr
        self._default_min_isr = dynamic
        return changed

    def _min_isr(self, tp: TopicPartition) -> int:
        info = self._cache.topics.get(tp.topic)
        override = info.configs.get("min.insync.replicas") if info else None
        configured = self._default_min_isr or self._settings.min_insync_replicas
        if override is not None and override.strip().isdigit():
            configured = int(override)
        return effective_min_isr(configured, len(self._cache.replicas(tp)))

    def with_elr(self, tp: TopicPartition, old: LeaderAndIsr, new: LeaderAndIsr) -> LeaderAndIsr:
        """``new`` (decided from ``old``) with the ELR and last known ELR it gets: kept
        by the rules while the feature is on, empty while it is off."""
        if self._elr_enabled():
            return tracked(
                old, new, min_isr=self._min_isr(tp), unclean_shutdown=self._unclean_shutdown
            )
        if new.elr or new.last_known_elr:
            return replace(new, elr=(), last_known_elr=())
        return new

    async def on_brokers_changed(self) -> None:
        """Re-elect the partitions whose leader died; drop dead brokers from ISRs; take
        brokers back from an unclean shutdown out of the ELRs."""
        if not self.active:
            return
        live = set(self._cache.brokers)
        self._shutting_down &= live
        registered = live - self._registered
        unclean: set[int] = set()
        if registered and self._elr_enabled():
            unclean = await asyncio.to_thread(self._zk.uncleanly_registered, registered)
        self._registered = live
        async with self._lock:
            for unclean_shutdown in ([unclean] if unclean else []) + [set()]:
                self._unclean_shutdown = unclean_shutdown
                await self._broker_change_round()
        if unclean:
            await asyncio.to_thread(self._zk.mark_registered_cleanly, unclean)

    async def _broker_change_round(self) -> None:
        if self._unclean_shutdown:
            _log.info(
                "brokers %s registered after an unclean shutdown: out of every ISR and ELR",
                sorted(self._unclean_shutdown),
            )
        started_s = time.perf_counter()
        self._zk_write_s = 0.0
        tps = sorted(self._cache.partition_states)
        decisions = await self._decide_pipelined(tps, self._after_broker_change)
        written = sum(1 for decision in decisions.values() if decision.written is not None)
        if written:
            _log.info(
                "broker change: wrote %d of %d partition states in %.0f ms, %.0f ms of "
                "it in ZooKeeper writes",
                written,
                len(tps),
                (time.perf_counter() - started_s) * 1000,
                self._zk_write_s * 1000,
            )

    async def clear_elr(self, topic: str | None) -> None:
        """Empty the ELR and last known ELR of ``topic``'s partitions (None: every
        topic's), as Kafka's ``ClearElrRecord``."""
        if not self.active:
            return

        def clear(
            _tp: TopicPartition, _replicas: tuple[int, ...], state: LeaderAndIsr, _live: set[int]
        ) -> LeaderAndIsr | None:
            return cleared(state, controller_epoch=self.epoch)

        async with self._lock:
            tps = [tp for tp in self._cache.partition_states if topic in (None, tp.topic)]
            await self._decide_pipelined(sorted(tps), clear, keep_elr=False)

    async def _decide_each(
        self, tps: Iterable[TopicPartition], decide: Decide, *, keep_elr: bool = True
    ) -> dict[TopicPartition, Decision]:
        """``_decide`` for each partition; one that fails unexpectedly is logged and
        answered UNKNOWN_SERVER_ERROR, and the others are still decided."""
        decisions = {}
        for tp in tps:
            try:
                decisions[tp] = await self._decide(tp, decide, keep_elr=keep_elr)
            except ZK_UNAVAILABLE as exc:
                _log.warning("deciding the leadership of %s failed: ZooKeeper %r", tp, exc)
                decisions[tp] = Decision(ErrorCode.unknown_server_error)
            except Exception:
                _log.exception("deciding the leadership of %s failed", tp)
                decisions[tp] = Decision(ErrorCode.unknown_server_error)
        return decisions

    async def _decide_pipelined(
        self, tps: Iterable[TopicPartition], decide: Decide, *, keep_elr: bool = True
    ) -> dict[TopicPartition, Decision]:
        """``_decide_each``, with every write sent at once (see the module docstring);
        the partitions whose write lost a race are decided again one by one."""
        epoch = self._epoch
        decisions: dict[TopicPartition, Decision] = {}
        planned: list[tuple[TopicPartition, LeaderAndIsr, LeaderAndIsr]] = []
        live = self._electable()
        for tp in tps:
            state = self._current(tp)
            if epoch is None or state is None:
                decisions[tp] = Decision(
                    ErrorCode.not_controller
                    if epoch is None
                    else ErrorCode.unknown_topic_or_partition
                )
                continue
            try:
                new = decide(tp, self._cache.replicas(tp), state, live)
            except ElectionError as error:
                decisions[tp] = Decision(error.error_code)
                continue
            except Exception:
                _log.exception("deciding the leadership of %s failed", tp)
                decisions[tp] = Decision(ErrorCode.unknown_server_error)
                continue
            if new is None:
                decisions[tp] = Decision(ErrorCode.none)
            else:
                planned.append((tp, state, self.with_elr(tp, state, new) if keep_elr else new))
        if not planned or epoch is None:
            return decisions
        write_started_s = time.perf_counter()
        try:
            results = await asyncio.to_thread(
                self._zk.set_partition_states_fenced,
                [(tp, new) for tp, _, new in planned],
                epoch,
            )
        except ControllerMovedError:
            self._deposed()
            decisions.update({tp: Decision(ErrorCode.not_controller) for tp, _, _ in planned})
            return decisions
        finally:
            self._zk_write_s += time.perf_counter() - write_started_s
        lost = []
        for (tp, old, _), written in zip(planned, results, strict=True):
            if written is None:
                lost.append(tp)
                continue
            self._written[tp] = written
            self._record(tp, written)
            self._log_decision(tp, old, written)
            decisions[tp] = Decision(ErrorCode.none, written)
        decisions.update(await self._decide_each(lost, decide, keep_elr=keep_elr))
        return decisions

    def _after_broker_change(
        self, tp: TopicPartition, replicas: tuple[int, ...], state: LeaderAndIsr, live: set[int]
    ) -> LeaderAndIsr | None:
        unclean = self._unclean(tp.topic)
        if self._elr_enabled():
            return elect(
                replicas,
                state,
                live,
                min_isr=self._min_isr(tp),
                unclean=unclean,
                controller_epoch=self.epoch,
                unclean_shutdown=self._unclean_shutdown,
            )
        return elect_offline(
            replicas, state, live, unclean=unclean, controller_epoch=self.epoch
        ) or drop_dead_from_isr(state, live, controller_epoch=self.epoch)

    async def _decide(self, tp: TopicPartition, decide: Decide, *, keep_elr: bool) -> Decision:
        """Make and write ``decide``'s state for ``tp``, re-deciding after lost races;
        with ``keep_elr`` its ELRs are then kept by the rules (``with_elr``)."""
        state = self._current(tp)
        for _ in range(_WRITE_ATTEMPTS):
            epoch = self._epoch
            if epoch is None or state is None:
                missing = (
                    ErrorCode.not_controller
                    if epoch is None
                    else ErrorCode.unknown_topic_or_partition
                )
                return Decision(missing)
            replicas = self._cache.replicas(tp)
            try:
                new = decide(tp, replicas, state, self._electable())
            except ElectionError as error:
                return Decision(error.error_code)
            if new is None:
                return Decision(ErrorCode.none)
            if keep_elr:
                new = self.with_elr(tp, state, new)
            write_started_s = time.perf_counter()
            try:
                written = await asyncio.to_thread(
                    self._zk.set_partition_state_fenced, tp, new, epoch
                )
            except ControllerMovedError:
                self._deposed()
                return Decision(ErrorCode.not_controller)
            finally:
                self._zk_write_s += time.perf_counter() - write_started_s
            if written is not None:
                self._written[tp] = written
                self._record(tp, written)
                self._log_decision(tp, state, written)
                return Decision(ErrorCode.none, written)
            state = await asyncio.to_thread(self._zk.partition_state, tp)
        return Decision(ErrorCode.unknown_server_error)

    def _log_decision(self, tp: TopicPartition, old: LeaderAndIsr, new: LeaderAndIsr) -> None:
        if new.leader == old.leader:
            _log.info(
                "%s: ISR %s -> %s, ELR %s -> %s",
                tp,
                list(old.isr),
                list(new.isr),
                list(old.elr),
                list(new.elr),
            )
        elif new.leader == NO_LEADER:
            _log.warning(
                "%s: offline, no live in-sync replica (last ISR %s, ELR %s)",
                tp,
                list(new.isr),
                list(new.elr),
            )
        elif new.leader in old.elr:
            _log.info(
                "%s: leader %d elected from the ELR %s at epoch %d",
                tp,
                new.leader,
                list(old.elr),
                new.leader_epoch,
            )
        elif new.leader not in old.isr:
            _log.warning(
                "%s: unclean election of broker %d at epoch %d: records only the lost ISR "
                "%s held are gone",
                tp,
                new.leader,
                new.leader_epoch,
                list(old.isr),
            )
        else:
            _log.info(
                "%s: leader %d -> %d at epoch %d, ISR %s",
                tp,
                old.leader,
                new.leader,
                new.leader_epoch,
                list(new.isr),
            )

    # -- controlled shutdown ------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        """Move ``broker_id``'s leaderships away and drop it from every ISR; returns
        the partitions it still leads although another live in-sync replica could take
        them (a partition with none stays with it: there is no one to hand it to)."""
        if not self.active:
            raise ElectionError(ErrorCode.not_controller, "this broker is not the controller")
        self._shutting_down.add(broker_id)

        def away(
            _tp: TopicPartition, replicas: tuple[int, ...], state: LeaderAndIsr, live: set[int]
        ) -> LeaderAndIsr | None:
            if broker_id not in state.isr and state.leader != broker_id:
                return None
            if state.leader == broker_id:
                others = live - {broker_id}
                moved = elect_offline(
                    replicas, state, others, unclean=False, controller_epoch=self.epoch
                )
                # With no other in-sync replica it keeps leading until it is gone.
                return None if moved is None or moved.leader == NO_LEADER else moved
            if len(state.isr) == 1:
                return None
            isr = tuple(b for b in state.isr if b != broker_id)
            return LeaderAndIsr(state.leader, state.leader_epoch, isr, self.epoch, state.version)

        async with self._lock:
            decisions = await self._decide_each(sorted(self._cache.partition_states), away)
        others = self._electable() - {broker_id}
        latest = {
            tp: decisions[tp].written or state
            for tp, state in self._cache.partition_states.items()
            if tp in decisions
        }
        remaining = [
            tp
            for tp, state in latest.items()
            if state.leader == broker_id and others & set(state.isr)
        ]
        _log.info(
            "controlled shutdown of broker %d: %d leaderships remain", broker_id, len(remaining)
        )
        return sorted(remaining)

    # -- ElectLeaders and rebalancing ---------------------------------------------------

    async def elect_leaders(
        self, tps: Iterable[TopicPartition], *, preferred: bool
    ) -> dict[TopicPartition, Decision]:
        """Preferred (or unclean) election of each of ``tps``; Kafka's error per partition."""
        choose = elect_preferred if preferred else elect_unclean

        def decide(
            _tp: TopicPartition, replicas: tuple[int, ...], state: LeaderAndIsr, live: set[int]
        ) -> LeaderAndIsr | None:
            return choose(replicas, state, live, controller_epoch=self.epoch)

        async with self._lock:
            return await self._decide_each(tps, decide)

    def imbalanced(self) -> list[TopicPartition]:
        """Partitions to give back to their preferred leader: those of every broker whose
        share of non-preferred leaderships exceeds the allowed percentage."""
        live = self._electable()
        preferred_of: dict[int, list[TopicPartition]] = {}
        for tp in self._cache.partition_states:
            replicas = self._cache.replicas(tp)
            if replicas:
                preferred_of.setdefault(replicas[0], []).append(tp)
        chosen = []
        for broker, tps in preferred_of.items():
            if broker not in live:
                continue
            elsewhere = [tp for tp in tps if self._cache.partition_states[tp].leader != broker]
            ratio = len(elsewhere) * 100 / len(tps)
            if ratio > self._settings.leader_imbalance_per_broker_percentage:
                chosen += [tp for tp in elsewhere if broker in self._cache.partition_states[tp].isr]
        return sorted(chosen)

    async def _rebalance_loop(self) -> None:
        interval_s = self._settings.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval_s)
            try:
                chosen = self.imbalanced()
                if chosen:
                    _log.info("rebalancing %d leaderships to their preferred replicas", len(chosen))
                    await self.elect_leaders(chosen, preferred=True)
            except Exception:
                _log.exception("leader rebalance failed; trying again next interval")

    # -- partition reassignment ---------------------------------------------------------

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """``tp``'s newest known assignment: cached, or written here and not yet applied."""
        cached = self._cache.assignment(tp)
        written = self._assignments.get(tp)
        if written is None:
            return cached
        if cached == written or tp.topic not in self._cache.topics:  # applied, or deleted
            del self._assignments[tp]
            return cached
        return written

    def reassigning(self) -> list[TopicPartition]:
        """The partitions being reassigned."""
        known = {
            TopicPartition(topic, partition)
            for topic, info in self._cache.topics.items()
            for partition in (*info.adding, *info.removing)
        }
        return sorted(
            tp for tp in known | set(self._assignments) if self.assignment(tp).reassigning
        )

    async def alter_reassignments(
        self,
        targets: dict[TopicPartition, tuple[int, ...] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartition, ReassignmentResult]:
        """Start, replace or (target None) cancel the reassignment of each partition.

        Raises ``ElectionError`` (NOT_CONTROLLER) on a broker that is not the controller.
        """
        if not self.active:
            raise ElectionError(ErrorCode.not_controller, "this broker is not the controller")
        results = {}
        async with self._lock:
            for tp, target in targets.items():
                try:
                    results[tp] = await self._alter_reassignment(
                        tp, target, allow_replication_factor_change
                    )
                except ControllerMovedError:
                    self._deposed()
                    results[tp] = ReassignmentResult(ErrorCode.not_controller)
                except Exception:
                    _log.exception("reassigning %s failed", tp)
                    results[tp] = ReassignmentResult(ErrorCode.unknown_server_error)
        return results

    async def _alter_reassignment(
        self, tp: TopicPartition, target: tuple[int, ...] | None, allow_rf_change: bool
    ) -> ReassignmentResult:
        current = self.assignment(tp)
        if target is not None:
            invalid = invalid_target(current, target, self._cache.brokers)
            if invalid is not None:
                return ReassignmentResult(ErrorCode.invalid_replica_assignment, invalid)
            origin = current.origin
            if not allow_rf_change and origin and len(target) != len(origin):
                return ReassignmentResult(
                    ErrorCode.invalid_replication_factor,
                    f"The replication factor is changed from {len(origin)} to {len(target)} "
                    "but allowReplicationFactorChange is false",
                )
        elif not current.reassigning:
            return ReassignmentResult(ErrorCode.no_reassignment_in_progress)
        if not current.replicas:
            return ReassignmentResult(
                ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            )
        recorded = await self._reassign(
            tp, current.reassign_to(current.origin if target is None else target)
        )
        return _REASSIGNED if recorded else ReassignmentResult(ErrorCode.unknown_server_error)

    async def on_partition_state(self, tp: TopicPartition) -> None:
        """A newer state of ``tp`` was applied: complete its reassignment if its
        target is now in sync."""
        if not self.active or not self.assignment(tp).reassigning:
            return
        async with self._lock:
            assignment = self.assignment(tp)
            if not assignment.reassigning or not self._target_in_sync(tp, assignment):
                return
            try:
                _log.info(
                    "%s: target replicas %s caught up; completing the reassignment",
                    tp,
                    list(assignment.target),
                )
                await self._reassign(tp, assignment)
            except ControllerMovedError:
                self._deposed()
            except Exception:
                _log.exception("completing the reassignment of %s failed", tp)

    def _target_in_sync(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        state = self._current(tp)
        return state is not None and set(assignment.target) <= set(state.isr)

    async def _reassign(self, tp: TopicPartition, new: ReplicaAssignment) -> bool:
        """Kafka's ``onPartitionReassignment``: phase U, then A or B (module docstring);
        whether ``new`` was recorded (phase U's write)."""
        current = self.assignment(tp)
        if current != new:
            unneeded = set(current.replicas) - set(new.replicas)
            updated = await self._write_assignment(
                tp, new, self._leave_isr(unneeded) if unneeded else None
            )
            if updated.error_code != ErrorCode.none:
                _log.warning("%s: reassignment not recorded (%s)", tp, updated.error_code.name)
                return False
        if new.reassigning and not self._target_in_sync(tp, new):
            await self._decide(tp, self._bump_epoch, keep_elr=True)
            _log.info(
                "%s: reassigning to %s (adding %s, removing %s)",
                tp,
                list(new.target),
                list(new.adding),
                list(new.removing),
            )
            return True
        target = new.target
        completed = await self._write_assignment(
            tp, ReplicaAssignment(target), self._lead_from(target)
        )
        if completed.error_code != ErrorCode.none:
            _log.warning(
                "%s: no live in-sync replica of %s can lead (%s); the reassignment waits",
                tp,
                list(target),
                completed.error_code.name,
            )
            return True
        _log.info("%s: reassignment to %s complete", tp, list(target))
        return True

    async def _write_assignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment, decide: Decide | None = None
    ) -> Decision:
        """Write ``assignment`` and, if ``decide`` makes one, ``tp``'s new state, in one
        transaction. The state is not handed to ``record``: this broker's watches bring
        both, the replicas first, so that no leader takes the state with the replicas
        of before (and takes a removed replica back into the ISR, say)."""
        state = self._current(tp)
        for _ in range(_WRITE_ATTEMPTS):
            epoch = self._epoch
            if epoch is None:
                raise ControllerMovedError("this broker is no longer the controller")
            new = None
            if decide is not None and state is not None:
                try:
                    new = decide(tp, assignment.replicas, state, self._electable())
                except ElectionError as error:
                    return Decision(error.error_code)
                if new is not None:
                    new = self._within(assignment.replicas, self.with_elr(tp, state, new))
            written = await asyncio.to_thread(
                self._zk.set_partition_assignment_fenced,
                tp,
                assignment.replicas,
                assignment.adding,
                assignment.removing,
                epoch,
                new,
            )
            if new is None or written is not None:
                self._assignments[tp] = assignment
                if state is not None and written is not None:
                    self._written[tp] = written
                    self._log_decision(tp, state, written)
                return Decision(ErrorCode.none, written)
            state = await asyncio.to_thread(self._zk.partition_state, tp)
        return Decision(ErrorCode.unknown_server_error)

    @staticmethod
    def _within(replicas: tuple[int, ...], state: LeaderAndIsr) -> LeaderAndIsr:
        """``state`` with its ELR and last known ELR limited to ``replicas``: a replica
        a reassignment removes is no longer eligible to lead (Kafka's target ELR keeps
        only target replicas)."""
        elr = tuple(broker for broker in state.elr if broker in replicas)
        last_known_elr = tuple(broker for broker in state.last_known_elr if broker in replicas)
        if elr == state.elr and last_known_elr == state.last_known_elr:
            return state
        return replace(state, elr=elr, last_known_elr=last_known_elr)

    def _bump_epoch(
        self, _tp: TopicPartition, _replicas: tuple[int, ...], state: LeaderAndIsr, _live: set[int]
    ) -> LeaderAndIsr:
        return replace(state, leader_epoch=state.leader_epoch + 1, controller_epoch=self.epoch)

    def _leave_isr(self, gone: set[int]) -> Decide:
        """Kafka's OfflineReplica for replicas dropped from an assignment: out of the ISR
        (a leader among them leaves no leader until one is elected)."""

        def decide(
            _tp: TopicPartition, _replicas: tuple[int, ...], state: LeaderAndIsr, _live: set[int]
        ) -> LeaderAndIsr | None:
            if not gone & (set(state.isr) | {state.leader}):
                return None
            isr = tuple(r for r in state.isr if r not in gone)
            leader = NO_LEADER if state.leader in gone else state.leader
            return LeaderAndIsr(leader, state.leader_epoch + 1, isr, self.epoch, state.version)

        return decide

    def _lead_from(self, target: tuple[int, ...]) -> Decide:
        """Phase B's state: a leader in ``target`` (Kafka's
        ``ReassignPartitionLeaderElectionStrategy`` when the leader is not in it or not
        live), the ISR without the removed replicas, the next leader epoch."""

        def decide(
            _tp: TopicPartition, _replicas: tuple[int, ...], state: LeaderAndIsr, live: set[int]
        ) -> LeaderAndIsr:
            leader = state.leader
            if leader not in target or leader not in live:
                leader = next((r for r in target if r in live and r in state.isr), NO_LEADER)
            if leader == NO_LEADER:
                raise ElectionError(
                    ErrorCode.eligible_leaders_not_available,
                    f"no live in-sync replica of {list(target)}",
                )
            isr = tuple(r for r in state.isr if r in target)
            return LeaderAndIsr(leader, state.leader_epoch + 1, isr, self.epoch, state.version)

        return decide
