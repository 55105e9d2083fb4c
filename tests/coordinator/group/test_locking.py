"""The lock story under real threads: no deadlock, no callback under a group lock.

Kafka's coordinator deadlocked when a heartbeat expiry on the timer's thread met a
request thread holding a group lock (KAFKA-3994), and when commits completed other
groups' operations under a group lock (KAFKA-8334). Here the purgatories run in
threaded mode (reaper threads, expirations on executor threads, a real clock) with
sessions short enough to expire while several threads act as clients of two groups:
they join and wait for the answer, rejoin when told to, sync, heartbeat, commit, leave,
and now and then go silent for longer than their session. Every callback checks that
its thread holds no group lock; the run must end within its deadline, and sessions
must really have expired during it.
"""

from __future__ import annotations

import random
import threading
import time

from kio.schema.errors import ErrorCode

from tickwheel.coordinator.group import (
    GroupCoordinator,
    GroupMetadataManager,
    JoinGroupResult,
    JoinRequest,
    LeavingMember,
    OffsetValue,
)

from .harness import MemoryOffsetsLog, make_config

THREADS = 6
RUN_S = 1.0
SESSION_MS = 40
REBALANCE_MS = 4 * SESSION_MS
ANSWER_WAIT_S = 1.0
DEADLINE_S = 60.0
GROUPS = ("alpha", "beta")


class Client:
    """One simulated consumer in one thread, a member of at most one group at a time."""

    def __init__(self, coordinator: GroupCoordinator, seed: int, check: object) -> None:
        self.coordinator = coordinator
        self.rng = random.Random(seed)
        self.seed = seed
        self.check = check
        self.group_id = self.rng.choice(GROUPS)
        self.member_id = ""
        self.generation = -1

    def _checked(self, what: str) -> None:
        assert callable(self.check)
        self.check(what)

    def join(self) -> None:
        answered = threading.Event()
        results: list[JoinGroupResult] = []

        def joined(result: JoinGroupResult) -> None:
            self._checked("join")
            results.append(result)
            answered.set()

        request = JoinRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            group_instance_id=None,
            require_known_member_id=False,
            client_id=f"client-{self.seed}",
            client_host="/127.0.0.1",
            rebalance_timeout_ms=REBALANCE_MS,
            session_timeout_ms=SESSION_MS,
            protocol_type="consumer",
            protocols=(("range", b""),),
        )
        self.coordinator.handle_join_group(request, joined)
        if not answered.wait(ANSWER_WAIT_S):
            return
        result = results[0]
        if result.error is ErrorCode.none:
            self.member_id, self.generation = result.member_id, result.generation_id
            assignment = {result.member_id: b"all"} if result.leader_id == self.member_id else {}
            self.coordinator.handle_sync_group(
                self.group_id,
                self.generation,
                self.member_id,
                None,
                None,
                None,
                assignment,
                lambda _result: self._checked("sync"),
            )
        else:
            self.member_id = ""

    def heartbeat(self) -> None:
        outcome: list[ErrorCode] = []

        def answered(error: ErrorCode) -> None:
            self._checked("heartbeat")
            outcome.append(error)

        self.coordinator.handle_heartbeat(
            self.group_id, self.member_id, None, self.generation, answered
        )
        if outcome and outcome[0] is ErrorCode.rebalance_in_progress:
            self.join()
        elif outcome and outcome[0] is not ErrorCode.none:
            self.member_id = ""

    def step(self) -> None:
        if not self.member_id:
            self.join()
            return
        action = self.rng.randrange(10)
        if action < 6:
            self.heartbeat()
        elif action < 8:
            self.coordinator.handle_commit_offsets(
                self.group_id,
                self.member_id,
                None,
                self.generation,
                {("t", self.seed): OffsetValue(self.rng.randrange(100), -1, "", 0)},
                lambda _errors: self._checked("commit"),
            )
        elif action == 8:
            self.coordinator.handle_leave_group(
                self.group_id,
                [LeavingMember(self.member_id, None)],
                lambda _error, _members: self._checked("leave"),
            )
            self.member_id = ""
            self.group_id = self.rng.choice(GROUPS)
        else:
            # Silent for longer than the session: the coordinator must expire us.
            time.sleep(3 * SESSION_MS / 1000)


def test_threads_and_expiring_sessions_neither_deadlock_nor_call_back_under_a_lock() -> None:
    config = make_config(group_initial_rebalance_delay_ms=5, group_min_session_timeout_ms=10)
    manager = GroupMetadataManager(config, MemoryOffsetsLog())
    coordinator = GroupCoordinator(config, manager)  # threaded purgatories, system clock
    coordinator.startup()
    for partition in range(config.offsets_topic_num_partitions):
        coordinator.on_elected(partition)
    violations: list[str] = []
    failures: list[BaseException] = []

    def check(what: str) -> None:
        # ``_is_owned`` is private but exact: does *this* thread hold the lock?
        held = [g for g in manager.current_groups() if g.lock.rlock._is_owned()]  # type: ignore[attr-defined]
        violations.extend(f"{what} under {g.group_id}'s lock" for g in held)

    stop_at = time.monotonic() + RUN_S

    def run(seed: int) -> None:
        client = Client(coordinator, seed, check)
        try:
            while time.monotonic() < stop_at:
                client.step()
        except BaseException as error:  # surfaced to the test thread below
            failures.append(error)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    try:
        assert not any(thread.is_alive() for thread in threads), "deadlocked"
        assert failures == []
        assert violations == []
        assert coordinator.heartbeat_purgatory.expired > 0
    finally:
        coordinator.shutdown()
