"""Compatibility levels: which earlier versions a new schema is checked against, and how.

Confluent's seven levels. BACKWARD: the new schema reads data written with the latest
version; FORWARD: the latest version reads data written with the new schema; FULL: both.
Their ``_TRANSITIVE`` forms check against every live version instead of the latest only;
NONE checks nothing. ``check`` takes the earlier versions newest first and answers every
reason the new schema is refused (empty: accepted).

Pure functions; safe from any thread.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from tickwheel.registry._avro import AvroSchema, read_errors


class Compatibility(enum.StrEnum):
    """Confluent's compatibility levels."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_COMPATIBILITY = Compatibility.BACKWARD


def check(
    level: Compatibility, new: AvroSchema, earlier_newest_first: Sequence[AvroSchema]
) -> list[str]:
    """Why ``new`` may not follow ``earlier_newest_first`` under ``level`` (empty: it may)."""
    if level is Compatibility.NONE or not earlier_newest_first:
        return []
    against = earlier_newest_first if level.transitive else earlier_newest_first[:1]
    errors: list[str] = []
    for previous in against:
        if level.backward:
            errors.extend(f"reading the earlier: {e}" for e in read_errors(new, previous))
        if level.forward:
            errors.extend(f"read by the earlier: {e}" for e in read_errors(previous, new))
    return errors
