"""Kafka's ConsumerProtocol, as far as the coordinator reads it: the subscribed topics.

A member of a group whose protocol type is ``consumer`` joins with one
ConsumerProtocolSubscription per assignor it supports: ``version int16, topics
[string], user_data bytes``, later versions adding owned partitions, a generation and
a rack after these. The coordinator reads only the version and the topics, the prefix
that every version shares (Kafka's GroupMetadata.computeSubscribedTopics parses with
version 0 for the same reason), to know which topics a group consumes: a Stable group's
offsets of other topics may expire, and OffsetDelete refuses the topics it consumes
(GROUP_SUBSCRIBED_TO_TOPIC).

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscription_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None if it does not parse."""
    try:
        (version,) = _INT16.unpack_from(metadata, 0)
        (count,) = _INT32.unpack_from(metadata, _INT16.size)
        if version < 0 or count < 0:
            return None
        position = _INT16.size + _INT32.size
        topics: set[str] = set()
        for _ in range(count):
            (length,) = _INT16.unpack_from(metadata, position)
            position += _INT16.size
            end = position + length
            if length < 0 or end > len(metadata):
                return None
            topics.add(metadata[position:end].decode())
            position = end
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)
