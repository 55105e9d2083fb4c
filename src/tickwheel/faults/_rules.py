"""``FaultRule``: one planned failure, and ``parse_rule``, which reads one from plain values.

A rule says which requests it hits and what happens to them. Which: an API (Kafka's
name in any spelling, ``Produce``, ``PRODUCE``, ``produce``, or its key), and
optionally a version, a topic, a partition, a group id, a client id, a principal
(``User:alice``) and a listener name; a filter left out matches everything. What
(``kind``):

- ``error``: answer ``error`` (a Kafka error name or code) as Kafka would answer it,
  per partition where the API has partitions;
- ``delay``: handle the request, then hold its answer ``delay_ms`` on the broker's
  timing wheel;
- ``close``: close the connection, ``before`` handling the request or ``after`` it
  (the request took effect, its answer is lost);
- ``drop``: send no answer, ``before`` or ``after`` handling; the connection goes on;
- ``throttle``: handle the request, answer with ``throttle_time_ms`` at least
  ``delay_ms`` and mute the connection that long, as client quotas do.

``count`` is how many matching requests the rule hits before it is spent (None: every
one). Bad values raise ``FaultRuleError`` naming the field, so a rule from JSON or the
command line fails with a sentence, never a traceback.

Immutable; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey

E = TypeVar("E", bound=enum.StrEnum)
N = TypeVar("N", bound=enum.Enum)


class FaultRuleError(ValueError):
    """A fault rule that cannot be: its message names the field and the reason."""


class FaultKind(enum.StrEnum):
    """What a rule does to the requests it hits."""

    ERROR = "error"
    DELAY = "delay"
    CLOSE = "close"
    DROP = "drop"
    THROTTLE = "throttle"


class FaultPhase(enum.StrEnum):
    """Whether a close or a drop happens before the request is handled or after."""

    BEFORE = "before"
    AFTER = "after"


@dataclass(frozen=True, slots=True)
class FaultRule:
    """One planned failure: which requests it hits and what it does to them."""

    api: ApiKey
    kind: FaultKind
    error: ErrorCode | None = None
    delay_ms: int = 0
    phase: FaultPhase = FaultPhase.BEFORE
    count: int | None = None
    version: int | None = None
    topic: str | None = None
    partition: int | None = None
    group_id: str | None = None
    client_id: str | None = None
    principal: str | None = None
    listener: str | None = None

    @property
    def partitioned(self) -> bool:
        """Whether the rule picks partitions (a topic or a partition filter)."""
        return self.topic is not None or self.partition is not None

    def describe(self) -> str:
        """The rule in one line, for logs and listings."""
        what = {
            FaultKind.ERROR: f"error {self.error.name.upper() if self.error else ''}",
            FaultKind.DELAY: f"delay {self.delay_ms} ms",
            FaultKind.CLOSE: f"close {self.phase}",
            FaultKind.DROP: f"drop {self.phase}",
            FaultKind.THROTTLE: f"throttle {self.delay_ms} ms",
        }[self.kind]
        filters = [
            f"{name}={value}"
            for name, value in (
                ("version", self.version),
                ("topic", self.topic),
                ("partition", self.partition),
                ("group_id", self.group_id),
                ("client_id", self.client_id),
                ("principal", self.principal),
                ("listener", self.listener),
            )
            if value is not None
        ]
        where = f" ({', '.join(filters)})" if filters else ""
        return f"{api_name(self.api)} {what}{where}"


_FIELDS: Final = frozenset(
    {
        "api",
        "kind",
        "error",
        "delay_ms",
        "phase",
        "count",
        "version",
        "topic",
        "partition",
        "group_id",
        "client_id",
        "principal",
        "listener",
    }
)
_NEEDS_DELAY: Final = frozenset({FaultKind.DELAY, FaultKind.THROTTLE})
_HAS_PHASE: Final = frozenset({FaultKind.CLOSE, FaultKind.DROP})


def api_name(api: ApiKey) -> str:
    """Kafka's name of ``api`` (``OffsetCommit``), as its request metrics label it."""
    return "".join(part.capitalize() for part in api.name.split("_"))


def _squash(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


@dataclass(frozen=True, slots=True)
class _Named(Generic[N]):
    """How a field names a member of ``members``: by name in any spelling, or number."""

    field: str
    members: type[N]
    noun: str
    number_noun: str
    examples: str

    def parse(self, value: object) -> N:
        if isinstance(value, self.members):
            return value
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return self.members(value)
            except ValueError:
                message = f"field {self.field!r}: {value} is not a Kafka {self.number_noun}"
                raise FaultRuleError(message) from None
        if isinstance(value, str):
            squashed = _squash(value)
            for member in self.members:
                if _squash(member.name) == squashed:
                    return member
        raise FaultRuleError(
            f"field {self.field!r}: unknown {self.noun} {value!r} (e.g. {self.examples})"
        )


_API: Final = _Named("api", ApiKey, "API", "API key", "'Produce', 'Fetch', 0")
_ERROR: Final = _Named("error", ErrorCode, "error", "error code", "'NOT_LEADER_OR_FOLLOWER', 6")


def parse_api(value: object) -> ApiKey:
    """The API ``value`` names (a name in any spelling, or a key number)."""
    return _API.parse(value)


def parse_error(value: object) -> ErrorCode:
    """The error ``value`` names (Kafka's name in any spelling, or its code)."""
    return _ERROR.parse(value)


def _int(values: Mapping[str, object], name: str, *, minimum: int) -> int | None:
    value = values.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise FaultRuleError(f"field {name!r}: expected an integer, got {value!r}")
    if value < minimum:
        raise FaultRuleError(f"field {name!r}: must be at least {minimum}, got {value}")
    return value


def _str(values: Mapping[str, object], name: str) -> str | None:
    value = values.get(name)
    if value is None or isinstance(value, str):
        return value
    raise FaultRuleError(f"field {name!r}: expected a string, got {value!r}")


def _choice(values: Mapping[str, object], name: str, enum_cls: type[E]) -> E:
    value = values.get(name)
    try:
        return enum_cls(str(value).lower())
    except ValueError:
        choices = ", ".join(member.value for member in enum_cls)
        raise FaultRuleError(f"field {name!r}: {value!r} is not one of {choices}") from None


def parse_rule(values: Mapping[str, object]) -> FaultRule:
    """The rule ``values`` describes (``FaultRule``'s fields; ``kind`` defaults to
    ``error`` when ``error`` is given); ``FaultRuleError`` names the first bad field."""
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        raise FaultRuleError(
            f"field {unknown[0]!r}: not a fault rule field (one of {', '.join(sorted(_FIELDS))})"
        )
    if values.get("api") is None:
        raise FaultRuleError("field 'api': required (the API the rule hits, e.g. 'Produce')")
    api = parse_api(values["api"])
    if values.get("kind") is None:
        if values.get("error") is None:
            raise FaultRuleError("field 'kind': required unless 'error' is given")
        kind = FaultKind.ERROR
    else:
        kind = _choice(values, "kind", FaultKind)
    error = None if values.get("error") is None else parse_error(values["error"])
    if kind is FaultKind.ERROR and error is None:
        raise FaultRuleError("field 'error': required for kind 'error'")
    if kind is not FaultKind.ERROR and error is not None:
        raise FaultRuleError(f"field 'error': only for kind 'error', not {kind.value!r}")
    delay_ms = _int(values, "delay_ms", minimum=0)
    if kind in _NEEDS_DELAY and delay_ms is None:
        raise FaultRuleError(f"field 'delay_ms': required for kind {kind.value!r}")
    if kind not in _NEEDS_DELAY and delay_ms is not None:
        raise FaultRuleError(f"field 'delay_ms': only for delay and throttle, not {kind.value!r}")
    phase = FaultPhase.BEFORE
    if values.get("phase") is not None:
        if kind not in _HAS_PHASE:
            raise FaultRuleError(f"field 'phase': only for close and drop, not {kind.value!r}")
        phase = _choice(values, "phase", FaultPhase)
    return FaultRule(
        api=api,
        kind=kind,
        error=error,
        delay_ms=delay_ms or 0,
        phase=phase,
        count=_int(values, "count", minimum=1),
        version=_int(values, "version", minimum=0),
        topic=_str(values, "topic"),
        partition=_int(values, "partition", minimum=0),
        group_id=_str(values, "group_id"),
        client_id=_str(values, "client_id"),
        principal=_str(values, "principal"),
        listener=_str(values, "listener"),
    )
