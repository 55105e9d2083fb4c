"""``ConnectionQuotas``: how many connections the broker takes, from whom, and how fast.

Kafka's connection quotas (KIP-308 listener limits, KIP-402 the broker-wide limit,
KIP-612 creation rates), with its property names and its answers:

- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count``
  pairs): a connection from a host that already has that many is accepted and closed at
  once (the client sees its connection closed, then retries), with one WARNING per host,
  rate-limited.
- ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections``: while a
  limit is reached the listener stops accepting; new connections wait in the kernel's
  backlog until a connection closes (Kafka's acceptor blocks the same way). The
  inter-broker listener is exempt from the broker-wide limit: when its connection takes
  the broker past it, the broker closes the least recently active connection of another
  listener (``ExcessConnectionCloser``), as Kafka's processors do.
- ``max.connection.creation.rate`` (broker-wide, connections per second) and
  ``listener.name.<l>.max.connection.creation.rate``: a token bucket per limit, refilled
  at the rate and holding at most one second's worth; while a bucket is empty the
  listener stops accepting until the next token (Kafka throttles its acceptor for the
  time its rate sensor says). The inter-broker listener is throttled by its own
  listener rate only.

Each time a listener is held back by a limit, and each connection refused, is counted
(``refused``, by listener and limit) and logged once per limit per listener,
rate-limited. A creation rate of 0 stops the listener from accepting at all.
``connection-count`` and ``connection-creation-rate`` (Kafka's socket-server-metrics
names) are read from here.

Concurrency: one event loop; not thread-safe.
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tickwheel._ratelimit import RateLimitedLog
from tickwheel.timer import Clock

_log = logging.getLogger(__name__)
_limit_warnings = RateLimitedLog(_log)

NO_LIMIT: Final = 2_147_483_647
"""Kafka's default for every connection limit (Java's ``Integer.MAX_VALUE``)."""

RATE_WINDOW_S: Final = 10
"""Seconds over which ``connection-creation-rate`` is measured."""

PER_IP_LIMIT: Final = "max.connections.per.ip"
BROKER_LIMIT: Final = "max.connections"
RATE_LIMIT: Final = "max.connection.creation.rate"

_MS_PER_S: Final = 1000.0


class QuotaConfigError(ValueError):
    """A connection-quota property has a value Kafka would refuse; the message names it."""


def parse_per_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count,host:count``) by IP address.

    Host names are resolved once, at start-up, as Kafka does; the last ``:`` separates
    the count, so IPv6 addresses need no brackets.
    """
    overrides: dict[str, int] = {}
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        host, sep, count_text = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise QuotaConfigError(f"max.connections.per.ip.overrides: {entry!r} is not host:count")
        try:
            count = int(count_text)
        except ValueError:
            raise QuotaConfigError(
                f"max.connections.per.ip.overrides: {entry!r} has no integer count"
            ) from None
        if count < 0:
            raise QuotaConfigError(
                f"max.connections.per.ip.overrides: {entry!r} has a negative count"
            )
        overrides[_resolve(host, entry)] = count
    return overrides


def _resolve(host: str, entry: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
    except OSError as exc:
        raise QuotaConfigError(
            f"max.connections.per.ip.overrides: cannot resolve {host!r} in {entry!r} ({exc})"
        ) from None


def check_limit(name: str, value: int) -> int:
    """``value`` if it is a valid count or rate limit for property ``name``."""
    if value < 0:
        raise QuotaConfigError(f"{name} must not be negative: {value}")
    return value


@dataclass(frozen=True)
class QuotaSettings:
    """The broker-wide connection limits (Kafka's defaults: none)."""

    max_connections: int = NO_LIMIT
    max_connections_per_ip: int = NO_LIMIT
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = NO_LIMIT

    def __post_init__(self) -> None:
        check_limit(BROKER_LIMIT, self.max_connections)
        check_limit(PER_IP_LIMIT, self.max_connections_per_ip)
        check_limit(RATE_LIMIT, self.max_connection_creation_rate)
        if self.max_connections_per_ip == 0 and not self.per_ip_overrides:
            raise QuotaConfigError(
                "max.connections.per.ip can be 0 only if max.connections.per.ip.overrides "
                "is set (no host could connect at all)"
            )


class _TokenBucket:
    """At most ``rate_per_s`` tokens a second, bursts of one second's worth."""

    def __init__(self, rate_per_s: int, now_ms: int) -> None:
        self.rate_per_s = rate_per_s
        self._tokens = float(rate_per_s)
        self._updated_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        elapsed_ms = max(0, now_ms - self._updated_ms)
        self._tokens = min(
            float(self.rate_per_s), self._tokens + elapsed_ms * self.rate_per_s / _MS_PER_S
        )
        self._updated_ms = now_ms

    def wait_ms(self, now_ms: int) -> float:
        """How long until a token is there (0: now)."""
        self._refill(now_ms)
        if self._tokens >= 1:
            return 0.0
        if self.rate_per_s == 0:
            return float("inf")
        return (1 - self._tokens) * _MS_PER_S / self.rate_per_s

    def take(self) -> None:
        self._tokens -= 1

    def give_back(self) -> None:
        self._tokens = min(float(self.rate_per_s), self._tokens + 1)


class _CreationRate:
    """Connections created per second over the last ``RATE_WINDOW_S`` seconds."""

    def __init__(self) -> None:
        self.total = 0
        self._per_second: collections.deque[tuple[int, int]] = collections.deque()

    def record(self, now_ms: int) -> None:
        self.total += 1
        second = now_ms // 1000
        if self._per_second and self._per_second[-1][0] == second:
            self._per_second[-1] = (second, self._per_second[-1][1] + 1)
        else:
            self._per_second.append((second, 1))
        self._trim(second)

    def _trim(self, second: int) -> None:
        while self._per_second and self._per_second[0][0] <= second - RATE_WINDOW_S:
            self._per_second.popleft()

    def rate(self, now_ms: int) -> float:
        self._trim(now_ms // 1000)
        return sum(count for _, count in self._per_second) / RATE_WINDOW_S


class ListenerQuota:
    """One listener's limits and counts."""

    def __init__(
        self,
        name: str,
        max_connections: int,
        max_creation_rate: int,
        inter_broker: bool,
        now_ms: int,
    ) -> None:
        self.name = name
        self.max_connections = max_connections
        self.inter_broker = inter_broker
        self.count = 0
        self.creation = _CreationRate()
        self.bucket = (
            None if max_creation_rate == NO_LIMIT else _TokenBucket(max_creation_rate, now_ms)
        )


ExcessConnectionCloser = Callable[[], bool]
"""Closes the least recently active connection of a listener other than the
inter-broker one; False if there is none."""


class ConnectionQuotas:
    """The broker's connection counts and the limits they are held to."""

    def __init__(self, settings: QuotaSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self.total = 0
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._listeners: dict[str, ListenerQuota] = {}
        self._bucket = (
            None
            if settings.max_connection_creation_rate == NO_LIMIT
            else _TokenBucket(settings.max_connection_creation_rate, clock.now_ms())
        )
        # Listeners waiting for a slot (a connection to close), by name.
        self._waiting_for_slot: dict[str, Callable[[], None]] = {}
        self.refused: collections.Counter[tuple[str, str]] = collections.Counter()
        self.close_excess: ExcessConnectionCloser = lambda: False

    def add_listener(
        self, name: str, max_connections: int, max_creation_rate: int, inter_broker: bool
    ) -> ListenerQuota:
        """Register a listener's own limits (``listener.name.<l>.*``)."""
        check_limit(f"listener.name.{name.lower()}.{BROKER_LIMIT}", max_connections)
        check_limit(f"listener.name.{name.lower()}.{RATE_LIMIT}", max_creation_rate)
        quota = ListenerQuota(
            name, max_connections, max_creation_rate, inter_broker, self._clock.now_ms()
        )
        self._listeners[name] = quota
        return quota

    @property
    def listeners(self) -> Mapping[str, ListenerQuota]:
        """Each listener's quota, by listener name."""
        return self._listeners

    def now_ms(self) -> int:
        """The time on the quotas' clock."""
        return self._clock.now_ms()

    def _protected(self, quota: ListenerQuota) -> bool:
        """Kafka's protected listener: the inter-broker one, when there are others."""
        return quota.inter_broker and len(self._listeners) > 1

    def accept_wait_ms(self, quota: ListenerQuota, on_slot: Callable[[], None]) -> float:
        """How long ``quota``'s listener must wait before its next accept: 0 (accept
        now; the creation is counted against the rates), a delay for a creation rate,
        or ``inf`` when a connection count is at its limit (``on_slot`` is called once
        a connection closes)."""
        slot_limit = self._slot_limit(quota)
        if slot_limit is not None:
            self._waiting_for_slot[quota.name] = on_slot
            self._hold_back(quota, slot_limit, "no new connection is accepted until one closes")
            return float("inf")
        now_ms = self._clock.now_ms()
        wait_ms = 0.0
        limit = RATE_LIMIT
        if quota.bucket is not None:
            wait_ms = quota.bucket.wait_ms(now_ms)
            limit = f"listener.name.{quota.name.lower()}.{RATE_LIMIT}"
        if self._bucket is not None and not self._protected(quota):
            broker_wait_ms = self._bucket.wait_ms(now_ms)
            if broker_wait_ms > wait_ms:
                wait_ms, limit = broker_wait_ms, RATE_LIMIT
        if wait_ms > 0:
            self._hold_back(quota, limit, "new connections are throttled")
            return wait_ms
        if quota.bucket is not None:
            quota.bucket.take()
        if self._bucket is not None and not self._protected(quota):
            self._bucket.take()
        return 0.0

    def refund(self, quota: ListenerQuota) -> None:
        """Give back what ``accept_wait_ms`` took when the accept found no connection."""
        if quota.bucket is not None:
            quota.bucket.give_back()
        if self._bucket is not None and not self._protected(quota):
            self._bucket.give_back()

    def _slot_limit(self, quota: ListenerQuota) -> str | None:
        """The count limit that keeps ``quota``'s listener from accepting, if any."""
        if quota.count >= quota.max_connections:
            return f"listener.name.{quota.name.lower()}.{BROKER_LIMIT}"
        if not self._protected(quota) and self.total >= self.settings.max_connections:
            return BROKER_LIMIT
        return None

    def _hold_back(self, quota: ListenerQuota, limit: str, what: str) -> None:
        self.refused[quota.name, limit] += 1
        _limit_warnings.log(
            logging.WARNING,
            (quota.name, limit),
            "listener %s reached %s: %s",
            quota.name,
            limit,
            what,
        )

    def admit(self, quota: ListenerQuota, host: str) -> bool:
        """Count a connection accepted from ``host``; False (nothing counted) if the
        host already has its ``max.connections.per.ip`` and the socket must be closed."""
        quota.creation.record(self._clock.now_ms())
        per_ip_max = self.settings.per_ip_overrides.get(host, self.settings.max_connections_per_ip)
        if self._per_ip[host] >= per_ip_max:
            self.refused[quota.name, PER_IP_LIMIT] += 1
            _limit_warnings.log(
                logging.WARNING,
                (host, PER_IP_LIMIT),
                "closed a connection from %s on listener %s: the host already has the "
                "configured maximum of %d connections (%s)",
                host,
                quota.name,
                per_ip_max,
                PER_IP_LIMIT,
            )
            return False
        self._per_ip[host] += 1
        quota.count += 1
        self.total += 1
        if self.total > self.settings.max_connections and self._protected(quota):
            self.close_excess()
        return True

    def closed(self, quota: ListenerQuota, host: str) -> None:
        """A connection counted by ``admit`` closed: its slot may go to a waiting listener."""
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]
        quota.count -= 1
        self.total -= 1
        waiting, self._waiting_for_slot = self._waiting_for_slot, {}
        for resume in waiting.values():
            resume()

    def connections_from(self, host: str) -> int:
        """Connections counted from ``host``."""
        return self._per_ip[host]
