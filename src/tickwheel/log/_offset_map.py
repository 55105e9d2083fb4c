"""``OffsetMap``: key -> offset of its latest record in a log's dirty section.

The cleaner (``_cleaner``) fills one map per cleaning from the dirty section, oldest
record first, so each key ends up with its newest offset; records older than the
offset their key maps to are then dropped. Kafka's ``SkimpyOffsetMap`` stores a 16-byte
MD5 digest and an 8-byte offset per key in a fixed ``log.cleaner.dedupe.buffer.size``
array (split between the cleaner threads) and accepts digest collisions. This map is a
``dict`` keyed by the key bytes themselves (exact, no collisions) whose *capacity* is
Kafka's: ``buffer_bytes / 24`` slots times the load factor
(``log.cleaner.io.buffer.load.factor``, 0.9). So the setting bounds how many keys one
cleaning maps, as in Kafka, though a Python dict entry takes more than 24 bytes.

``latest_offset`` is the newest offset put: a cleaning whose map filled up part-way
through the dirty section cleans only up to it and records it as its end.

Concurrency: not thread-safe; each cleaning builds its own map, in a cleaner worker
process or on the thread that calls ``clean``.
"""

from __future__ import annotations

from typing import Final

# A digest (16 bytes) and an offset (8 bytes): Kafka's bytes per slot.
ENTRY_BYTES: Final = 24
NO_OFFSET: Final = -1


class OffsetMap:
    """A bounded map from record key to the offset of its latest record."""

    __slots__ = ("_offsets", "capacity", "latest_offset")

    def __init__(self, buffer_bytes: int, load_factor: float) -> None:
        self.capacity = max(int(buffer_bytes // ENTRY_BYTES * load_factor), 1)
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = NO_OFFSET

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset`` (the newest so far: puts come in offset order)."""
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The offset ``key`` maps to, ``NO_OFFSET`` if it is not mapped."""
        return self._offsets.get(key, NO_OFFSET)

    @property
    def full(self) -> bool:
        """Whether the map holds as many keys as its capacity."""
        return len(self._offsets) >= self.capacity

    @property
    def utilization(self) -> float:
        """Keys held over capacity, 0.0 to 1.0."""
        return len(self._offsets) / self.capacity

    def __len__(self) -> int:
        return len(self._offsets)
