"""``TopicMetadataParts``: each topic's Metadata answer, encoded once and kept until
the topic changes.

A Metadata response is mostly its topics, and describing a topic costs per partition
(a leader, an epoch, replica and ISR lists, then the encoding); rebuilding every one
for every request made a full Metadata of 20,000 partitions cost a quarter of a
second, and a producer meeting 1,500 topics one by one made the broker spend seconds
answering. So the handler keeps each topic's encoded entry per (API version,
listener) and only joins bytes per request (``protocol.encode_response_with_array``):
a request costs what the topics it asks for cost, whatever else the broker holds.

An entry is kept with a *stamp*: a tuple of what it was built from that changes
whenever the answer would (the topic's id and partition count; the replica manager's
``topic_generation`` and the offline directory count on one broker; the metadata
cache's ``topic_generation`` and ``broker_generation`` in a cluster). A stamp that
differs at lookup means the topic changed (created again, grown, a leader, epoch or
ISR moved, a broker came or went), and the entry is built again. Nothing has to
remember to invalidate: the generations move with the updates themselves.

Concurrency: owned by the broker's event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Container, Hashable

# (API version, listener name)
_PartKey = tuple[int, str]


class TopicMetadataParts:
    """Encoded Metadata topic entries, each valid while its stamp holds."""

    def __init__(self) -> None:
        self._parts: dict[str, tuple[Hashable, dict[_PartKey, bytes]]] = {}

    def __len__(self) -> int:
        return len(self._parts)

    def get(self, topic: str, version: int, listener: str, stamp: Hashable) -> bytes | None:
        """The entry kept for ``topic`` at ``version`` through ``listener`` if its stamp
        is ``stamp``, else None."""
        kept = self._parts.get(topic)
        if kept is None or kept[0] != stamp:
            return None
        return kept[1].get((version, listener))

    def put(self, topic: str, version: int, listener: str, stamp: Hashable, data: bytes) -> None:
        """Keep ``data`` as ``topic``'s entry; entries of an older stamp are dropped."""
        kept = self._parts.get(topic)
        if kept is None or kept[0] != stamp:
            kept = (stamp, {})
            self._parts[topic] = kept
        kept[1][version, listener] = data

    def retain(self, topics: Container[str]) -> None:
        """Drop the entries of every topic not in ``topics`` (deleted ones)."""
        for topic in [topic for topic in self._parts if topic not in topics]:
            del self._parts[topic]
