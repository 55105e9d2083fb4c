"""``ShareGroupAdmin``: a share group's offsets as an administrator sees and moves them.

Kafka's ``kafka-share-groups.sh`` works through four requests that the group
coordinator answers with the share coordinator's help (KIP-932):

- DescribeShareGroupOffsets (key 90, v0-1): each share-partition's start offset and
  leader epoch, read from the share state (ReadShareGroupStateSummary), and (v1) its lag
  when this broker leads the partition (high watermark less start offset; -1 when not
  known here). Null topics mean every share-partition the group has state for.
- AlterShareGroupOffsets (key 91): start share-partitions again at the given offsets
  (InitializeShareGroupState at the next state epoch: every writer of the old state is
  fenced, and a share-partition this broker caches is dropped so the next fetch loads
  the new state).
- DeleteShareGroupOffsets (key 92): forget the state of every partition of the given
  topics; the group starts them again by ``share.auto.offset.reset``.
- DeleteGroups for a share group: its state on every partition, then the group.

Altering, deleting offsets and deleting the group need an empty group (no member):
NON_EMPTY_GROUP otherwise. A group id that belongs to a classic or consumer group is
GROUP_ID_NOT_FOUND here ("not a share group"), as is one that is neither a share group
known in memory nor has share state (share groups' membership is rebuilt from
heartbeats after a restart; their state is what lasts).

Which share-partitions a group has: the topics its members subscribe to, and every
share-partition whose state this broker's share coordinator keeps (all of them on a
single node; in a cluster, those of the ``__share_group_state`` partitions it leads --
Kafka keeps the list in ``__consumer_offsets``, which this broker does not yet do).

Concurrency contract: event-loop thread only; the persister's calls are awaited.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group.share._coordinator import ShareGroupCoordinator
from tickwheel.share_delivery import PersisterError, ShareGroupState, SharePartitionKey

UNKNOWN_LAG = -1
NO_OFFSET = -1


class ShareStateAdmin(Protocol):
    """What the administrator's requests need of the share state's persister."""

    async def read_summary(self, key: SharePartitionKey) -> ShareGroupState | None:
        """A share-partition's start offset and epochs, None without state."""
        ...

    async def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> None:
        """Start a share-partition at ``start_offset`` at ``state_epoch``."""
        ...

    async def delete_state(self, key: SharePartitionKey) -> None:
        """Forget a share-partition's state."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One share-partition as DescribeShareGroupOffsets answers it."""

    partition: int
    start_offset: int = NO_OFFSET
    leader_epoch: int = -1
    lag: int = UNKNOWN_LAG
    error_code: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    """A topic's share-partitions in an answer; ``topic_id`` None for an unknown topic."""

    topic_name: str
    topic_id: uuid.UUID | None
    partitions: list[PartitionOffset] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ShareGroupTopology:
    """What the admin needs of the broker's topics and partitions."""

    topic_id: Callable[[str], uuid.UUID | None]
    topic_name: Callable[[uuid.UUID], str | None]
    partition_count: Callable[[str], int]
    high_watermark: Callable[[str, int], int | None]
    """The partition's high watermark when this broker leads it, else None."""


class ShareGroupAdmin:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and
    DeleteGroups for share groups."""

    def __init__(
        self,
        groups: ShareGroupCoordinator,
        persister: ShareStateAdmin,
        topology: ShareGroupTopology,
        *,
        stored_keys: Callable[[str], Iterable[SharePartitionKey]],
        forget: Callable[[SharePartitionKey], None],
        other_group_exists: Callable[[str], bool],
    ) -> None:
        self._groups = groups
        self._persister = persister
        self._topology = topology
        self._stored_keys = stored_keys
        self._forget = forget
        self._other_group_exists = other_group_exists

    # -- who is a share group --------------------------------------------------------

    def is_share_group(self, group_id: str) -> bool:
        """A share group known in memory, or one with share state (after a restart)."""
        if self._groups.is_share_group(group_id):
            return True
        return not self._other_group_exists(group_id) and any(self._stored_keys(group_id))

    def _group_error(self, group_id: str, *, needs_empty: bool) -> ErrorCode | None:
        if not self.is_share_group(group_id):
            return ErrorCode.group_id_not_found
        group = self._groups.groups.get(group_id)
        if needs_empty and group is not None and group.members:
            return ErrorCode.non_empty_group
        return None

    def _known_topics(self, group_id: str) -> dict[str, set[int]]:
        """Each topic of the group, with the partitions that have state (if any)."""
        topics: dict[str, set[int]] = {}
        group = self._groups.groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                for topic in member.subscribed_topic_names:
                    topics.setdefault(topic, set())
        for key in self._stored_keys(group_id):
            name = self._topology.topic_name(key.topic_id)
            if name is not None:
                topics.setdefault(name, set()).add(key.partition)
        return topics

    # -- DescribeShareGroupOffsets ---------------------------------------------------

    async def describe_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[ErrorCode, list[TopicOffsets]]:
        """The group's error, or the start offset of each asked share-partition (None:
        every share-partition it has)."""
        error = self._group_error(group_id, needs_empty=False)
        if error is not None:
            return error, []
        if topics is None:
            asked: list[tuple[str, Sequence[int]]] = [
                (name, sorted(partitions) or range(self._topology.partition_count(name)))
                for name, partitions in sorted(self._known_topics(group_id).items())
            ]
        else:
            asked = list(topics)
        answers = []
        for name, partitions in asked:
            topic_id = self._topology.topic_id(name)
            answer = TopicOffsets(name, topic_id)
            for partition in partitions:
                answer.partitions.append(
                    await self._describe_partition(group_id, name, topic_id, partition)
                )
            answers.append(answer)
        return ErrorCode.none, answers

    async def _describe_partition(
        self, group_id: str, name: str, topic_id: uuid.UUID | None, partition: int
    ) -> PartitionOffset:
        if topic_id is None or not 0 <= partition < self._topology.partition_count(name):
            return PartitionOffset(partition, error_code=ErrorCode.unknown_topic_or_partition)
        try:
            state = await self._persister.read_summary(
                SharePartitionKey(group_id, topic_id, partition)
            )
        except PersisterError as exc:
            return PartitionOffset(partition, error_code=exc.error_code)
        if state is None:
            return PartitionOffset(partition)
        high_watermark = self._topology.high_watermark(name, partition)
        lag = (
            UNKNOWN_LAG
            if high_watermark is None or state.start_offset < 0
            else max(0, high_watermark - state.start_offset)
        )
        return PartitionOffset(partition, state.start_offset, state.leader_epoch, lag)

    # -- AlterShareGroupOffsets, DeleteShareGroupOffsets -------------------------------

    async def alter_offsets(
        self, group_id: str, offsets: Mapping[str, Mapping[int, int]]
    ) -> tuple[ErrorCode, dict[str, dict[int, ErrorCode]]]:
        """Start each share-partition again at its offset; the group's error, or each
        partition's."""
        error = self._group_error(group_id, needs_empty=True)
        if error is not None:
            return error, {}
        results: dict[str, dict[int, ErrorCode]] = {}
        for name, partitions in offsets.items():
            topic_id = self._topology.topic_id(name)
            count = self._topology.partition_count(name)
            answers = results.setdefault(name, {})
            for partition, start_offset in partitions.items():
                if topic_id is None or not 0 <= partition < count:
                    answers[partition] = ErrorCode.unknown_topic_or_partition
                elif start_offset < 0:
                    answers[partition] = ErrorCode.invalid_request
                else:
                    key = SharePartitionKey(group_id, topic_id, partition)
                    answers[partition] = await self._reset(key, start_offset)
        return ErrorCode.none, results

    async def _reset(self, key: SharePartitionKey, start_offset: int) -> ErrorCode:
        try:
            current = await self._persister.read_summary(key)
            state_epoch = 0 if current is None else current.state_epoch
            await self._persister.initialize_state(key, state_epoch + 1, start_offset)
        except PersisterError as exc:
            return exc.error_code
        self._forget(key)
        return ErrorCode.none

    async def delete_offsets(
        self, group_id: str, topic_names: Sequence[str]
    ) -> tuple[ErrorCode, dict[str, ErrorCode]]:
        """Forget the state of every partition of each topic; the group's error, or each
        topic's."""
        error = self._group_error(group_id, needs_empty=True)
        if error is not None:
            return error, {}
        results: dict[str, ErrorCode] = {}
        for name in topic_names:
            topic_id = self._topology.topic_id(name)
            if topic_id is None:
                results[name] = ErrorCode.unknown_topic_or_partition
                continue
            keys = [
                SharePartitionKey(group_id, topic_id, partition)
                for partition in range(self._topology.partition_count(name))
            ]
            results[name] = await self._delete_states(keys)
        return ErrorCode.none, results

    async def _delete_states(self, keys: Iterable[SharePartitionKey]) -> ErrorCode:
        for key in keys:
            try:
                await self._persister.delete_state(key)
            except PersisterError as exc:
                return exc.error_code
            self._forget(key)
        return ErrorCode.none

    # -- DeleteGroups ----------------------------------------------------------------

    async def delete_group(self, group_id: str) -> ErrorCode:
        """Delete an empty share group and its state."""
        error = self._group_error(group_id, needs_empty=True)
        if error is not None:
            return error
        keys: set[SharePartitionKey] = set(self._stored_keys(group_id))
        for name, partitions in self._known_topics(group_id).items():
            topic_id = self._topology.topic_id(name)
            if topic_id is None:
                continue
            every = partitions or range(self._topology.partition_count(name))
            keys.update(SharePartitionKey(group_id, topic_id, p) for p in every)
        error = await self._delete_states(sorted(keys, key=_key_order))
        if error is not ErrorCode.none:
            return error
        # A member may have joined while the states were deleted: it keeps the group.
        if self._group_error(group_id, needs_empty=True) is ErrorCode.non_empty_group:
            return ErrorCode.non_empty_group
        self._groups.delete_group(group_id)
        return ErrorCode.none


def _key_order(key: SharePartitionKey) -> tuple[str, int]:
    return str(key.topic_id), key.partition
