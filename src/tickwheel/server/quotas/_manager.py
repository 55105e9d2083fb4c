"""``ClientQuotas``: the broker's client quotas, measured per client and enforced.

The configs (``_entities``) are held by entity; one ``ClientQuotaManager`` per quota key
measures use against them, as Kafka's ``ClientQuotaManager`` (produce and fetch bytes),
``ClientRequestQuotaManager`` (request time) and ``ControllerMutationQuotaManager``
(partition mutations) do:

- a request's use is recorded in the ``WindowedRate`` of the metric tags its quota
  names (``find_quota``); a client with no quota is not measured at all;
- recording returns the throttle time (0 unless the rate is now over the quota), which
  the handler puts in its answer's ``throttle_time_ms``; the manager also mutes the
  request's connection for it (``throttle_channel``, KIP-219) and counts it in the
  tags' throttle-time statistics (Kafka's ``throttle-time`` sensor, avg and max);
- the controller mutation quota is checked before each topic (``MutationQuota``,
  Kafka's strict mode): a client already over it gets THROTTLING_QUOTA_EXCEEDED for the
  topic, and the partitions a request does mutate are recorded;
- a client's measurements are dropped once it has not been measured for an hour
  (Kafka's inactive sensor expiration), so client ids that come and go under a default
  quota do not pile up; the sweep runs at most once a minute, from a recording.

A config change takes effect at the next request: the rates already measured stay, the
bound they are held to changes. ``apply`` replaces one entity's configs (from the
topics registry at start-up, an AlterClientQuotas, or ZooKeeper).

Concurrency: the broker's event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from tickwheel.server.quotas._channel import throttle_channel
from tickwheel.server.quotas._entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    MetricTags,
    QuotaEntity,
    find_quota,
)
from tickwheel.server.quotas._rate import QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE_MS, WindowedRate
from tickwheel.timer import Clock

INACTIVE_EXPIRATION_MS: Final = 3_600_000
"""Kafka's ``InactiveSensorExpirationTimeSeconds`` (one hour), in milliseconds."""
_SWEEP_INTERVAL_MS: Final = 60_000
_MS_PER_S: Final = 1000.0


@dataclass(frozen=True, slots=True)
class QuotaWindows:
    """The windows rates are measured over: Kafka's ``quota.window.num`` and
    ``quota.window.size.seconds`` (or their ``controller.`` forms)."""

    samples: int = QUOTA_WINDOW_NUM
    window_ms: int = QUOTA_WINDOW_SIZE_MS

    def rate(self) -> WindowedRate:
        """A new rate over these windows."""
        return WindowedRate(self.samples, self.window_ms)


@dataclass(slots=True)
class ClientUse:
    """One client's (one metric tags') use of a quota and the throttling it got."""

    rate: WindowedRate
    throttle_time: WindowedRate
    throttled_requests: WindowedRate
    throttle_time_max_ms: int = 0
    last_recorded_ms: int = 0

    @classmethod
    def over(cls, windows: QuotaWindows, now_ms: int) -> ClientUse:
        """A client's use, measured over ``windows`` from ``now_ms``."""
        return cls(windows.rate(), windows.rate(), windows.rate(), last_recorded_ms=now_ms)

    def throttle_time_avg_ms(self, now_ms: int) -> float:
        """Average throttle time of the throttled requests in the measured windows."""
        requests = self.throttled_requests.rate_per_s(now_ms)
        return 0.0 if requests == 0 else self.throttle_time.rate_per_s(now_ms) / requests


class ClientQuotaManager:
    """Measures one quota key's use per client and says how long to throttle."""

    def __init__(
        self,
        key: str,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        clock: Clock,
        windows: QuotaWindows,
    ) -> None:
        self.key = key
        self.windows = windows
        self._quotas = quotas
        self._clock = clock
        self.uses: dict[MetricTags, ClientUse] = {}
        self._swept_ms = clock.now_ms()

    def _use(self, user: str, client_id: str) -> tuple[ClientUse, float] | None:
        if not self._quotas:
            return None  # no quota at all: nothing to find, nothing measured
        found = find_quota(self._quotas, self.key, user, client_id)
        if found is None:
            return None
        tags, bound = found
        use = self.uses.get(tags)
        if use is None:
            use = self.uses[tags] = ClientUse.over(self.windows, self._clock.now_ms())
        return use, bound

    def applies(self, user: str, client_id: str) -> bool:
        """Whether the client has this quota (its use is measured)."""
        return (
            bool(self._quotas) and find_quota(self._quotas, self.key, user, client_id) is not None
        )

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` of use; the throttle time (ms) it earns, the channel muted
        for it."""
        self.add(user, client_id, value)
        return self.throttle(user, client_id)

    def add(self, user: str, client_id: str, value: float) -> None:
        """Record ``value`` of use without throttling yet (negative: take use back, as
        Kafka's ``unrecordQuotaSensor`` for a throttled fetch answered empty)."""
        found = self._use(user, client_id)
        if found is not None:
            now_ms = self._clock.now_ms()
            found[0].rate.record(value, now_ms)
            found[0].last_recorded_ms = now_ms
            if now_ms - self._swept_ms >= _SWEEP_INTERVAL_MS:
                self._sweep(now_ms)

    def _sweep(self, now_ms: int) -> None:
        """Drop the measurements of clients not measured for an hour."""
        self._swept_ms = now_ms
        idle = [
            tags
            for tags, use in self.uses.items()
            if now_ms - use.last_recorded_ms >= INACTIVE_EXPIRATION_MS
        ]
        for tags in idle:
            del self.uses[tags]

    def throttle(self, user: str, client_id: str) -> int:
        """The throttle time (ms) the client's use earns now: counted in its statistics
        and the request's channel muted for it (0: within its quota)."""
        found = self._use(user, client_id)
        if found is None:
            return 0
        use, bound = found
        now_ms = self._clock.now_ms()
        throttle_ms = use.rate.throttle_ms(bound, now_ms)
        if throttle_ms > 0:
            use.throttled_requests.record(1, now_ms)
            use.throttle_time.record(throttle_ms, now_ms)
            use.throttle_time_max_ms = max(use.throttle_time_max_ms, throttle_ms)
            throttle_channel(throttle_ms, now_ms)
        return throttle_ms

    def exceeded(self, user: str, client_id: str) -> bool:
        """Whether the client is over its quota now (Kafka's strict mutation check)."""
        found = self._use(user, client_id)
        if found is None:
            return False
        use, bound = found
        return use.rate.rate_per_s(self._clock.now_ms()) > bound

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one client may use in the measured windows (None: no quota); a fetch
        is capped at it, as Kafka's ``getMaxValueInQuotaWindow``."""
        found = find_quota(self._quotas, self.key, user, client_id)
        if found is None:
            return None
        window_s = self.windows.window_ms / _MS_PER_S
        return found[1] * (self.windows.samples - 1) * window_s


class ClientQuotas:
    """Every client-quota config of the broker and the four managers enforcing them."""

    def __init__(
        self,
        clock: Clock,
        windows: QuotaWindows | None = None,
        controller_windows: QuotaWindows | None = None,
    ) -> None:
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self.clock = clock
        client = QuotaWindows() if windows is None else windows
        controller = QuotaWindows() if controller_windows is None else controller_windows
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, self.configs, clock, client)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, self.configs, clock, client)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, self.configs, clock, client)
        self.controller_mutation = ClientQuotaManager(
            CONTROLLER_MUTATION_RATE, self.configs, clock, controller
        )

    def mutation(self, user: str, client_id: str, *, strict: bool) -> MutationQuota:
        """A request's use of the controller mutation quota."""
        return MutationQuota(self.controller_mutation, user, client_id, strict=strict)

    def managers(self) -> Iterator[ClientQuotaManager]:
        """The managers, one per quota key."""
        yield from (self.produce, self.fetch, self.request, self.controller_mutation)

    def apply(self, entity: QuotaEntity, configs: Mapping[str, float]) -> None:
        """Replace ``entity``'s quotas (empty: it has none)."""
        kept = {key: value for key, value in configs.items() if key in QUOTA_KEYS}
        if kept:
            self.configs[entity] = kept
        else:
            self.configs.pop(entity, None)


class MutationQuota:
    """One request's partition mutations against its client's ``controller_mutation_rate``.

    Strict (CreatePartitions v3+, DeleteTopics v5+, CreateTopics v6+, as Kafka's
    ``StrictControllerMutationQuota``): a topic met while the client is already over
    its quota is refused (THROTTLING_QUOTA_EXCEEDED) and mutates nothing. Permissive
    (older versions): every mutation goes through. Either way the partitions mutated
    are recorded, and the answer carries the throttle time they earn.
    """

    __slots__ = ("_client_id", "_manager", "_strict", "_user")

    def __init__(
        self, manager: ClientQuotaManager, user: str, client_id: str, *, strict: bool
    ) -> None:
        self._manager = manager
        self._user = user
        self._client_id = client_id
        self._strict = strict

    def refused(self) -> bool:
        """Whether the next topic is refused: strict, and the client over its quota."""
        return self._strict and self._manager.exceeded(self._user, self._client_id)

    def record(self, partitions: int) -> None:
        """Count ``partitions`` created or deleted."""
        self._manager.add(self._user, self._client_id, partitions)

    def throttle_ms(self) -> int:
        """The request's throttle time, its channel muted for it."""
        return self._manager.throttle(self._user, self._client_id)
