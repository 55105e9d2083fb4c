"""``ClientQuotas`` on a ManualClock: who is measured under which tags, the throttle time
and the mute it sets, strict mutation checks, and measurements forgotten when idle."""

from __future__ import annotations

import contextvars

from tickwheel.server.quotas import (
    CLIENT_ID,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    USER,
    ChannelThrottle,
    ClientQuotas,
    enter_channel,
    make_entity,
)
from tickwheel.server.quotas._manager import INACTIVE_EXPIRATION_MS
from tickwheel.timer import ManualClock


def _quotas(clock: ManualClock, key: str, value: float, **entity: str | None) -> ClientQuotas:
    quotas = ClientQuotas(clock)
    types = {"user": USER, "client_id": CLIENT_ID}
    quotas.apply(make_entity((types[k], v) for k, v in entity.items()), {key: value})
    return quotas


def test_a_user_quota_is_shared_by_its_client_ids_and_mutes_the_channel() -> None:
    clock = ManualClock()
    quotas = _quotas(clock, PRODUCER_BYTE_RATE, 1000.0, user="alice")
    channel = ChannelThrottle()

    def produce(client_id: str, size: int) -> int:
        enter_channel(channel)
        return quotas.produce.record("alice", client_id, size)

    assert contextvars.copy_context().run(produce, "a", 6_000) == 0
    throttle_ms = contextvars.copy_context().run(produce, "b", 5_000)
    assert throttle_ms == 1000  # 11 000 bytes over ten windows: 1100 B/s
    assert list(quotas.produce.uses) == [("alice", "")]
    assert channel.muted_until_ms == clock.now_ms() + 1000
    assert quotas.produce.record("bob", "a", 50_000) == 0  # no quota: not measured
    use = quotas.produce.uses[("alice", "")]
    assert use.throttle_time_max_ms == 1000
    assert use.throttle_time_avg_ms(clock.now_ms()) == 1000.0


def test_strict_mutations_are_refused_once_over_the_quota() -> None:
    clock = ManualClock()
    quotas = _quotas(clock, CONTROLLER_MUTATION_RATE, 1.0, client_id=None)
    strict = quotas.mutation("u", "admin", strict=True)
    assert not strict.refused()
    strict.record(11)
    assert strict.refused()
    assert strict.throttle_ms() == 1000
    assert not quotas.mutation("u", "admin", strict=False).refused()
    clock.advance(11_000)  # every window has passed
    assert not strict.refused()


def test_idle_clients_are_forgotten_after_an_hour() -> None:
    clock = ManualClock()
    quotas = _quotas(clock, PRODUCER_BYTE_RATE, 1000.0, client_id=None)
    quotas.produce.record("u", "gone", 10)
    clock.advance(INACTIVE_EXPIRATION_MS)
    quotas.produce.record("u", "here", 10)
    assert list(quotas.produce.uses) == [("", "here")]
