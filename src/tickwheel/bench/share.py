"""``tickwheel bench share``: share groups (KIP-932) -- queues paying off, and what locks cost.

Three parts (``--parts``, all by default), run ``--rounds`` times, the parts taking turns
within each round so that a change of load on the shared machine hits all of them:

``queue`` -- queue semantics paying off. A ``tickwheel serve`` subprocess (logs on
``/dev/shm`` when it exists) and, per round, a fresh 1-partition topic.
``--share-consumers`` (8) share consumers (confluent-kafka ``ShareConsumer``, one
group, implicit acknowledgement, ``max.poll.records`` = ``--max-poll-records``), each
in its own thread, subscribe first; warm-up records are produced until one of them
receives one (a new share group starts at the high watermark,
``share.auto.offset.reset`` latest), then ``--records`` records in producer batches
of ``--producer-batch`` (``batch.num.messages``). Every
record is "processed" by a ``--process-ms`` sleep on the consumer's thread. Then one
classic consumer (``Consumer``, ``group.protocol`` classic, ``auto.offset.reset``
earliest) reads the same records of the same topic, sleeping as long per record. Each
side's rate is records / (wall time from its first record received to its last record
processed); ratio = share / classic (target >= 6).

Why the batch settings (defaults 10 and 10). ``SharePartition.acquire`` takes whole record
batches until a ShareFetch's ``max_records`` is reached (Kafka's batch-optimized
acquisition; it may pass the limit to finish a batch), and librdkafka sends its
``max.poll.records`` there (default 500) and has no ``share.acquire.mode`` to ask for
a strict record limit. With librdkafka's defaults one consumer acquires a whole
producer batch, or 500 records of small ones, while the others find nothing: queue
semantics need small acquisitions -- small producer batches and a small
``max.poll.records``.

``locks`` -- lock churn in one process, CPU time (``time.process_time``), the cyclic GC
on. ``--outstanding`` acquisition locks of one record each are outstanding; each of
``--locks`` steps releases (acknowledges) one, whose ``release_one`` cancels it, then
creates a lock with Kafka's default duration (30 s) and adds it. Two release orders:
the oldest lock first (how share consumers acknowledge, and a heap's best case: the
cancelled entry is always its head) and a random outstanding lock (pre-drawn with
``--seed``; acknowledgements of many members and RELEASEs interleave). Peers, same
inputs, taking turns:

- ``wheel`` -- the real ``tickwheel.share_delivery.AcquisitionLock`` on a real
  ``tickwheel.timer.SystemTimer`` (Kafka's ``tick_ms=1, wheel_size=20``), a
  ``ManualClock`` moved 1 ms every ``LOCKS_PER_MS`` locks, an ``InlineExecutor``;
- ``heapq`` -- the same lock fields on a heap of deadlines: add pushes ``(deadline,
  seq, lock)``; cancel flags the lock and pops the flagged entries off the heap's
  head (lazy deletion: a heap cannot unlink an inner entry), rebuilding the heap when
  flagged entries are more than half of it (the ``heapq`` documentation's recipe).

Figures: ns per lock (create + add + cancel) in each order, ns per ``release_one`` that does not
cancel (a lock of many records acknowledged record by record), and bytes per outstanding
lock with ``--outstanding`` outstanding (``tracemalloc``: the locks plus the structure
holding them).

``broker`` -- lock churn through the broker. An in-process ``BackgroundBroker`` (its
event-loop thread serves everything), a 1-partition topic, the share-partition of
group ``churn`` loaded first (at the high watermark, as a first ShareFetch would), then
``--churn-records`` records produced in batches of ``--churn-batch``, then
``--churn-consumers`` share consumers (``max.poll.records`` = ``--churn-batch``, implicit
acknowledgement, no processing) acquire and acknowledge them all until the
share-partition's start offset reaches the end of the log. Figures: the CPU time of
the broker's event-loop thread (``CLOCK_THREAD_CPUTIME_ID`` of that thread, user +
system) from before the consumers start until the last acknowledgement, per record --
that is ShareFetch/ShareAcknowledge work (plus the members' heartbeats, a few per
second); the locks taken (counted by wrapping the share timer's ``add`` on the broker's
loop), records per lock; and the share of that CPU that lock bookkeeping is:
(locks x ns per lock + (records - locks) x ns per release_one) from the ``locks`` part
(oldest-first order), for the wheel and for the heap, and the timer's part of it alone
(locks x ns per lock).

Medians over the rounds. Results go to stdout, to JSON (``--out``) and to a PNG chart
(``--png``); docs/benchmarks.md records them.

Concurrency: the main thread runs the parts one after another. Each consumer has its
own thread and touches only its consumer, its own counter and a ``_Drain`` (behind its
lock); the broker part reads and instruments the in-process broker only through
``BackgroundBroker.call``, on the broker's loop.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import heapq
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.server import BackgroundBroker, Broker, BrokerConfig
from tickwheel.share_delivery import AcquisitionLock, SharePartitionKey
from tickwheel.timer import InlineExecutor, ManualClock, SystemTimer, TimerTask

QUEUE = "queue"
LOCKS = "locks"
BROKER = "broker"
PARTS = (QUEUE, LOCKS, BROKER)
WHEEL = "wheel"
HEAPQ = "heapq"

DEFAULT_ROUNDS = 3
DEFAULT_RECORDS = 1_000
DEFAULT_SHARE_CONSUMERS = 8
DEFAULT_PROCESS_MS = 5
DEFAULT_MAX_POLL_RECORDS = 10
DEFAULT_PRODUCER_BATCH = 10
DEFAULT_LOCKS = 300_000
DEFAULT_OUTSTANDING = 100_000
DEFAULT_SEED = 42
DEFAULT_CHURN_RECORDS = 1_000_000
DEFAULT_CHURN_BATCH = 500
"""librdkafka's default ``max.poll.records``; producer batches of the same size."""
DEFAULT_CHURN_CONSUMERS = 4
TARGET_SHARE_RATIO = 6.0
TARGET_LOCK_SHARE = 0.05

LOCK_DURATION_MS = 30_000
"""Kafka's ``group.share.record.lock.duration.ms`` default."""
LOCKS_PER_MS = 100
"""The ``locks`` part's clock moves 1 ms every this many locks (100,000 locks/s)."""
HEAP_COMPACT_MIN = 100
"""The heap peer rebuilds its heap when flagged entries exceed half of it and this many."""
RELEASES = 1_000_000
"""``release_one`` calls timed per round (one lock of that many records)."""

VALUE_BYTES = 16
POLL_S = 0.1
START_TIMEOUT_S = 30.0
WARM_UP_INTERVAL_S = 0.2
DRAIN_TIMEOUT_S = 120.0
CHURN_TIMEOUT_S = 900.0
FLUSH_TIMEOUT_S = 60.0
PROGRESS_POLL_S = 0.05
MEMBER_ID = "bench-member"
_WARM_UP = b"w"
_RECORD = b"r"
_NS_PER_S = 1e9
_TMPFS = "/dev/shm"

# Every figure's name and its label (with its unit) in the tables.
FIGURES = {
    "classic_records_per_s": "classic consumer, records/s",
    "share_records_per_s": "share consumers, records/s",
    "wheel_lock_ns": "wheel: ns per lock (add + cancel)",
    "heapq_lock_ns": "heapq: ns per lock (add + cancel)",
    "wheel_random_lock_ns": "wheel: ns per lock, random release order",
    "heapq_random_lock_ns": "heapq: ns per lock, random release order",
    "wheel_release_ns": "wheel: ns per release_one",
    "heapq_release_ns": "heapq: ns per release_one",
    "wheel_lock_bytes": "wheel: bytes per outstanding lock",
    "heapq_lock_bytes": "heapq: bytes per outstanding lock",
    "broker_cpu_us_per_record": "broker CPU, us per record",
    "records_per_lock": "records per lock",
}


@dataclass
class Round:
    """One round's figures, by ``FIGURES`` name (the parts it ran), and details."""

    figures: dict[str, float] = field(default_factory=dict)
    share_spread: list[int] = field(default_factory=list)
    locks_taken: int = 0


# ---- the broker as a subprocess (queue part) -------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _serve(log_parent: str) -> Iterator[str]:
    """A ``tickwheel serve`` subprocess on a free loopback port; yields its address."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="bench-share-", dir=log_parent) as log_dir:
        command = [sys.executable, "-m", "tickwheel.cli", "serve", "--log-level", "WARNING"]
        for setting in (
            f"listeners=PLAINTEXT://{address}",
            f"log.dirs={log_dir}",
            "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
        ):
            command += ["--override", setting]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the broker exited with status {process.returncode}")
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", port), 0.2),
                ):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the broker did not listen on {address}")
                time.sleep(PROGRESS_POLL_S)
            yield address
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _create_topic(bootstrap: str, topic: str) -> None:
    # confluent-kafka's stubs do not re-export NewTopic.
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
        AdminClient,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(START_TIMEOUT_S)


def _producer(bootstrap: str, batch_records: int) -> Any:
    from confluent_kafka import Producer  # noqa: PLC0415 - only the client parts need it

    return Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": batch_records}
    )


def _produce(producer: Any, topic: str, count: int) -> None:
    """``count`` records of ``VALUE_BYTES`` to ``topic``, waiting when the queue is full."""
    value = _RECORD.ljust(VALUE_BYTES, b".")
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(POLL_S)
    if producer.flush(FLUSH_TIMEOUT_S) != 0:
        raise TimeoutError("the producer did not deliver every record")


class _Drain:
    """Records processed by one side: the first receipt, the last completion, counts."""

    def __init__(self, expected: int, consumers: int) -> None:
        self.expected = expected
        self.per_consumer = [0] * consumers
        self.first_s: float | None = None
        self.last_s = 0.0
        self.warmed_up = threading.Event()
        self.done = threading.Event()
        self._lock = threading.Lock()

    def received(self) -> None:
        with self._lock:
            if self.first_s is None:
                self.first_s = time.monotonic()

    def processed(self, index: int) -> None:
        with self._lock:
            self.per_consumer[index] += 1
            self.last_s = time.monotonic()
            if sum(self.per_consumer) >= self.expected:
                self.done.set()

    def rate(self) -> float:
        if self.first_s is None or not self.done.is_set():
            raise RuntimeError("the drain did not finish")
        return self.expected / (self.last_s - self.first_s)


def _handle(drain: _Drain, index: int, message: Any, process_s: float) -> None:
    """One record on a consumer's thread: warm-ups are noted, records are processed."""
    if message.error() is not None:
        raise RuntimeError(f"consumer {index}: {message.error()}")
    if message.value() == _WARM_UP:
        drain.warmed_up.set()
        return
    drain.received()
    time.sleep(process_s)
    drain.processed(index)


def _share_side(bootstrap: str, topic: str, args: argparse.Namespace) -> tuple[float, list[int]]:
    """Records/s of the share consumers over ``args.records`` records, and their spread."""
    from confluent_kafka import ShareConsumer  # noqa: PLC0415

    group = f"queue-{uuid.uuid4().hex[:8]}"
    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "max.poll.records": args.max_poll_records,
            }
        )
        for _ in range(args.share_consumers)
    ]
    drain = _Drain(args.records, len(consumers))
    stop = threading.Event()
    failures: list[BaseException] = []
    process_s = args.process_ms / 1000

    def run(index: int) -> None:
        try:
            while not stop.is_set():
                for message in consumers[index].poll(POLL_S) or ():
                    _handle(drain, index, message, process_s)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            drain.done.set()
            drain.warmed_up.set()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(consumers))]
    for consumer in consumers:
        consumer.subscribe([topic])
    for thread in threads:
        thread.start()
    try:
        producer = _producer(bootstrap, args.producer_batch)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while not drain.warmed_up.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError("no share consumer received a warm-up record")
            producer.produce(topic, _WARM_UP)
            producer.flush(FLUSH_TIMEOUT_S)
            drain.warmed_up.wait(WARM_UP_INTERVAL_S)
        _produce(producer, topic, args.records)
        if not drain.done.wait(DRAIN_TIMEOUT_S):
            raise TimeoutError(f"the share consumers processed {sum(drain.per_consumer)} records")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for consumer in consumers:
            consumer.close()
    if failures:
        raise failures[0]
    return drain.rate(), sorted(drain.per_consumer)


def _classic_side(bootstrap: str, topic: str, args: argparse.Namespace) -> float:
    """Records/s of one classic consumer over the records the share side read."""
    from confluent_kafka import Consumer  # noqa: PLC0415

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"classic-{uuid.uuid4().hex[:8]}",
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
        }
    )
    drain = _Drain(args.records, 1)
    process_s = args.process_ms / 1000
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while not drain.done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the classic consumer processed {drain.per_consumer[0]}")
            message = consumer.poll(POLL_S)
            if message is not None:
                _handle(drain, 0, message, process_s)
    finally:
        consumer.close()
    return drain.rate()


def _queue_part(bootstrap: str, args: argparse.Namespace, measured: Round) -> None:
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    share_rate, spread = _share_side(bootstrap, topic, args)
    classic_rate = _classic_side(bootstrap, topic, args)
    measured.figures["share_records_per_s"] = share_rate
    measured.figures["classic_records_per_s"] = classic_rate
    measured.share_spread = spread


# ---- lock churn in one process (locks part) --------------------------------------------


def _expire_nothing(lock: Any) -> None:
    """No lock fires in this benchmark: each is released long before its deadline."""


class HeapLock:
    """``AcquisitionLock``'s fields on a heap of deadlines, cancelled by a flag."""

    __slots__ = (
        "cancelled",
        "first_offset",
        "heap",
        "last_offset",
        "member_id",
        "on_expire",
        "outstanding",
    )

    def __init__(
        self,
        heap: HeapLocks,
        first_offset: int,
        last_offset: int,
        member_id: str,
        on_expire: Callable[[HeapLock], None],
    ) -> None:
        self.heap = heap
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.member_id = member_id
        self.on_expire = on_expire
        self.outstanding = last_offset - first_offset + 1
        self.cancelled = False

    def release_one(self) -> None:
        """One record left the lock; the last cancels it (as ``AcquisitionLock``)."""
        self.outstanding -= 1
        if self.outstanding == 0:
            self.heap.cancel(self)


class HeapLocks:
    """Acquisition locks on a ``heapq`` of ``(deadline_ms, seq, lock)``.

    Cancel flags the lock and pops flagged entries off the head; an inner entry stays
    until it reaches the head or the heap is rebuilt (more than half flagged).
    """

    __slots__ = ("_dead", "_heap", "_sequence", "clock")

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, HeapLock]] = []
        self._sequence = 0
        self._dead = 0

    def add(self, lock: HeapLock, delay_ms: int) -> None:
        self._sequence += 1
        heapq.heappush(self._heap, (self.clock.now_ms() + delay_ms, self._sequence, lock))

    def cancel(self, lock: HeapLock) -> None:
        if lock.cancelled:
            return
        lock.cancelled = True
        self._dead += 1
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._dead -= 1
        if self._dead > HEAP_COMPACT_MIN and self._dead * 2 > len(heap):
            heap[:] = [entry for entry in heap if not entry[2].cancelled]
            heapq.heapify(heap)
            self._dead = 0


def _wheel_timer(clock: ManualClock) -> SystemTimer:
    return SystemTimer("bench-share-locks", clock=clock, executor=InlineExecutor())


def _fifo_slots(count: int, window: int) -> list[int]:
    """Release order of ``_churn``: the oldest outstanding lock each step."""
    return [step % window for step in range(count)]


def _random_slots(count: int, window: int, seed: int) -> list[int]:
    """Release order of ``_churn``: a random outstanding lock each step."""
    rnd = random.Random(seed)
    return [rnd.randrange(window) for _ in range(count)]


def _wheel_churn(slots: list[int], window: int) -> float:
    """ns per step of ``window`` outstanding one-record locks: release the lock in the
    step's slot (its ``release_one`` cancels it), create and add a new one there."""
    clock = ManualClock(0)
    timer = _wheel_timer(clock)
    add = timer.add
    locks = []
    for offset in range(window):
        lock = AcquisitionLock(LOCK_DURATION_MS, offset, offset, MEMBER_ID, _expire_nothing)
        add(lock)
        locks.append(lock)
    gc.collect()
    started = time.process_time()
    for step, slot in enumerate(slots, window):
        locks[slot].release_one()
        lock = AcquisitionLock(LOCK_DURATION_MS, step, step, MEMBER_ID, _expire_nothing)
        add(lock)
        locks[slot] = lock
        if step % LOCKS_PER_MS == 0:
            clock.advance(1)
    elapsed = time.process_time() - started
    timer.close()
    return elapsed / len(slots) * _NS_PER_S


def _heap_churn(slots: list[int], window: int) -> float:
    """The heap peer of ``_wheel_churn``."""
    clock = ManualClock(0)
    heap = HeapLocks(clock)
    add = heap.add
    locks = []
    for offset in range(window):
        lock = HeapLock(heap, offset, offset, MEMBER_ID, _expire_nothing)
        add(lock, LOCK_DURATION_MS)
        locks.append(lock)
    gc.collect()
    started = time.process_time()
    for step, slot in enumerate(slots, window):
        locks[slot].release_one()
        lock = HeapLock(heap, step, step, MEMBER_ID, _expire_nothing)
        add(lock, LOCK_DURATION_MS)
        locks[slot] = lock
        if step % LOCKS_PER_MS == 0:
            clock.advance(1)
    return (time.process_time() - started) / len(slots) * _NS_PER_S


def _release_ns(lock: AcquisitionLock | HeapLock, count: int) -> float:
    """ns per ``release_one`` of a lock over ``count + 1`` records (none cancels it)."""
    release_one = lock.release_one
    started = time.process_time()
    for _ in range(count):
        release_one()
    return (time.process_time() - started) / count * _NS_PER_S


def _wheel_bytes(outstanding: int) -> float:
    clock = ManualClock(0)
    timer = _wheel_timer(clock)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    locks = []
    for offset in range(outstanding):
        lock = AcquisitionLock(LOCK_DURATION_MS, offset, offset, MEMBER_ID, _expire_nothing)
        timer.add(lock)
        locks.append(lock)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert timer.size == len(locks)
    timer.close()
    return held / outstanding


def _heap_bytes(outstanding: int) -> float:
    clock = ManualClock(0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    heap = HeapLocks(clock)
    locks = []
    for offset in range(outstanding):
        lock = HeapLock(heap, offset, offset, MEMBER_ID, _expire_nothing)
        heap.add(lock, LOCK_DURATION_MS)
        locks.append(lock)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / outstanding


def _locks_part(args: argparse.Namespace, measured: Round, index: int) -> None:
    figures = measured.figures
    fifo = _fifo_slots(args.locks, args.outstanding)
    shuffled = _random_slots(args.locks, args.outstanding, args.seed + index)
    figures["wheel_lock_ns"] = _wheel_churn(fifo, args.outstanding)
    figures["heapq_lock_ns"] = _heap_churn(fifo, args.outstanding)
    figures["wheel_random_lock_ns"] = _wheel_churn(shuffled, args.outstanding)
    figures["heapq_random_lock_ns"] = _heap_churn(shuffled, args.outstanding)
    releases = min(RELEASES, args.locks)
    figures["wheel_release_ns"] = _release_ns(
        AcquisitionLock(LOCK_DURATION_MS, 0, releases, MEMBER_ID, _expire_nothing), releases
    )
    figures["heapq_release_ns"] = _release_ns(
        HeapLock(HeapLocks(ManualClock(0)), 0, releases, MEMBER_ID, _expire_nothing), releases
    )
    figures["wheel_lock_bytes"] = _wheel_bytes(args.outstanding)
    figures["heapq_lock_bytes"] = _heap_bytes(args.outstanding)


# ---- lock churn through the broker (broker part) ---------------------------------------


@dataclass
class _Churn:
    """What the broker part learns on the broker's loop: the share-partition's key, the
    loop thread's id, and the locks counted so far."""

    key: SharePartitionKey
    loop_thread: int
    locks_taken: list[int]


class _CountingTimer:
    """A timer that counts its ``add`` calls into ``taken[0]`` and passes every call on."""

    def __init__(self, timer: object, taken: list[int]) -> None:
        self._timer = timer
        self._taken = taken

    def add(self, task: TimerTask) -> None:
        self._taken[0] += 1
        self._timer.add(task)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._timer, name)


def _prepare_churn(broker: BackgroundBroker, topic: str, group: str) -> _Churn:
    """Create ``topic``, count the share timer's adds, load ``group``'s share-partition
    of it (at the high watermark, as a first ShareFetch would)."""
    broker.call(lambda b: b.context.create_topic(topic, 1, {}))
    taken = [0]

    def prepare(b: Broker) -> _Churn:
        manager = b.context.share_partitions
        topic_id = b.context.topic_id(topic)
        if topic_id is None:
            raise RuntimeError(f"topic {topic} was not created")
        # Share-partitions loaded from here on take this timer: a counting proxy (the
        # compiled SystemTimer's methods cannot be replaced on the instance).
        setattr(manager, "lock_timer", _CountingTimer(manager.lock_timer, taken))  # noqa: B010 - mypy forbids assigning another type
        return _Churn(SharePartitionKey(group, topic_id, 0), threading.get_ident(), taken)

    churn = broker.call(prepare)
    assert isinstance(churn, _Churn)

    async def load(b: Broker) -> object:
        return await b.context.share_partitions.share_partition(churn.key)

    broker.call(load)
    return churn


def _acknowledged(broker: BackgroundBroker, key: SharePartitionKey) -> int:
    """The share-partition's start offset: every record below it is acknowledged."""

    def start_offset(b: Broker) -> int:
        partition = b.context.share_partitions.get(key)
        return -1 if partition is None else partition.start_offset

    offset = broker.call(start_offset)
    assert isinstance(offset, int)
    return offset


def _consume_all(
    broker: BackgroundBroker, topic: str, churn: _Churn, args: argparse.Namespace
) -> list[int]:
    """Share consumers acquire and acknowledge until every record is acknowledged;
    returns how many each received."""
    from confluent_kafka import ShareConsumer  # noqa: PLC0415

    consumers = [
        ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": churn.key.group_id,
                "max.poll.records": args.churn_batch,
            }
        )
        for _ in range(args.churn_consumers)
    ]
    received = [0] * len(consumers)
    stop = threading.Event()

    def run(index: int) -> None:
        while not stop.is_set():
            received[index] += len(consumers[index].poll(POLL_S) or ())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(consumers))]
    for consumer in consumers:
        consumer.subscribe([topic])
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + CHURN_TIMEOUT_S
        while (acknowledged := _acknowledged(broker, churn.key)) < args.churn_records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"acknowledged up to offset {acknowledged} only")
            time.sleep(PROGRESS_POLL_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for consumer in consumers:
            consumer.close()
    return received


def _broker_part(args: argparse.Namespace, measured: Round) -> None:
    log_parent = args.log_parent if os.path.isdir(args.log_parent) else None
    with tempfile.TemporaryDirectory(prefix="bench-share-churn-", dir=log_parent) as log_dir:
        config = BrokerConfig.from_properties(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": log_dir,
                "offsets.topic.num.partitions": "1",
            }
        )
        with BackgroundBroker(config) as broker:
            topic = f"churn-{uuid.uuid4().hex[:8]}"
            churn = _prepare_churn(broker, topic, "churn")
            producer = _producer(broker.bootstrap_servers, args.churn_batch)
            _produce(producer, topic, args.churn_records)
            cpu_clock = time.pthread_getcpuclockid(churn.loop_thread)
            cpu_before_s = time.clock_gettime(cpu_clock)
            received = _consume_all(broker, topic, churn, args)
            cpu_s = time.clock_gettime(cpu_clock) - cpu_before_s
    taken = churn.locks_taken[0]
    measured.locks_taken = taken
    measured.figures["broker_cpu_us_per_record"] = cpu_s / args.churn_records * 1e6
    measured.figures["records_per_lock"] = args.churn_records / max(taken, 1)
    print(
        f"  {sum(received)} records received ({received}), {taken} locks, "
        f"broker loop CPU {cpu_s:.2f} s",
        file=sys.stderr,
        flush=True,
    )


# ---- the command ------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench share",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS)
    )
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument(
        "--records", type=int, default=DEFAULT_RECORDS, help="queue: records per side"
    )
    parser.add_argument("--share-consumers", type=int, default=DEFAULT_SHARE_CONSUMERS)
    parser.add_argument("--process-ms", type=float, default=DEFAULT_PROCESS_MS)
    parser.add_argument("--max-poll-records", type=int, default=DEFAULT_MAX_POLL_RECORDS)
    parser.add_argument("--producer-batch", type=int, default=DEFAULT_PRODUCER_BATCH)
    parser.add_argument("--locks", type=int, default=DEFAULT_LOCKS, help="locks: locks per peer")
    parser.add_argument("--outstanding", type=int, default=DEFAULT_OUTSTANDING)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="locks: random order")
    parser.add_argument("--churn-records", type=int, default=DEFAULT_CHURN_RECORDS)
    parser.add_argument("--churn-batch", type=int, default=DEFAULT_CHURN_BATCH)
    parser.add_argument("--churn-consumers", type=int, default=DEFAULT_CHURN_CONSUMERS)
    parser.add_argument("--log-parent", default=_TMPFS, help="where brokers keep their logs")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    add_png_argument(parser)
    return parser.parse_args(argv)


def _check(args: argparse.Namespace, parts: list[str]) -> str | None:
    """Why the arguments cannot run, or None."""
    if not parts or set(parts) - set(PARTS):
        return f"--parts takes {', '.join(PARTS)}"
    positive = (
        "rounds",
        "records",
        "share_consumers",
        "max_poll_records",
        "producer_batch",
        "locks",
        "outstanding",
        "churn_records",
        "churn_batch",
        "churn_consumers",
    )
    for name in positive:
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    if args.outstanding >= args.locks:
        return "--outstanding must be below --locks"
    if args.process_ms < 0:
        return "--process-ms must not be negative"
    return None


def main(argv: list[str]) -> int:
    """Run the parts; print medians, ratios and targets; optionally write JSON and PNG."""
    args = _parse(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    problem = _check(args, parts)
    if problem is not None:
        print(f"tickwheel bench share: {problem}", file=sys.stderr)
        return 2
    rounds: list[Round] = []
    log_parent = args.log_parent if os.path.isdir(args.log_parent) else None
    with contextlib.ExitStack() as stack:
        bootstrap = (
            stack.enter_context(_serve(log_parent or tempfile.gettempdir()))
            if QUEUE in parts
            else ""
        )
        for index in range(args.rounds):
            measured = Round()
            for part in parts:
                print(
                    f"[{time.strftime('%H:%M:%S')}] round {index + 1}: {part}",
                    file=sys.stderr,
                    flush=True,
                )
                if part == QUEUE:
                    _queue_part(bootstrap, args, measured)
                elif part == LOCKS:
                    _locks_part(args, measured, index)
                else:
                    _broker_part(args, measured)
            print(f"  {measured}", file=sys.stderr, flush=True)
            rounds.append(measured)
    medians = _medians(rounds)
    _report(medians, rounds)
    _chart(args, medians)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": f"{platform.python_implementation()} {platform.python_version()}, "
                    f"{os.cpu_count()} cores",
                    "arguments": {k: v for k, v in vars(args).items() if k not in {"out", "png"}},
                    "medians": medians,
                    "rounds": [asdict(r) for r in rounds],
                },
                indent=2,
            )
        )
    return 0


def _medians(rounds: list[Round]) -> dict[str, float]:
    medians: dict[str, float] = {}
    for name in FIGURES:
        values = [r.figures[name] for r in rounds if name in r.figures]
        if values:
            medians[name] = statistics.median(values)
    return medians


def _lock_share(medians: dict[str, float], peer: str, *, releases: bool) -> float | None:
    """The share of the broker's CPU per record that ``peer``'s lock bookkeeping is: the
    lock's add and cancel, and with ``releases`` its per-record ``release_one`` too."""
    needed = (f"{peer}_lock_ns", f"{peer}_release_ns", "records_per_lock")
    if any(name not in medians for name in (*needed, "broker_cpu_us_per_record")):
        return None
    per_lock = medians["records_per_lock"]
    bookkeeping_ns = medians[f"{peer}_lock_ns"]
    if releases:
        bookkeeping_ns += (per_lock - 1) * medians[f"{peer}_release_ns"]
    return bookkeeping_ns / per_lock / (medians["broker_cpu_us_per_record"] * 1000)


def _report(medians: dict[str, float], rounds: list[Round]) -> None:
    print(f"{'median of ' + str(len(rounds)) + ' rounds':<44}{'value':>14}   per round")
    for name, label in FIGURES.items():
        if name in medians:
            per_round = ", ".join(f"{r.figures[name]:,.1f}" for r in rounds if name in r.figures)
            print(f"{label:<44}{medians[name]:>14,.1f}   {per_round}")
    if "share_records_per_s" in medians:
        ratio = medians["share_records_per_s"] / medians["classic_records_per_s"]
        verdict = "met" if ratio >= TARGET_SHARE_RATIO else "MISSED"
        print(f"share / classic: {ratio:.2f}x (target >= {TARGET_SHARE_RATIO:g}x: {verdict})")
        print(f"records per share consumer: {[r.share_spread for r in rounds if r.share_spread]}")
    if "wheel_lock_ns" in medians:
        for figure in ("lock_ns", "random_lock_ns", "release_ns", "lock_bytes"):
            ratio = medians[f"{HEAPQ}_{figure}"] / medians[f"{WHEEL}_{figure}"]
            print(f"heapq / wheel, {figure}: {ratio:.2f}x")
    for peer in (WHEEL, HEAPQ):
        timer_share = _lock_share(medians, peer, releases=False)
        share = _lock_share(medians, peer, releases=True)
        if share is not None and timer_share is not None:
            verdict = "met" if share <= TARGET_LOCK_SHARE else "MISSED"
            print(
                f"{peer} lock bookkeeping / broker ShareFetch+ShareAcknowledge CPU: "
                f"{share:.3%} (target <= {TARGET_LOCK_SHARE:.0%}: {verdict}); "
                f"add + cancel alone {timer_share:.3%}"
            )


def _chart(args: argparse.Namespace, medians: dict[str, float]) -> None:
    panels = []
    if "share_records_per_s" in medians:
        panels.append(
            Bars(
                title=f"1 partition, {args.process_ms:g} ms per record",
                unit="records/s (median)",
                values={
                    "1 classic consumer": {"records/s": medians["classic_records_per_s"]},
                    f"{args.share_consumers} share consumers": {
                        "records/s": medians["share_records_per_s"]
                    },
                },
                target=medians["classic_records_per_s"] * TARGET_SHARE_RATIO,
            )
        )
    if "wheel_lock_ns" in medians:
        panels.append(
            Bars(
                title=f"acquisition locks, {args.outstanding:,} outstanding",
                unit="ns per lock / bytes per lock (median)",
                values={
                    peer: {
                        "add + cancel, oldest first, ns": medians[f"{peer}_lock_ns"],
                        "add + cancel, random order, ns": medians[f"{peer}_random_lock_ns"],
                        "bytes per outstanding lock": medians[f"{peer}_lock_bytes"],
                    }
                    for peer in (WHEEL, HEAPQ)
                },
            )
        )
    if panels:
        save_png(args.png, "tickwheel bench share", panels)
