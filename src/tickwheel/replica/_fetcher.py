"""The follower side of replication: one fetcher per leader broker.

Kafka's ``ReplicaFetcherManager`` and ``ReplicaFetcherThread``, as asyncio tasks. For
every broker that leads partitions this broker follows, one ``ReplicaFetcher`` loops:

1. Send one Fetch for all those partitions, with this broker's id as ``replica_id``,
   each from the local log end offset, at the leader epoch this broker knows.
   The leader answers at once if it has data, otherwise it holds the fetch in its
   Fetch purgatory until an append wakes it or ``replica.fetch.wait.max.ms`` passes,
   so replication is pushed by long polls, not paced by polling.
2. Append each partition's records to the local log as a follower (the leader's
   offsets are kept), then take the leader's high watermark, capped by the local
   log end, and its log start offset.
3. The next fetch, from the new log end, is what tells the leader how far this
   follower got: its LEO, hence the HW, hence the waiting acks=all produces.

A partition whose replication this broker throttles as a follower
(``ReplicationQuota``) is left out of the fetches while the quota is exceeded, unless
this broker is in its ISR; what is appended of throttled partitions is recorded.

A partition whose answer is an error is left out of the fetches for
``replica.fetch.backoff.ms`` (typically a leader that does not know yet that it leads:
NOT_LEADER_OR_FOLLOWER, an epoch it has not seen), while the others go on; a leader
that cannot be reached delays them all as long.
A fetch offset out of the leader's range restarts the local log at the leader's log
start (its records were deleted) or cuts it back to the leader's high watermark.

Before its first fetch from a leader (a new leader, a new epoch, a restart), a
partition is truncated where its log and the leader's part (Kafka's KIP-101/279): an
OffsetsForLeaderEpoch asks the leader where this replica's latest leader epoch ends
on its log; the log is cut to that offset, or, when the leader only knows an older
epoch, to where both logs end that older epoch. Records a dead leader appended but
never replicated are so removed from a replica that rejoins, and every in-sync
replica holds the same bytes up to the high watermark. A log with no epochs (empty)
has nothing to cut; a leader that cannot answer is asked again after the backoff.

The network is behind ``FetchTransport`` (the cluster layer speaks the Kafka protocol
over TCP), so this module is the replication logic only.

Concurrency: everything runs on the broker's event loop; each fetcher is one task.
Partitions are added and removed on the loop between fetches; a response for a
partition removed (or re-assigned to another leader) meanwhile is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel._ratelimit import RateLimitedLog
from tickwheel._tasks import cancel_and_wait
from tickwheel.log import LogError
from tickwheel.replica._manager import ReplicaManager
from tickwheel.replica._partition import Partition
from tickwheel.replica._types import TopicPartition

_log = logging.getLogger(__name__)
# A leader that stays unreachable, or keeps answering an error, is logged with backoff
# and a count, not once per replica.fetch.backoff.ms.
_repeated = RateLimitedLog(_log)
_MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """Kafka's ``replica.fetch.*`` settings."""

    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    backoff_ms: int = 1000


@dataclass(frozen=True, slots=True)
class FollowerFetchPartition:
    """One partition of a follower's fetch."""

    topic_partition: TopicPartition
    fetch_offset: int
    leader_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FollowerFetchRequest:
    """A follower's Fetch request."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FollowerFetchPartition, ...]


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """A leader's answer to OffsetsForLeaderEpoch for one partition."""

    error_code: int
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class FollowerFetchResult:
    """What the leader answered for one partition."""

    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | None = None


class FetchTransport(Protocol):
    """Sends a follower's fetch to a leader broker and returns its answer."""

    async def fetch(
        self, leader_id: int, request: FollowerFetchRequest
    ) -> Mapping[TopicPartition, FollowerFetchResult]:
        """The leader's answer; raises ``OSError`` (or ``TimeoutError``) if unreachable."""
        ...

    async def end_offsets_for_epochs(
        self, leader_id: int, replica_id: int, epochs: Mapping[TopicPartition, tuple[int, int]]
    ) -> Mapping[TopicPartition, EpochEndOffset]:
        """OffsetsForLeaderEpoch: per partition (current leader epoch, epoch asked about)."""
        ...

    async def disconnect(self, leader_id: int) -> None:
        """Close the connection to ``leader_id``, if any."""
        ...


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader, in a loop."""

    def __init__(
        self,
        leader_id: int,
        replica_manager: ReplicaManager,
        transport: FetchTransport,
        config: FetcherConfig,
    ) -> None:
        self.leader_id = leader_id
        self._replica_manager = replica_manager
        self._transport = transport
        self._config = config
        self.partitions: dict[TopicPartition, int] = {}
        """Followed partitions -> the leader epoch they are followed at."""
        self._delayed_until_s: dict[TopicPartition, float] = {}
        self._truncating: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        """Fetch ``tp`` at ``leader_epoch``, after truncating it, without delay."""
        self.partitions[tp] = leader_epoch
        self._truncating.add(tp)
        self._delayed_until_s.pop(tp, None)

    def remove(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp``."""
        self.partitions.pop(tp, None)
        self._truncating.discard(tp)
        self._delayed_until_s.pop(tp, None)

    def start(self) -> None:
        """Start the fetch loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{self.leader_id}"
        )
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # The loop only ends when stopped; anything else is a bug worth a traceback.
        if not task.cancelled() and task.exception() is not None:
            _log.error(
                "replica fetcher for leader %d died", self.leader_id, exc_info=task.exception()
            )

    async def stop(self) -> None:
        """Stop fetching and close the connection to the leader."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        await self._transport.disconnect(self.leader_id)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff_s = self._config.backoff_ms / _MS_PER_S
        while True:
            if self._truncating:
                try:
                    await self._truncate()
                except (OSError, TimeoutError, EOFError) as exc:
                    _repeated.log(
                        logging.WARNING,
                        ("unreachable", self.leader_id),
                        "asking leader %d where our epochs end failed: %r; backing off",
                        self.leader_id,
                        exc,
                    )
                    await self._transport.disconnect(self.leader_id)
                    await asyncio.sleep(backoff_s)
                    continue
            now_s = loop.time()
            request = self._build_request(now_s)
            if not request.partitions:
                waits = [t - now_s for t in self._delayed_until_s.values() if t > now_s]
                await asyncio.sleep(min(waits, default=backoff_s))
                continue
            try:
                results = await self._transport.fetch(self.leader_id, request)
            except (OSError, TimeoutError, EOFError) as exc:
                _repeated.log(
                    logging.WARNING,
                    ("unreachable", self.leader_id),
                    "fetch from leader %d failed: %r; backing off",
                    self.leader_id,
                    exc,
                )
                await self._transport.disconnect(self.leader_id)
                await asyncio.sleep(backoff_s)
                continue
            for tp in self._process(request, results):
                self._delayed_until_s[tp] = loop.time() + backoff_s

    async def _truncate(self) -> None:
        """Cut each partition awaiting truncation where its log and the leader's part."""
        asked: dict[TopicPartition, tuple[int, int]] = {}
        for tp in list(self._truncating):
            partition = self._replica_manager.get_partition(tp)
            latest = None if partition is None or partition.offline else partition.log.latest_epoch
            if latest is None:
                # Nothing here (or nothing readable): no epoch to agree on.
                self._truncating.discard(tp)
            else:
                asked[tp] = (self.partitions[tp], latest)
        if not asked:
            return
        answers = await self._transport.end_offsets_for_epochs(
            self.leader_id, self._replica_manager.broker_id, asked
        )
        for tp, (leader_epoch, _) in asked.items():
            answer = answers.get(tp)
            partition = self._replica_manager.get_partition(tp)
            if tp not in self._truncating or self.partitions.get(tp) != leader_epoch:
                continue  # Removed or re-added meanwhile: asked again if needed.
            if answer is None or answer.error_code != ErrorCode.none or partition is None:
                continue  # The next round asks again.
            if partition.offline:
                self._truncating.discard(tp)  # Its directory failed while we asked.
                continue
            try:
                if self._cut(partition, answer):
                    self._truncating.discard(tp)
            except (LogError, OSError) as exc:
                self._truncating.discard(tp)
                self._replica_manager.handle_storage_error(tp, exc)

    def _cut(self, partition: Partition, answer: EpochEndOffset) -> bool:
        """Truncate as the leader's answer says; True when the logs now agree.

        When this log holds no entry for the epoch the leader answered with, the cut
        is to where this log's older epoch ends, and the leader is asked again about
        the epoch this log has last (KIP-279); False then.
        """
        log = partition.log
        settled = True
        if answer.end_offset < 0:
            # The leader holds no epoch this old: keep what is known to be committed.
            offset = log.high_watermark
        else:
            # Where this log ends the leader's epoch (or the last one before it).
            own_epoch, own_end = log.end_offset_for_epoch(answer.leader_epoch)
            offset = answer.end_offset if own_end < 0 else min(answer.end_offset, own_end)
            settled = own_epoch == answer.leader_epoch or own_end < 0
        if offset < log.log_end_offset:
            _log.info(
                "%s: truncating from %d to %d, where leader %d's log parts from ours (epoch %d)",
                partition.topic_partition,
                log.log_end_offset,
                offset,
                self.leader_id,
                answer.leader_epoch,
            )
            log.truncate_to(offset)
        return settled

    def _build_request(self, now_s: float) -> FollowerFetchRequest:
        partitions = []
        quota = self._replica_manager.follower_quota
        local = self._replica_manager.broker_id
        for tp, epoch in self.partitions.items():
            partition = self._replica_manager.get_partition(tp)
            if (
                partition is None
                or partition.offline
                or tp in self._truncating
                or self._delayed_until_s.get(tp, 0.0) > now_s
                or (quota is not None and quota.should_throttle(tp, local in partition.isr))
            ):
                continue
            log = partition.log
            partitions.append(
                FollowerFetchPartition(
                    tp, log.log_end_offset, epoch, log.log_start_offset, self._config.max_bytes
                )
            )
        return FollowerFetchRequest(
            replica_id=self._replica_manager.broker_id,
            max_wait_ms=self._config.wait_max_ms,
            min_bytes=self._config.min_bytes,
            max_bytes=self._config.response_max_bytes,
            partitions=tuple(partitions),
        )

    def _process(
        self, request: FollowerFetchRequest, results: Mapping[TopicPartition, FollowerFetchResult]
    ) -> list[TopicPartition]:
        """Apply a response; returns the partitions that failed (to be backed off)."""
        failed = []
        for sent in request.partitions:
            tp = sent.topic_partition
            result = results.get(tp)
            partition = self._replica_manager.get_partition(tp)
            if (
                result is None
                or partition is None
                or self.partitions.get(tp) != sent.leader_epoch
                or partition.log.log_end_offset != sent.fetch_offset
            ):
                continue
            if self._apply(partition, sent, result):
                self._delayed_until_s.pop(tp, None)
            else:
                failed.append(tp)
        return failed

    def _apply(
        self, partition: Partition, sent: FollowerFetchPartition, result: FollowerFetchResult
    ) -> bool:
        log = partition.log
        tp = partition.topic_partition
        if result.error_code == ErrorCode.offset_out_of_range:
            try:
                self._handle_out_of_range(partition, sent, result)
            except (LogError, OSError) as exc:
                self._replica_manager.handle_storage_error(tp, exc)
                return False
            return True
        if result.error_code != ErrorCode.none:
            _repeated.log(
                logging.INFO,
                ("error", self.leader_id, tp, result.error_code),
                "leader %d answered %s for %s; backing off",
                self.leader_id,
                ErrorCode(result.error_code).name,
                tp,
            )
            return False
        try:
            if result.records:
                log.append_as_follower(result.records)
                quota = self._replica_manager.follower_quota
                if quota is not None and quota.is_throttled(tp):
                    quota.record(len(result.records))
            # The leader's HW may be ahead of what this follower holds yet.
            log.maybe_increment_high_watermark(min(result.high_watermark, log.log_end_offset))
            if log.log_start_offset < result.log_start_offset <= log.high_watermark:
                log.delete_records_before(result.log_start_offset)
        except (LogError, OSError) as exc:
            _log.error("cannot append the leader's records to %s: %s", tp, exc)
            self._replica_manager.handle_storage_error(tp, exc)
            return False
        return True

    def _handle_out_of_range(
        self, partition: Partition, sent: FollowerFetchPartition, result: FollowerFetchResult
    ) -> None:
        log = partition.log
        if result.log_start_offset > sent.fetch_offset:
            _log.warning(
                "%s: leader %d starts at %d, past our log end %d; restarting the log there",
                partition.topic_partition,
                self.leader_id,
                result.log_start_offset,
                sent.fetch_offset,
            )
            log.truncate_fully_and_start_at(result.log_start_offset)
        elif 0 <= result.high_watermark < sent.fetch_offset:
            _log.warning(
                "%s: our log end %d is past leader %d's high watermark %d; truncating",
                partition.topic_partition,
                sent.fetch_offset,
                self.leader_id,
                result.high_watermark,
            )
            log.truncate_to(result.high_watermark)


class ReplicaFetcherManager:
    """One ``ReplicaFetcher`` per leader broker, for the partitions this broker follows."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        transport: FetchTransport,
        config: FetcherConfig | None = None,
    ) -> None:
        self._replica_manager = replica_manager
        self._transport = transport
        self._config = config or FetcherConfig()
        self._fetchers: dict[int, ReplicaFetcher] = {}

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The leader ``tp`` is fetched from, or None if it is not followed."""
        for leader_id, fetcher in self._fetchers.items():
            if tp in fetcher.partitions:
                return leader_id
        return None

    async def follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``tp`` from ``leader_id`` at ``leader_epoch`` (moving it from any other)."""
        current = self.leader_of(tp)
        if current is not None and current != leader_id:
            await self.unfollow([tp])
        fetcher = self._fetchers.get(leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                leader_id, self._replica_manager, self._transport, self._config
            )
            self._fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.add(tp, leader_epoch)

    async def unfollow(self, tps: Sequence[TopicPartition]) -> None:
        """Stop fetching ``tps``; a fetcher left with nothing to fetch stops."""
        for leader_id in list(self._fetchers):
            fetcher = self._fetchers[leader_id]
            for tp in tps:
                fetcher.remove(tp)
            if not fetcher.partitions:
                del self._fetchers[leader_id]
                await fetcher.stop()

    async def shutdown(self) -> None:
        """Stop every fetcher."""
        fetchers, self._fetchers = self._fetchers, {}
        for fetcher in fetchers.values():
            await fetcher.stop()
