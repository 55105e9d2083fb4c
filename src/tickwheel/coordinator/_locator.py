"""Where a coordinator lives: the broker a client is sent to by FindCoordinator.

Each coordinator (group, transaction, share state) places its keys on the partitions of
its internal topic and is led by that partition's leader. ``CoordinatorNode`` is that
broker as a FindCoordinator response names it, and ``CoordinatorLocator`` the broker's
lookup of a partition's leader, which each coordinator's FindCoordinator answer uses.

Immutable values and a callable type; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tickwheel.protocol import ApiKey

FIND_COORDINATOR_KEY = ApiKey.FIND_COORDINATOR


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    """The broker a client should talk to about a group, transaction or share-partition."""

    node_id: int
    host: str
    port: int


CoordinatorLocator = Callable[[int], CoordinatorNode | None]
"""Returns the leader of a coordinator's internal-topic partition, or None if it has none."""
