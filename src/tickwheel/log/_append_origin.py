"""``AppendOrigin``: who appends a batch (PLACEHOLDER for the txn-log branch's module).

Concurrency: an immutable enum, safe anywhere.
"""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """Kafka's ``AppendOrigin``: a client's produce, a coordinator, or replication."""

    CLIENT = enum.auto()
    COORDINATOR = enum.auto()
    REPLICATION = enum.auto()
