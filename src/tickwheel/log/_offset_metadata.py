"""``LogOffsetMetadata``: an offset plus where its batch sits on disk.

The log end, the high watermark and every fetch position carry the base offset of the
segment holding their batch and the batch's byte position in it. DelayedFetch uses this
to decide without reading the log (DESIGN.md §4, seed 000 cases C and D): a fetch
position on an *older* segment than the end means a segment rolled; on the *same*
segment, ``position_diff`` counts the bytes that have arrived since. A metadata made
from an offset alone (``message_offset_only``) cannot be compared this way.

Concurrency: an immutable value; any thread may share it.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from tickwheel.log._errors import LogError

UNKNOWN_OFFSET: Final = -1
UNKNOWN_FILE_POSITION: Final = -1


# A NamedTuple rather than a frozen dataclass: the log makes one on every append, and a
# tuple is built several times faster.
class LogOffsetMetadata(NamedTuple):
    """An offset, and the segment base offset and byte position of the batch holding it."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        """Whether the segment and position are unknown."""
        return (
            self.segment_base_offset == UNKNOWN_OFFSET
            or self.relative_position == UNKNOWN_FILE_POSITION
        )

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """Whether this position lies on a segment older than ``that``'s."""
        self._check_comparable(that)
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        """Whether this position and ``that`` lie on the same segment."""
        self._check_comparable(that)
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from ``that`` to this position; both must lie on the same segment."""
        if not self.on_same_segment(that):
            raise LogError(f"{self} and {that} are on different segments")
        return self.relative_position - that.relative_position

    def _check_comparable(self, that: LogOffsetMetadata) -> None:
        if self.message_offset_only or that.message_offset_only:
            raise LogError(f"{self} and {that} cannot be compared: segment info is missing")
