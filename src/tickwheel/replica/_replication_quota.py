"""``ReplicationQuota``: Kafka's ``ReplicationQuotaManager``, the replication throttle.

A reassignment copies a partition's whole log to its new replicas; the throttle keeps
that copy from taking the bandwidth producers and in-sync followers need. Each broker
has two quotas, each a bound in bytes per second over the replication traffic of the
partitions it throttles:

- the *leader* quota (``leader.replication.throttled.rate``), over what this broker
  sends followers, for the partitions whose ``leader.replication.throttled.replicas``
  names this broker (``partition:broker,...``, or ``*`` for every replica);
- the *follower* quota (``follower.replication.throttled.rate``), over what this broker
  fetches as a follower, for those whose ``follower.replication.throttled.replicas``
  names it.

Both rates are dynamic broker configs, the lists topic configs; the defaults throttle
nothing (no partition listed, an unbounded rate). The rate is Kafka's sampled rate over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``
(the ``RateMeter`` injected). How each side uses it, as Kafka's does:

- leader: a follower's fetch of a throttled partition that follower is not in sync on
  reads nothing while the quota is exceeded (``should_throttle``), and its parked fetch
  does not count the partition's bytes; what a follower fetch returns of throttled
  partitions is recorded;
- follower: while the quota is exceeded, the fetcher leaves the throttled partitions on
  which this broker is not in sync out of its fetch, and records what it appends of
  throttled ones.

In-sync replicas are never throttled, so a throttle never holds up acks=all produces.
(Kafka's follower judges "in sync" by its lag behind the leader's high watermark; here
both sides judge by the ISR the partition state holds.)

Concurrency: the broker's event loop only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Protocol

from tickwheel.log import throttled_replicas
from tickwheel.replica._types import TopicPartition
from tickwheel.timer import Clock

UNBOUNDED_RATE = 2**63 - 1
"""Kafka's default for both throttled rates (``Long.MAX_VALUE``): no throttle."""


class RateMeter(Protocol):
    """A sampled rate in values per second (Kafka's ``Rate`` over a ``SampledStat``)."""

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms``."""
        ...

    def rate_per_s(self, now_ms: int) -> float:
        """The rate at ``now_ms``."""
        ...


def throttled_partitions(name: str, value: str | None, broker_id: int) -> frozenset[int] | None:
    """The partitions that the topic config ``name`` (holding ``value``) throttles on
    ``broker_id``: those listed with it; None for ``*`` (every partition); empty when
    unset. ValueError if the value is malformed."""
    if value is None:
        return frozenset()
    pairs = throttled_replicas(name, value)
    if pairs is None:
        return None
    return frozenset(partition for partition, broker in pairs if broker == broker_id)


class ReplicationQuota:
    """The throttled partitions of one side of replication and the rate bounding them."""

    def __init__(self, rate: RateMeter, clock: Clock) -> None:
        self._rate = rate
        self._clock = clock
        self.bound_bytes_per_s: float = math.inf
        # Topic -> its throttled partitions (None: all of them).
        self._throttled: dict[str, frozenset[int] | None] = {}

    def update_quota(self, bytes_per_s: int) -> None:
        """Bound the rate at ``bytes_per_s`` (``UNBOUNDED_RATE``: no bound)."""
        self.bound_bytes_per_s = math.inf if bytes_per_s >= UNBOUNDED_RATE else bytes_per_s

    def mark_throttled(self, topic: str, partitions: frozenset[int] | None) -> None:
        """Throttle ``partitions`` of ``topic`` (None: every one; empty: none)."""
        if partitions is not None and not partitions:
            self._throttled.pop(topic, None)
        else:
            self._throttled[topic] = partitions

    def apply_topic_config(
        self, topic: str, name: str, configs: Mapping[str, str] | None, broker_id: int
    ) -> None:
        """Throttle what the topic config ``name`` lists for ``broker_id`` (a topic
        deleted, ``configs`` None, is throttled no more)."""
        value = None if configs is None else configs.get(name)
        self.mark_throttled(topic, throttled_partitions(name, value, broker_id))

    def is_throttled(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s replication is throttled on this side."""
        if tp.topic not in self._throttled:
            return False
        partitions = self._throttled[tp.topic]
        return partitions is None or tp.partition in partitions

    def is_quota_exceeded(self) -> bool:
        """Whether the measured rate is above the bound."""
        if math.isinf(self.bound_bytes_per_s):
            return False
        return self._rate.rate_per_s(self._clock.now_ms()) > self.bound_bytes_per_s

    def should_throttle(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's ``shouldLeaderThrottle``/``shouldFollowerThrottle``: a replica not
        in sync of a throttled partition, while the quota is exceeded."""
        return not in_sync and self.is_throttled(tp) and self.is_quota_exceeded()

    def record(self, size_bytes: int) -> None:
        """Count ``size_bytes`` of throttled replication traffic."""
        self._rate.record(size_bytes, self._clock.now_ms())

    def record_throttled(self, sizes: Iterable[tuple[TopicPartition, int]]) -> None:
        """Count the bytes of each throttled partition among ``sizes``."""
        if not self._throttled:
            return
        total = sum(size for tp, size in sizes if self.is_throttled(tp))
        if total:
            self.record(total)

    def byte_rate(self) -> float:
        """The measured rate, bytes per second (Kafka's ``byte-rate`` metric)."""
        return self._rate.rate_per_s(self._clock.now_ms())
