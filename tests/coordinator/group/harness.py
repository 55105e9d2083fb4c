"""The coordinator's fast-tier harness: a coordinator on a manual clock.

``Harness`` builds a ``GroupCoordinator`` whose two purgatories run on ``SystemTimer``s
with a shared ``ManualClock`` and an ``InlineExecutor`` (the broker's event-loop mode,
minus the loop), over an in-memory ``OffsetsLog``. ``advance(ms)`` moves time and expires
what is due; answers land in ``Replies`` objects the tests inspect.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import RequestPayload, ResponsePayload

from tickwheel.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadata,
    GroupMetadataManager,
    JoinGroupResult,
    JoinRequest,
    SyncGroupResult,
)
from tickwheel.protocol import build_entity, convert, request_schema, response_schema
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

E = TypeVar("E", bound=RequestPayload)
CONSUMER = "consumer"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
INITIAL_DELAY_MS = 100


class MemoryOffsetsLog:
    """An in-memory ``OffsetsLog``: batches per partition, given offsets as a log would
    (the base offset patched in; the CRC does not cover it); appends can be made to fail."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.end_offsets: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None
        self.held: list[Callable[[], None]] = []
        self.hold = False

    def append(
        self, partition: int, records: bytes, on_appended: Callable[[ErrorCode, int], None]
    ) -> None:
        def complete() -> None:
            if self.fail_with is not None:
                on_appended(self.fail_with, -1)
                return
            base_offset = self.end_offsets.get(partition, 0)
            (last_delta,) = struct.unpack_from(">i", records, 23)
            self.end_offsets[partition] = base_offset + last_delta + 1
            placed = struct.pack(">q", base_offset) + records[8:]
            self.batches.setdefault(partition, []).append(placed)
            on_appended(ErrorCode.none, base_offset)

        if self.hold:
            self.held.append(complete)
        else:
            complete()

    def read(self, partition: int) -> Iterator[bytes]:
        yield from self.batches.get(partition, [])

    def release_held(self) -> None:
        held, self.held = self.held, []
        for complete in held:
            complete()


@dataclass
class Replies:
    """Answers received through callbacks, with a check that no group lock was held."""

    groups: list[GroupMetadata] = field(default_factory=list)
    joins: list[JoinGroupResult] = field(default_factory=list)
    syncs: list[SyncGroupResult] = field(default_factory=list)
    errors: list[ErrorCode] = field(default_factory=list)

    def _check_unlocked(self) -> None:
        for group in self.groups:
            assert not group.lock.held, "a callback ran under a group lock"

    def on_join(self, result: JoinGroupResult) -> None:
        self._check_unlocked()
        self.joins.append(result)

    def on_sync(self, result: SyncGroupResult) -> None:
        self._check_unlocked()
        self.syncs.append(result)

    def on_error(self, error: ErrorCode) -> None:
        self._check_unlocked()
        self.errors.append(error)

    @property
    def join(self) -> JoinGroupResult:
        assert len(self.joins) == 1, self.joins
        return self.joins[0]

    @property
    def sync(self) -> SyncGroupResult:
        assert len(self.syncs) == 1, self.syncs
        return self.syncs[0]


class Harness:
    """A started coordinator owning every ``__consumer_offsets`` partition."""

    def __init__(self, config: GroupConfig, offsets_log: MemoryOffsetsLog | None = None) -> None:
        self.clock = ManualClock(1_000_000)
        self.config = config
        self.offsets_log = MemoryOffsetsLog() if offsets_log is None else offsets_log
        self.timers: list[SystemTimer] = []
        self.manager = GroupMetadataManager(config, self.offsets_log, clock_ms=self.clock.now_ms)
        self.coordinator = GroupCoordinator(
            config, self.manager, timer_for=self._timer_for, reaper_enabled=False
        )
        self.coordinator.startup()
        for partition in range(config.offsets_topic_num_partitions):
            self.coordinator.on_elected(partition)

    def _timer_for(self, name: str) -> SystemTimer:
        timer = SystemTimer(name, clock=self.clock, executor=InlineExecutor())
        self.timers.append(timer)
        return timer

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, stopping at each bucket expiration on the way."""
        target_ms = self.clock.now_ms() + ms
        while True:
            pending = [t.next_expiration_ms() for t in self.timers]
            due = [at for at in pending if at is not None and at <= target_ms]
            step_to = max(min(due, default=target_ms), self.clock.now_ms())
            self.clock.advance(step_to - self.clock.now_ms())
            for timer in self.timers:
                while timer.advance_clock(0):
                    pass
            if step_to >= target_ms and not due:
                return

    def group(self, group_id: str) -> GroupMetadata:
        group = self.manager.get_group(group_id)
        assert group is not None
        return group

    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
        instance_id: str | None = None,
        require_known_member_id: bool = False,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocol_type: str = CONSUMER,
        client_id: str = "client",
    ) -> Replies:
        replies = Replies()
        request = JoinRequest(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=instance_id,
            require_known_member_id=require_known_member_id,
            client_id=client_id,
            client_host="/127.0.0.1",
            rebalance_timeout_ms=rebalance_ms,
            session_timeout_ms=session_ms,
            protocol_type=protocol_type,
            protocols=protocols,
        )
        self.coordinator.handle_join_group(request, replies.on_join)
        group = self.manager.get_group(group_id)
        if group is not None:
            replies.groups.append(group)
        return replies

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
    ) -> Replies:
        replies = Replies(groups=[self.group(group_id)])
        self.coordinator.handle_sync_group(
            group_id,
            generation_id,
            member_id,
            instance_id,
            None,
            None,
            assignments or {},
            replies.on_sync,
        )
        return replies

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None
    ) -> ErrorCode:
        replies = Replies()
        group = self.manager.get_group(group_id)
        if group is not None:
            replies.groups.append(group)
        self.coordinator.handle_heartbeat(
            group_id, member_id, instance_id, generation_id, replies.on_error
        )
        assert len(replies.errors) == 1
        return replies.errors[0]

    def close(self) -> None:
        self.coordinator.shutdown()


def make_config(**overrides: int) -> GroupConfig:
    values = {
        "group_initial_rebalance_delay_ms": INITIAL_DELAY_MS,
        "group_min_session_timeout_ms": 100,
        "offsets_topic_num_partitions": 4,
    }
    values.update(overrides)
    return GroupConfig(**values)


def sent(cls: type[E], version: int, values: dict[str, Any]) -> E:
    """A request a client sent at ``version`` as the coordinator reads it: ``cls``, the
    newest version it knows (what the broker's ``DecodedRequest.body_as`` gives)."""
    return convert(cls, build_entity(request_schema(cls.__api_key__, version), values))


def answered(response: ResponsePayload, version: int) -> Any:
    """``response`` as the client gets it at ``version``: converted down, encoded and
    decoded again by kio (which proves it valid at that version)."""
    cls = response_schema(type(response).__api_key__, version)
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, convert(cls, response))
    decoded, _size = entity_reader(cls)(buffer.getvalue(), 0)
    return decoded
