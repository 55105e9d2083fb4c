"""``OffsetRange``: one Spark task's share of a read, one partition's ``[from, until)``.

The driver plans ranges (``_reader``); Spark pickles each into a task, whose ``read``
hands it to ``_fetch.read_range``.

Concurrency: an immutable value; safe anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task's share of a micro-batch: offsets ``[from_offset, until_offset)``."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        """How many offsets the range spans (records, unless some were compacted away)."""
        return self.until_offset - self.from_offset
