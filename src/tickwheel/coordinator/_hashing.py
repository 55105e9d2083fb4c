"""Which ``__consumer_offsets`` partition a group belongs to.

Kafka places a group on partition ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``
and the leader of that partition is the group's coordinator. Every client and every broker
of a cluster must agree on this number, so it is computed exactly as Java does: the
``String.hashCode`` of the group id over its UTF-16 code units, in 32-bit two's-complement
arithmetic, and ``Utils.abs`` mapping ``Integer.MIN_VALUE`` to 0.

Pure functions; safe from any thread.
"""

from __future__ import annotations

_INT32_MASK = 0xFFFFFFFF
_INT32_SIGN = 0x80000000
_INT32_MIN = -0x80000000
_JAVA_HASH_MULTIPLIER = 31
_UTF16_UNIT_BYTES = 2


def java_string_hash(text: str) -> int:
    """Return Java's ``String.hashCode()`` of ``text`` (a signed 32-bit int)."""
    encoded = text.encode("utf-16-be", "surrogatepass")
    hash_value = 0
    for index in range(0, len(encoded), _UTF16_UNIT_BYTES):
        unit = (encoded[index] << 8) | encoded[index + 1]
        hash_value = (hash_value * _JAVA_HASH_MULTIPLIER + unit) & _INT32_MASK
    return hash_value - (1 << 32) if hash_value & _INT32_SIGN else hash_value


def java_abs(value: int) -> int:
    """Return Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if value == _INT32_MIN else abs(value)


def partition_for(group_id: str, num_partitions: int) -> int:
    """Return the ``__consumer_offsets`` partition of ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return java_abs(java_string_hash(group_id)) % num_partitions
