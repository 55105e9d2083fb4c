"""Leader hints (KIP-951): where a partition's leader is, told with the error that says
this broker is not it.

A Produce (v10+) or Fetch (v12+) partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH carries ``current_leader`` (the leader's id and epoch as this broker
knows them, -1 when unknown), and the response lists the endpoints of those leaders in
``node_endpoints`` (Produce v10+, Fetch v16+), so a client can move the partition to its
new leader without waiting for a metadata refresh. Both are tagged fields: a response
without hints has the same bytes as before.

``LeaderHints`` is what a handler (or the fault plan) knows; ``current_leader_tag`` and
``node_endpoints_tag`` write it as the hand-written encoders of Produce and Fetch need
it: a tagged-field section of one field, the bytes kio writes for the same entities.

Immutable values and pure functions; safe from any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from tickwheel.protocol._framing import uvarint

NOT_LEADER_OR_FOLLOWER: Final = 6
FENCED_LEADER_EPOCH: Final = 74
LEADER_HINT_ERRORS: Final = frozenset({NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH})
"""The errors a partition's answer carries its current leader with."""

_ONE_TAG: Final = b"\x01"
_EMPTY_TAGGED_FIELDS: Final = b"\x00"
_NULL_COMPACT_STRING: Final = b"\x00"
_LEADER_AND_EPOCH = struct.Struct(">ii")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A broker as a client reaches it on the listener the request came on."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderHints:
    """The current leader (id, epoch) of each partition answered with a leader error,
    by (topic, partition), and the endpoints of the leaders that are live."""

    leaders: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    endpoints: tuple[NodeEndpoint, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.leaders)


NO_LEADER_HINTS: Final = LeaderHints()
UNKNOWN_LEADER: Final = (-1, -1)
"""``current_leader``'s default: a tagged field at its default is not written."""


def _tag(tag: int, value: bytes) -> bytes:
    return _ONE_TAG + uvarint(tag) + uvarint(len(value)) + value


def current_leader_tag(tag: int, leader: tuple[int, int]) -> bytes:
    """A partition's tagged-field section holding ``current_leader`` (``LeaderIdAndEpoch``)
    as field ``tag``; empty for ``UNKNOWN_LEADER``, as Kafka and kio leave a default out."""
    if leader == UNKNOWN_LEADER:
        return _EMPTY_TAGGED_FIELDS
    return _tag(tag, _LEADER_AND_EPOCH.pack(*leader) + _EMPTY_TAGGED_FIELDS)


def node_endpoints_tag(tag: int, endpoints: tuple[NodeEndpoint, ...]) -> bytes:
    """A response's tagged-field section holding ``node_endpoints`` as field ``tag``."""
    parts = [uvarint(len(endpoints) + 1)]
    for endpoint in endpoints:
        host = endpoint.host.encode()
        parts += [_INT32.pack(endpoint.node_id), uvarint(len(host) + 1), host]
        parts.append(_INT32.pack(endpoint.port))
        if endpoint.rack is None:
            parts.append(_NULL_COMPACT_STRING)
        else:
            rack = endpoint.rack.encode()
            parts += [uvarint(len(rack) + 1), rack]
        parts.append(_EMPTY_TAGGED_FIELDS)
    return _tag(tag, b"".join(parts))
