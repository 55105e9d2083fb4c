"""The records of consumer-protocol groups in ``__consumer_offsets``, in Kafka's format.

Kafka 4 writes six record types per consumer group beside the offset commits, told apart
by the version that starts the key (keys are non-flexible: an int16 version, then int16
length-prefixed strings); the values are flexible (KIP-482) version 0 structs: compact
strings and arrays (unsigned varint length + 1), 16-byte UUIDs, and an empty tagged-field
section after every struct. A null value is a tombstone.

===  =====================================  =========================================
key  record (key fields)                     value v0
===  =====================================  =========================================
 3   ConsumerGroupMetadata (group)           Epoch: the group epoch
 4   ConsumerGroupPartitionMetadata (group)  Topics[TopicId, TopicName, NumPartitions,
                                             PartitionMetadata[Partition, Racks]]
 5   ConsumerGroupMemberMetadata             InstanceId, RackId, ClientId, ClientHost,
     (group, member)                         SubscribedTopicNames, SubscribedTopicRegex,
                                             RebalanceTimeoutMs, ServerAssignor
 6   ConsumerGroupTargetAssignmentMetadata   AssignmentEpoch
     (group)
 7   ConsumerGroupTargetAssignmentMember     TopicPartitions[TopicId, Partitions]
     (group, member)
 8   ConsumerGroupCurrentMemberAssignment    MemberEpoch, PreviousMemberEpoch, State,
     (group, member)                         AssignedPartitions[TopicId, Partitions],
                                             PartitionsPendingRevocation[...]
===  =====================================  =========================================

Writing: ``*_record`` functions return ``(key, value)`` pairs for
``tickwheel.coordinator``'s batch builder. Reading: ``decode`` turns the key and value
bytes the offsets loader hands over into a ``ConsumerGroupRecord``; tagged fields are
skipped (Kafka's ClassicMemberMetadata, tag 0, is not used here). A record that does not
decode raises ``CorruptOffsetsRecordError``.

Pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tickwheel.coordinator._errors import CorruptOffsetsRecordError
from tickwheel.coordinator.group.consumer._group import TopicMetadata
from tickwheel.coordinator.group.consumer._member import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    normalized,
)
from tickwheel.protocol import uvarint

GROUP_METADATA_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_ASSIGNMENT_METADATA_KEY = 6
TARGET_ASSIGNMENT_MEMBER_KEY = 7
CURRENT_MEMBER_ASSIGNMENT_KEY = 8
CONSUMER_GROUP_KEY_VERSIONS = frozenset(
    range(GROUP_METADATA_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY + 1)
)
"""The key versions of consumer-group records."""
_MEMBER_KEYS = frozenset(
    {MEMBER_METADATA_KEY, TARGET_ASSIGNMENT_MEMBER_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY}
)
_VALUE_VERSION = 0

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

Entry = tuple[bytes, bytes | None]
"""A record's key and value (None: tombstone)."""


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    """ConsumerGroupMetadataValue."""

    epoch: int


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataValue:
    """ConsumerGroupPartitionMetadataValue."""

    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """ConsumerGroupMemberMetadataValue."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class TargetEpochValue:
    """ConsumerGroupTargetAssignmentMetadataValue."""

    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    """ConsumerGroupTargetAssignmentMemberValue."""

    assignment: Assignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    """ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned_partitions: Assignment
    partitions_pending_revocation: Assignment


RecordValue = (
    GroupEpochValue
    | SubscriptionMetadataValue
    | MemberMetadataValue
    | TargetEpochValue
    | TargetMemberValue
    | CurrentAssignmentValue
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A decoded consumer-group record (``value`` None: tombstone)."""

    key_version: int
    group_id: str
    member_id: str | None
    value: RecordValue | None


# --- writing -----------------------------------------------------------------------------


def _string(value: str) -> bytes:
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    encoded = value.encode()
    return uvarint(len(encoded) + 1) + encoded


def _compact_array(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


_NO_TAGS = b"\x00"


def _key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    key = _INT16.pack(version) + _string(group_id)
    return key if member_id is None else key + _string(member_id)


def _value(*parts: bytes) -> bytes:
    return _INT16.pack(_VALUE_VERSION) + b"".join(parts) + _NO_TAGS


def _topic_partitions(assignment: Assignment) -> bytes:
    return _compact_array(
        [
            topic_id.bytes + _compact_array([_INT32.pack(p) for p in sorted(partitions)]) + _NO_TAGS
            for topic_id, partitions in sorted(assignment.items())
        ]
    )


def group_epoch_record(group_id: str, epoch: int) -> Entry:
    """ConsumerGroupMetadata: the group epoch."""
    return _key(GROUP_METADATA_KEY, group_id), _value(_INT32.pack(epoch))


def subscription_metadata_record(group_id: str, topics: Iterable[TopicMetadata]) -> Entry:
    """ConsumerGroupPartitionMetadata: the subscribed topics' ids and partition counts."""
    encoded = [
        topic.topic_id.bytes
        + _compact_string(topic.name)
        + _INT32.pack(topic.num_partitions)
        + _compact_array([])  # PartitionMetadata: racks are not tracked (unused after 4.0)
        + _NO_TAGS
        for topic in sorted(topics, key=lambda t: t.name)
    ]
    return _key(PARTITION_METADATA_KEY, group_id), _value(_compact_array(encoded))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> Entry:
    """ConsumerGroupMemberMetadata: who the member is and what it subscribes to."""
    return _key(MEMBER_METADATA_KEY, group_id, member.member_id), _value(
        _compact_string(member.instance_id),
        _compact_string(member.rack_id),
        _compact_string(member.client_id),
        _compact_string(member.client_host),
        _compact_array([_compact_string(name) for name in member.subscribed_topic_names]),
        _compact_string(member.subscribed_topic_regex),
        _INT32.pack(member.rebalance_timeout_ms),
        _compact_string(member.server_assignor),
    )


def target_epoch_record(group_id: str, epoch: int) -> Entry:
    """ConsumerGroupTargetAssignmentMetadata: the target-assignment epoch."""
    return _key(TARGET_ASSIGNMENT_METADATA_KEY, group_id), _value(_INT32.pack(epoch))


def target_member_record(group_id: str, member_id: str, assignment: Assignment) -> Entry:
    """ConsumerGroupTargetAssignmentMember: one member's target."""
    return _key(TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), _value(
        _topic_partitions(assignment)
    )


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Entry:
    """ConsumerGroupCurrentMemberAssignment: the member's epochs, state and partitions."""
    return _key(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member.member_id), _value(
        _INT32.pack(member.member_epoch),
        _INT32.pack(member.previous_member_epoch),
        _INT8.pack(int(member.state)),
        _topic_partitions(member.assigned_partitions),
        _topic_partitions(member.partitions_pending_revocation),
    )


def member_tombstones(group_id: str, member_id: str) -> list[Entry]:
    """The tombstones of a member that left, in Kafka's order."""
    return [
        (_key(CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id), None),
        (_key(TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id), None),
        (_key(MEMBER_METADATA_KEY, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Entry]:
    """The tombstones of a deleted (empty) group, in Kafka's order."""
    return [
        (_key(TARGET_ASSIGNMENT_METADATA_KEY, group_id), None),
        (_key(PARTITION_METADATA_KEY, group_id), None),
        (_key(GROUP_METADATA_KEY, group_id), None),
    ]


# --- reading -----------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def take(self, size: int) -> bytes:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise CorruptOffsetsRecordError("consumer group record runs past its end")
        chunk = self._data[self._position : end]
        self._position = end
        return chunk

    def int8(self) -> int:
        value: int = _INT8.unpack(self.take(1))[0]
        return value

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def string(self) -> str:
        return self._decode(self.take(self.int16()))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptOffsetsRecordError("varint too long in consumer group record")

    def compact_string(self) -> str | None:
        length = self.uvarint()
        return None if length == 0 else self._decode(self.take(length - 1))

    def required_string(self) -> str:
        value = self.compact_string()
        if value is None:
            raise CorruptOffsetsRecordError("null where a string is required")
        return value

    def array_length(self) -> int:
        length = self.uvarint()
        if length == 0:
            raise CorruptOffsetsRecordError("null where an array is required")
        return length - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    @staticmethod
    def _decode(raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError as error:
            raise CorruptOffsetsRecordError("consumer group record string is not UTF-8") from error


def _read_topic_partitions(reader: _Reader) -> Assignment:
    assignment: dict[uuid.UUID, list[int]] = {}
    for _ in range(reader.array_length()):
        topic_id = reader.uuid()
        assignment[topic_id] = [reader.int32() for _ in range(reader.array_length())]
        reader.skip_tags()
    return normalized(assignment)


def _read_topic_metadata(reader: _Reader) -> TopicMetadata:
    topic_id = reader.uuid()
    name = reader.required_string()
    num_partitions = reader.int32()
    for _ in range(reader.array_length()):
        reader.int32()
        for _ in range(reader.array_length()):
            reader.required_string()
        reader.skip_tags()
    reader.skip_tags()
    return TopicMetadata(topic_id, name, num_partitions)


def _read_value(key_version: int, reader: _Reader) -> RecordValue:
    value: RecordValue
    if key_version == GROUP_METADATA_KEY:
        value = GroupEpochValue(reader.int32())
    elif key_version == PARTITION_METADATA_KEY:
        value = SubscriptionMetadataValue(
            tuple(_read_topic_metadata(reader) for _ in range(reader.array_length()))
        )
    elif key_version == MEMBER_METADATA_KEY:
        value = MemberMetadataValue(
            instance_id=reader.compact_string(),
            rack_id=reader.compact_string(),
            client_id=reader.required_string(),
            client_host=reader.required_string(),
            subscribed_topic_names=tuple(
                reader.required_string() for _ in range(reader.array_length())
            ),
            subscribed_topic_regex=reader.compact_string(),
            rebalance_timeout_ms=reader.int32(),
            server_assignor=reader.compact_string(),
        )
    elif key_version == TARGET_ASSIGNMENT_METADATA_KEY:
        value = TargetEpochValue(reader.int32())
    elif key_version == TARGET_ASSIGNMENT_MEMBER_KEY:
        value = TargetMemberValue(_read_topic_partitions(reader))
    else:
        member_epoch = reader.int32()
        previous = reader.int32()
        state_byte = reader.int8()
        try:
            state = MemberState(state_byte)
        except ValueError:
            state = MemberState.UNKNOWN
        value = CurrentAssignmentValue(
            member_epoch,
            previous,
            state,
            _read_topic_partitions(reader),
            _read_topic_partitions(reader),
        )
    reader.skip_tags()
    return value


def decode(key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """Decode a consumer-group record's key and value (None: tombstone)."""
    reader = _Reader(key)
    key_version = reader.int16()
    if key_version not in CONSUMER_GROUP_KEY_VERSIONS:
        raise CorruptOffsetsRecordError(f"key version {key_version} is no consumer group record")
    group_id = reader.string()
    member_id = reader.string() if key_version in _MEMBER_KEYS else None
    if value is None:
        return ConsumerGroupRecord(key_version, group_id, member_id, None)
    value_reader = _Reader(value)
    version = value_reader.int16()
    if version != _VALUE_VERSION:
        raise CorruptOffsetsRecordError(
            f"consumer group record (key version {key_version}) value version {version}"
        )
    return ConsumerGroupRecord(
        key_version, group_id, member_id, _read_value(key_version, value_reader)
    )
