"""``FaultPlan``: a broker's fault rules, matched against each request and applied.

The dispatcher asks the plan about a request only while ``armed`` is true (one
attribute read when no rule is set). Rules are kept per API key in a ``RuleIndex``
(grouped by client id and topic), in the order they were added; the first rule that
matches a request hits it, and only one rule hits a request. A rule is tried only if
its index group fits the request; trying it reads only what it filters on: the
version and client id from the header, the group id from the body, the principal and
listener from the connection's ``Session``, and the request's partitions
(``request_partitions``) for an error or a rule that names a topic or a partition.

``apply`` carries the hit out through ``FaultEffects``, the dispatcher's side: the
handler, a wait on the broker's timing wheel, the throttle of the connection, the
error that closes it, and the broker's leader hints for the partitions an injected
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH hits (KIP-951), so the answer carries
the partitions' current leader as the handlers' own does. The Fetch errors of a fetch
session (``FETCH_SESSION_ERRORS``) are answered for the whole request. An error whose
response has nowhere to carry it at the version asked (``AnswerShapeError``: no
top-level error code and no partitions, as OffsetFetch v8's per-group errors) closes
the connection instead, with the reason in its log line.
Each hit is counted on its ``FaultHandle`` (``hits``) and in ``applied`` by (API name,
kind), the counter the broker exports as
``tickwheel_faults_applied_total{api,kind}``, and logged at INFO. A rule with a
``count`` leaves the plan when it is spent; ``remove`` and ``clear`` take rules out at
once, so the next request is served normally.

Concurrency: ``match`` and ``apply`` run on the broker's event loop; ``add``,
``remove`` and ``clear`` may be called from any thread (a test's thread beside a
``BackgroundBroker``): they swap the per-API tables under a lock, and the loop reads
whichever table is current.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel.faults._answers import (
    Answer,
    AnswerShapeError,
    error_answer,
    merged_answer,
    with_topic_errors,
    without_partitions,
)
from tickwheel.faults._catalogue import FETCH_SESSION_ERRORS
from tickwheel.faults._index import RuleIndex
from tickwheel.faults._rules import FaultKind, FaultPhase, FaultRule, api_name, parse_rule
from tickwheel.faults._shape import request_partitions, topic_shape
from tickwheel.protocol import (
    LEADER_HINT_ERRORS,
    NO_LEADER_HINTS,
    ApiKey,
    DecodedRequest,
    LeaderHints,
    response_schema,
)
from tickwheel.security import current_session_or_none

_log = logging.getLogger(__name__)


class FaultEffects(Protocol):
    """What a fault can do to a request, as the dispatcher does it."""

    def handle(self, request: DecodedRequest) -> Awaitable[Answer]:
        """Handle ``request`` normally."""
        ...

    def wait_ms(self, delay_ms: int) -> Awaitable[None]:
        """Return after ``delay_ms`` on the broker's clock."""
        ...

    def throttle(self, request: DecodedRequest, answer: Answer, throttle_ms: int) -> Answer:
        """``answer`` with ``throttle_time_ms`` at least ``throttle_ms``, the connection
        muted that long."""
        ...

    def close(self, reason: str) -> Exception:
        """The error that closes the connection, saying ``reason``."""
        ...

    def leader_hints(self, pairs: Sequence[tuple[str, int]], error: ErrorCode) -> LeaderHints:
        """The broker's leader hints for ``pairs`` answered ``error``."""
        ...


class FaultHandle:
    """A rule in a plan: its id in the plan, how often it hit, how to take it out."""

    def __init__(self, plan: FaultPlan, rule: FaultRule, rule_id: int) -> None:
        self.rule = rule
        self.rule_id = rule_id
        self.hits = 0
        self._plan = plan

    @property
    def spent(self) -> bool:
        """Whether the rule hit its ``count`` of requests (it has left the plan)."""
        return self.rule.count is not None and self.hits >= self.rule.count

    def remove(self) -> None:
        """Take the rule out of its plan (no-op once out)."""
        self._plan.remove(self)

    def __repr__(self) -> str:
        return f"<FaultHandle {self.rule_id}: {self.rule.describe()}, {self.hits} hits>"


@dataclass(frozen=True, slots=True)
class FaultHit:
    """One request a rule hit: the partitions it hit (None: the whole request)."""

    handle: FaultHandle
    pairs: list[tuple[str, int]] | None
    all_pairs: list[tuple[str, int]] | None


class FaultPlan:
    """The fault rules of one broker."""

    def __init__(self) -> None:
        self.armed = False
        self.applied: Counter[tuple[str, str]] = Counter()
        self._by_api: dict[int, RuleIndex[FaultHandle]] = {}
        self._lock = threading.Lock()
        self._rule_ids = itertools.count(1)

    def add(self, rule: FaultRule | None = None, **fields: object) -> FaultHandle:
        """Add ``rule``, or the rule ``fields`` describe (``parse_rule``); its handle."""
        if rule is not None and fields:
            raise TypeError("add takes a FaultRule or a rule's fields, not both")
        parsed = parse_rule(fields) if rule is None else rule
        with self._lock:
            handle = FaultHandle(self, parsed, next(self._rule_ids))
            key = int(handle.rule.api)
            rules = self._by_api.get(key)
            indexed = RuleIndex((*(() if rules is None else rules.handles), handle))
            self._by_api = {**self._by_api, key: indexed}
            self.armed = True
        _log.info("fault rule added: %s", handle.rule.describe())
        return handle

    def remove(self, handle: FaultHandle) -> None:
        """Take ``handle``'s rule out (no-op once out)."""
        with self._lock:
            key = int(handle.rule.api)
            rules = self._by_api.get(key)
            kept = () if rules is None else tuple(h for h in rules.handles if h is not handle)
            tables = {k: v for k, v in self._by_api.items() if k != key}
            if kept:
                tables[key] = RuleIndex(kept)
            self._by_api = tables
            self.armed = bool(tables)

    def clear(self) -> None:
        """Take every rule out: requests are served normally from the next one."""
        with self._lock:
            self._by_api = {}
            self.armed = False

    @property
    def handles(self) -> list[FaultHandle]:
        """The rules in the plan, by API key, then in the order they were added."""
        return [handle for _, rules in sorted(self._by_api.items()) for handle in rules.handles]

    def get(self, rule_id: int) -> FaultHandle | None:
        """The rule with ``rule_id`` while it is in the plan."""
        return next((handle for handle in self.handles if handle.rule_id == rule_id), None)

    def match(self, request: DecodedRequest) -> FaultHit | None:
        """The first rule that hits ``request``, if any."""
        rules = self._by_api.get(request.api_key)
        if rules is None:
            return None
        for handle in rules.candidates(request):
            hit = _hit(handle.rule, request)
            if hit is not None:
                return FaultHit(handle, *hit)
        return None

    async def apply(self, hit: FaultHit, request: DecodedRequest, effects: FaultEffects) -> Answer:
        """Carry ``hit`` out on ``request``: the answer to send (None: none)."""
        rule = hit.handle.rule
        self._count(hit, request)
        kind = rule.kind
        if kind is FaultKind.ERROR:
            assert rule.error is not None
            try:
                return await _error(rule, hit, request, effects)
            except AnswerShapeError as exc:
                raise effects.close(f"cannot answer {rule.describe()}: {exc}") from exc
        if kind is FaultKind.DELAY:
            answer = await effects.handle(request)
            await effects.wait_ms(rule.delay_ms)
            return answer
        if kind is FaultKind.THROTTLE:
            return effects.throttle(request, await effects.handle(request), rule.delay_ms)
        if rule.phase is FaultPhase.AFTER:
            await effects.handle(request)
        if kind is FaultKind.CLOSE:
            raise effects.close(f"fault rule: {rule.describe()}")
        return None

    def _count(self, hit: FaultHit, request: DecodedRequest) -> None:
        handle = hit.handle
        handle.hits += 1
        if handle.spent:
            self.remove(handle)
        rule = handle.rule
        self.applied[(api_name(rule.api), rule.kind.value)] += 1
        _log.info(
            "fault applied: %s to v%d (correlation id %d, client %s)%s",
            rule.describe(),
            request.api_version,
            request.correlation_id,
            request.header.client_id,
            "" if hit.pairs is None else f" on {len(hit.pairs)} partition(s)",
        )


def _hit(
    rule: FaultRule, request: DecodedRequest
) -> tuple[list[tuple[str, int]] | None, list[tuple[str, int]] | None] | None:
    """(hit partitions, all partitions) when ``rule`` hits ``request``, else None."""
    if not _matches_request(rule, request):
        return None
    if not rule.partitioned and rule.kind is not FaultKind.ERROR:
        return None, None
    pairs = request_partitions(request.body)
    if pairs is None:
        if not rule.partitioned:
            return None, None
        return _metadata_hit(rule, request)
    hit = [pair for pair in pairs if _picks(rule, pair)]
    if not hit and rule.partitioned:
        return None
    return hit, pairs


def _matches_request(rule: FaultRule, request: DecodedRequest) -> bool:
    """Whether ``rule``'s filters other than topic and partition let ``request`` in."""
    if rule.version is not None and rule.version != request.api_version:
        return False
    if rule.client_id is not None and rule.client_id != request.header.client_id:
        return False
    if rule.group_id is not None and rule.group_id != getattr(request.body, "group_id", None):
        return False
    if rule.principal is None and rule.listener is None:
        return True
    session = current_session_or_none()
    return (
        session is not None
        and rule.principal in (None, str(session.principal))
        and rule.listener in (None, session.listener_name)
    )


def _metadata_hit(
    rule: FaultRule, request: DecodedRequest
) -> tuple[list[tuple[str, int]] | None, list[tuple[str, int]] | None] | None:
    """A Metadata request is hit by a topic rule when it asks for that topic or all."""
    if request.api_key != ApiKey.METADATA or rule.partition is not None:
        return None
    topics = getattr(request.body, "topics", None)
    if topics is None or any(getattr(t, "name", None) == rule.topic for t in topics):
        return None, None
    return None


def _picks(rule: FaultRule, pair: tuple[str, int]) -> bool:
    topic, partition = pair
    return (rule.topic is None or rule.topic == topic) and (
        rule.partition is None or rule.partition == partition
    )


async def _error(
    rule: FaultRule, hit: FaultHit, request: DecodedRequest, effects: FaultEffects
) -> Answer:
    error = rule.error
    assert error is not None
    if request.api_key == ApiKey.METADATA:
        return with_topic_errors(request, await effects.handle(request), error, rule.topic)
    pairs, all_pairs = hit.pairs, hit.all_pairs
    partitioned = (
        pairs is not None
        and error not in FETCH_SESSION_ERRORS
        and topic_shape(response_schema(request.api_key, request.api_version)) is not None
    )
    if not partitioned or pairs is None or all_pairs is None:
        return error_answer(request, error, None)
    hints = effects.leader_hints(pairs, error) if error in LEADER_HINT_ERRORS else NO_LEADER_HINTS
    if len(pairs) == len(all_pairs):
        return error_answer(request, error, pairs, hints)
    hit_set = set(pairs)
    rest = without_partitions(request, lambda topic, partition: (topic, partition) in hit_set)
    return merged_answer(request, await effects.handle(rest), error, pairs, hints)
