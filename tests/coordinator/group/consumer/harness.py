"""A consumer-group coordinator on a manual clock, over an in-memory offsets log."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from coordinator.group.harness import MemoryOffsetsLog
from tickwheel.coordinator.group import GroupConfig, GroupMetadataManager
from tickwheel.coordinator.group.consumer import (
    Assignment,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResult,
)
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer

SESSION_MS = 3_000
INTERVAL_MS = 500
REBALANCE_MS = 5_000
TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=0xA11CE)


def consumer_config(**overrides: int | str) -> GroupConfig:
    values: dict[str, int | str] = {
        "offsets_topic_num_partitions": 1,
        "group_consumer_session_timeout_ms": SESSION_MS,
        "group_consumer_min_session_timeout_ms": 1_000,
        "group_consumer_heartbeat_interval_ms": INTERVAL_MS,
        "group_consumer_min_heartbeat_interval_ms": 100,
        **overrides,
    }
    return GroupConfig(**values)  # type: ignore[arg-type]


class Topics:
    """A TopicCatalog the tests change."""

    def __init__(self) -> None:
        self.partitions: dict[str, int] = {}
        self.ids: dict[str, uuid.UUID] = {}

    def add(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> uuid.UUID:
        self.partitions[name] = partitions
        self.ids.setdefault(name, topic_id or uuid.uuid4())
        return self.ids[name]

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self.ids.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.ids.items() if i == topic_id), None)

    def partition_count(self, name: str) -> int | None:
        return self.partitions.get(name)

    def topic_names(self) -> Iterable[str]:
        return list(self.partitions)


class ConsumerHarness:
    """A started coordinator that owns the one offsets partition."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        offsets_log: MemoryOffsetsLog | None = None,
        topics: Topics | None = None,
    ) -> None:
        self.config = config or consumer_config()
        self.clock = ManualClock(1_000_000)
        self.offsets_log = offsets_log or MemoryOffsetsLog()
        self.topics = topics or Topics()
        if topics is None:
            self.topics.add(TOPIC, 4, TOPIC_ID)
        self.timer = SystemTimer("consumer", clock=self.clock, executor=InlineExecutor())
        self.manager = GroupMetadataManager(
            self.config, self.offsets_log, clock_ms=self.clock.now_ms
        )
        self.coordinator = ConsumerGroupCoordinator(
            self.config, self.manager, self.offsets_log, self.topics, timer=self.timer
        )
        self.manager.other_records_listener = self.coordinator.replay
        self.manager.load_partition(0, lambda _group: None)

    def advance(self, ms: int) -> None:
        """Move the clock, expiring each bucket on the way."""
        target_ms = self.clock.now_ms() + ms
        while True:
            due = self.timer.next_expiration_ms()
            step_to = target_ms if due is None or due > target_ms else max(due, self.clock.now_ms())
            self.clock.advance(step_to - self.clock.now_ms())
            while self.timer.advance_clock(0):
                pass
            if step_to >= target_ms:
                return

    def heartbeat(
        self,
        member_id: str,
        epoch: int,
        *,
        group_id: str = "g",
        topics: tuple[str, ...] | None = None,
        owned: Assignment | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
        regex: str | None = None,
    ) -> HeartbeatResult:
        """One heartbeat; a join (epoch 0) subscribes to ``TOPIC`` unless told otherwise."""
        joining = epoch == 0
        request = HeartbeatRequest(
            group_id=group_id,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rebalance_timeout_ms=REBALANCE_MS if joining else -1,
            subscribed_topic_names=(topics or ((TOPIC,) if regex is None else None))
            if joining
            else topics,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned={} if joining else owned,
            client_id="client",
            client_host="/127.0.0.1",
        )
        results: list[HeartbeatResult] = []
        self.coordinator.handle_heartbeat(request, results.append)
        assert len(results) == 1
        return results[0]

    def ok(self, member_id: str, epoch: int, **kwargs: object) -> HeartbeatResult:
        result = self.heartbeat(member_id, epoch, **kwargs)  # type: ignore[arg-type]
        assert result.error is ErrorCode.none, result
        return result


@dataclass
class Client:
    """A well-behaved member: it takes what it is given and reports what it owns."""

    harness: ConsumerHarness
    member_id: str
    epoch: int = 0
    owned: Assignment = field(default_factory=dict)
    history: list[frozenset[int]] = field(default_factory=list)

    def beat(self) -> None:
        result = self.harness.ok(self.member_id, self.epoch, owned=dict(self.owned))
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = dict(result.assignment)
        self.history.append(self.partitions)

    @property
    def partitions(self) -> frozenset[int]:
        return self.owned.get(TOPIC_ID, frozenset())
