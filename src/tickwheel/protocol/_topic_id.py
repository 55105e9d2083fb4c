"""Topic ids as text: Kafka's ``Uuid.toString``, URL-safe base64 without padding.

Kafka writes a topic id this way in ZooKeeper, in a partition's ``partition.metadata``
file and in the keys of its coordinators' records (a share-partition is
``group:topicId:partition``, hashed to a ``__share_group_state`` partition), so every
broker must produce the same text for the same id. librdkafka prints ids in standard
base64 ('+' and '/'); ``decode_topic_id`` accepts both alphabets.

Pure functions; safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import uuid

_UUID_BYTES = 16


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """``topic_id`` in Kafka's form: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def decode_topic_id(text: str) -> uuid.UUID | None:
    """The id written by ``encode_topic_id`` (or in standard base64), None if not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == _UUID_BYTES else None
