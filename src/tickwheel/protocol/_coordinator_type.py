"""FindCoordinator's key types: which coordinator a key names.

Kafka's ``FindCoordinatorRequest.CoordinatorType``: a group id (``GROUP``), a
transactional id (``TRANSACTION``, FindCoordinator v1+) or a share-group partition key
``"group:topicId:partition"`` (``SHARE``, FindCoordinator v6+, KIP-932). An ``IntEnum``,
so a member equals the number on the wire.

Immutable; safe from any thread.
"""

from __future__ import annotations

import enum


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's ``key_type``."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2
