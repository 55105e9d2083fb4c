"""``RuleIndex``: one API's fault rules, indexed by client id and topic.

A plan may hold a hundred rules on the API a producer sends once per message; trying
each in turn costs a hundred matches per request. The rules are therefore grouped by
the two filters that tell most rules apart, topic and then client id (None: any), and
a request looks up only the groups it can fall in: for any topic and for each topic it
names, the rules for any client and those for its client id. The request's topic names
are read only when some rule names a topic. The few candidates found are tried in the
order their rules were added, by the plan's full match (version, group, principal,
listener, partition). A Metadata request for every topic names none, so it tries every
rule of the API.

Immutable once built; the plan builds a new index when its rules change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from tickwheel.faults._rules import FaultRule
from tickwheel.faults._shape import request_topics
from tickwheel.protocol import DecodedRequest


class Indexed(Protocol):
    """What the index keeps: a rule and the order it was added in."""

    @property
    def rule(self) -> FaultRule:
        """The rule."""
        ...

    @property
    def rule_id(self) -> int:
        """Its place in the order rules were added."""
        ...


H = TypeVar("H", bound=Indexed)


class RuleIndex(Generic[H]):
    """One API's rules, grouped by (client id, topic)."""

    __slots__ = ("_by_topic", "_topical", "handles")

    def __init__(self, handles: Iterable[H]) -> None:
        self.handles: tuple[H, ...] = tuple(handles)
        groups: dict[str | None, dict[str | None, list[H]]] = {}
        for handle in self.handles:
            by_client = groups.setdefault(handle.rule.topic, {})
            by_client.setdefault(handle.rule.client_id, []).append(handle)
        self._by_topic = {
            topic: {client: tuple(group) for client, group in by_client.items()}
            for topic, by_client in groups.items()
        }
        self._topical = any(topic is not None for topic in self._by_topic)

    def candidates(self, request: DecodedRequest) -> Sequence[H]:
        """The rules that may hit ``request``, in the order they were added."""
        topics: list[str] = []
        if self._topical:
            named = request_topics(request.body)
            if named is None:
                return self.handles
            topics = named
        get = self._by_topic.get
        client_id = request.header.client_id
        found: list[tuple[H, ...]] = []
        for topic in (None, *topics):
            by_client = get(topic)
            if by_client is None:
                continue
            group = by_client.get(None)
            if group is not None:
                found.append(group)
            if client_id is not None:
                group = by_client.get(client_id)
                if group is not None:
                    found.append(group)
        if not found:
            return ()
        if len(found) == 1:
            return found[0]
        # A topic named twice finds its groups twice: a rule tried twice is still
        # tried in its turn, and the first that hits ends the search.
        return sorted((handle for group in found for handle in group), key=_order)


def _order(handle: Indexed) -> int:
    return handle.rule_id
