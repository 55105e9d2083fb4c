"""``tickwheel bench purgatory``: a port of Kafka's TestPurgatoryPerformance.

Method, as Kafka's (``jmh-benchmarks/.../TestPurgatoryPerformance.java``, formerly
``core/src/test/scala/other/kafka/TestPurgatoryPerformance.scala``):

- ``--num`` requests arrive as a Poisson process at ``--rate`` per second (exponential
  inter-arrival times; rate 0 means unthrottled: every request as fast as the
  generator can go). Each is a fake delayed operation watched under ``--keys`` distinct
  keys drawn from ``--key-space-size`` (``--size`` is an alias of ``--keys``).
- Each request will complete after a latency drawn from a log-normal distribution
  whose median is ``--pct50`` ms and 75th percentile ``--pct75`` ms, unless its
  ``--timeout`` comes first. A *completion queue* completes it (``force_complete``) when
  its latency has passed; one whose latency is at least the timeout is never queued and
  expires through the purgatory's timer. The distribution predicts the expired share,
  ``P(latency >= timeout)``: 7.87% for pct50 20, pct75 60, timeout 200. More than that
  means completions ran late (the completion side starved).
- Modes: ``threaded`` -- Kafka's: the purgatory's reaper thread and the timer's executor
  thread, a completion thread over a heap, the generator on the main thread.
  ``loop`` -- event-loop mode: no thread at all; the timer is driven by
  ``AsyncioTimerDriver`` with an ``InlineExecutor``, the reaper is off (the purge rides
  on the purgatory's calls), the completion queue is a heap with one ``loop.call_at``
  armed for its head, and the generator is a coroutine that sleeps until each arrival
  (and yields every ``LOOP_YIELD_EVERY`` requests when it does not sleep).

Differences from Kafka's program, each deliberate: keys are drawn per request (Kafka
draws one set of keys for the whole run, so every request shares the same three
lists); a request completes ``latency`` after its arrival (the Java port measures from
``timeout``, a slip); samples are drawn up front from a seeded generator instead of
picked at random from a pool of a million; arrival times are not rounded to whole ms.
Where the port matches Kafka's costs rather than its types: the latch counts down
without a lock (Kafka's is a compare-and-set), and the completion queue's heap orders
one int per entry (Kafka's ``Scheduled.compareTo`` compares one long) rather than tuples.

Reported per run: target rate (what the drawn arrival schedule asks for), achieved
rate (requests / time to enqueue them all), CPU per request (process CPU time, all
threads, until the last request completed or expired, divided by the requests),
expired count and share, the distribution's predicted share and the share drawn for
this run, and the ratio expired / predicted. With ``--repeat`` the table gives medians.
docs/benchmarks.md records the default run (unthrottled and 10,000 requests/s, both
modes). The header names the core's build in use (``tickwheel --version``); run the
command again with ``TICKWHEEL_PURE_PYTHON=1`` to measure the pure-Python build.
``--png`` charts the medians beside Apache Kafka's Java purgatory as the issue quotes it
(``KAFKA_JAVA_RATE``, ``KAFKA_JAVA_CPU_US``: a reference figure, not measured here).
Kafka's purgatory is not run beside ours, unlike ``bench timer``'s Java timer: at the
commit that command builds from (``tickwheel.bench._java_timer.KAFKA_PINNED_REV``),
``DelayedOperationPurgatory`` is Scala, in Kafka's core module, and building it would
take a Scala 2.13 compiler and most of core; the command says so in one line
(``KAFKA_ANCHOR_SKIPPED``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import itertools
import json
import math
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory
from tickwheel.timer import BUILD, AsyncioTimerDriver, InlineExecutor, SystemTimer

DEFAULT_NUM = 200_000
DEFAULT_RATES = (0.0, 10_000.0)
"""Requests per second; 0 is unthrottled."""
DEFAULT_KEY_SPACE_SIZE = 100
DEFAULT_KEYS = 3
DEFAULT_TIMEOUT_MS = 200
DEFAULT_PCT75_MS = 60.0
DEFAULT_PCT50_MS = 20.0
DEFAULT_REPEAT = 3
DEFAULT_SEED = 42
MODES = ("threaded", "loop")
KAFKA_JAVA_RATE = 228_000.0
"""Requests/s of Apache Kafka's TestPurgatoryPerformance, unthrottled (quoted, not measured)."""
KAFKA_JAVA_CPU_US = 9.2
"""Its CPU per request, in µs (quoted, not measured)."""
_KAFKA_JAVA = "Kafka, Java (quoted figure)"
KAFKA_ANCHOR_SKIPPED = (
    "Kafka's purgatory: not run beside ours (at the pinned apache/kafka commit "
    "DelayedOperationPurgatory is Scala, core/src/main/scala/kafka/server/DelayedOperation.scala; "
    "no Scala 2.13 compiler here, Debian's is 2.11); the chart shows its quoted figure"
)

Z_75 = 0.6744897501960817
"""The 75th percentile of the standard normal distribution."""

SLEEP_MIN_S = 0.001
"""The generator sleeps only when at least this far ahead of the schedule, and sends a
request less than this early otherwise (Kafka's generator keeps time in whole ms)."""

LOOP_YIELD_EVERY = 64
"""A loop-mode generator running behind schedule yields to the loop this often, so
completions and expirations keep running while it catches up."""

COMPLETION_WAIT_MAX_S = 0.1
"""The completion thread re-checks its heap at least this often (Kafka polls 100 ms)."""

RUN_TIMEOUT_S = 600.0
"""A run that has not seen every request finish by then is reported as stuck."""

SEQUENCE_SPAN = 1 << 32
"""Completion keys are ``completes_at`` in µs times this, plus a sequence number modulo
this: unique unless two requests 2**32 apart complete in the same µs."""

_MS_PER_S = 1000.0
_US_PER_S = 1e6


def _completion_key(at_s: float, sequence: int) -> int:
    """The completion queues' key: orders by time (µs), then by arrival."""
    return int(at_s * _US_PER_S) * SEQUENCE_SPAN + sequence % SEQUENCE_SPAN


def _key_time_s(key: int) -> float:
    """The time a completion key stands for."""
    return key // SEQUENCE_SPAN / _US_PER_S


def _last_key_at(now_s: float) -> int:
    """The greatest key due at ``now_s``."""
    return int(now_s * _US_PER_S) * SEQUENCE_SPAN + SEQUENCE_SPAN - 1


@dataclass(frozen=True, slots=True)
class Workload:
    """The drawn inputs of one run: arrival offsets, latencies and keys per request."""

    arrivals_s: list[float]
    latencies_ms: list[int]
    keys: list[tuple[str, ...]]
    timeout_ms: int
    rate: float
    predicted_expired: float

    @staticmethod
    def draw(args: argparse.Namespace, rate: float, seed: int) -> Workload:
        """Draw ``args.num`` requests at ``rate`` per second (0: all at time 0)."""
        rng = random.Random(seed)
        mu = math.log(args.pct50)
        sigma = (math.log(args.pct75) - mu) / Z_75
        arrivals: list[float] = []
        at_s = 0.0
        for _ in range(args.num):
            if rate > 0:
                at_s += rng.expovariate(rate)
            arrivals.append(at_s)
        latencies = [int(rng.lognormvariate(mu, sigma)) for _ in range(args.num)]
        space = [f"fakeKey{i}" for i in range(args.key_space_size)]
        keys = [tuple(rng.sample(space, args.keys)) for _ in range(args.num)]
        z = (math.log(args.timeout) - mu) / sigma
        predicted = 0.5 * math.erfc(z / math.sqrt(2))
        return Workload(arrivals, latencies, keys, args.timeout, rate, predicted)

    @property
    def drawn_expired(self) -> int:
        """Requests whose drawn latency is not below the timeout (never completed early)."""
        return sum(1 for latency in self.latencies_ms if latency >= self.timeout_ms)


class _Countdown:
    """Kafka's CountDownLatch over the requests: calls ``on_zero`` when all completed.

    Lock-free, as Kafka's (its ``countDown`` is a compare-and-set): the count is an
    ``itertools.count``, whose ``next`` is one call into C, atomic under the GIL, so of
    threads counting down at once exactly one sees the last number.
    """

    __slots__ = ("_count", "_next", "_on_zero")

    def __init__(self, count: int, on_zero: Callable[[], None]) -> None:
        self._next = itertools.count(1).__next__
        self._count = count
        self._on_zero = on_zero

    def count_down(self) -> None:
        if self._next() == self._count:
            self._on_zero()


class FakeOperation(DelayedOperation):
    """Completes once ``completes_at_s`` has passed; counts down the latch on completion."""

    __slots__ = ("_latch", "completes_at_s")

    def __init__(self, timeout_ms: int, completes_at_s: float, latch: _Countdown) -> None:
        # The base class named, not super(): the same call without a super object and a
        # bound wrapper allocated per request (two more objects for the cyclic GC).
        DelayedOperation.__init__(self, timeout_ms)
        self.completes_at_s = completes_at_s
        self._latch = latch

    def try_complete(self) -> bool:
        return time.monotonic() >= self.completes_at_s and self.force_complete()

    def on_complete(self) -> None:
        self._latch.count_down()

    def on_expiration(self) -> None:
        """Nothing to answer: the benchmark only counts expirations."""


class _CompletionQueue:
    """Kafka's CompletionQueue: a thread completing operations when their latency has passed.

    A heap ordered by completion time; the thread sleeps until the head is due (or a
    new, earlier head arrives) and completes every due operation in one batch.

    The heap holds int keys (``_completion_key``) and a dict maps each key to its
    operation: Kafka's queue compares one long per step (``Scheduled.compareTo`` reads
    ``completesAt``), and so does this one, where a heap of ``(time, sequence,
    operation)`` tuples paid two comparisons and a walk of both tuples per step.
    """

    def __init__(self) -> None:
        self._heap: list[int] = []
        self._operations: dict[int, FakeOperation] = {}
        self._sequence = 0
        self._condition = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._run, name="completion thread", daemon=True)
        self._thread.start()

    def add(self, operation: FakeOperation) -> None:
        with self._condition:
            self._sequence += 1
            key = _completion_key(operation.completes_at_s, self._sequence)
            self._operations[key] = operation
            heapq.heappush(self._heap, key)
            if self._heap[0] == key:
                self._condition.notify()

    def shutdown(self) -> None:
        with self._condition:
            self._running = False
            self._condition.notify()
        self._thread.join()

    def _run(self) -> None:
        heap = self._heap
        operations = self._operations
        while True:
            with self._condition:
                while self._running:
                    now_s = time.monotonic()
                    last_due = _last_key_at(now_s)
                    if heap and heap[0] <= last_due:
                        break
                    wait_s = _key_time_s(heap[0]) - now_s if heap else COMPLETION_WAIT_MAX_S
                    self._condition.wait(min(wait_s, COMPLETION_WAIT_MAX_S))
                if not self._running:
                    return
                due: list[FakeOperation] = []
                while heap and heap[0] <= last_due:
                    due.append(operations.pop(heapq.heappop(heap)))
            for operation in due:
                operation.force_complete()


class _LoopCompletionQueue:
    """The completion queue on an event loop: a heap and one ``call_at`` armed for its head.

    (A ``call_at`` per request would measure asyncio's timer heap, whose Python-level
    comparisons cost more than the purgatory itself.) Keys as ``_CompletionQueue``'s.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[int] = []
        self._operations: dict[int, FakeOperation] = {}
        self._sequence = 0
        self._armed: asyncio.TimerHandle | None = None

    def add(self, operation: FakeOperation) -> None:
        self._sequence += 1
        key = _completion_key(operation.completes_at_s, self._sequence)
        self._operations[key] = operation
        heapq.heappush(self._heap, key)
        if self._heap[0] == key:
            self._arm(operation.completes_at_s)

    def _arm(self, at_s: float) -> None:
        if self._armed is not None:
            self._armed.cancel()
        # The loop's clock is time.monotonic(), as is completes_at_s.
        self._armed = self._loop.call_at(at_s, self._fire)

    def _fire(self) -> None:
        self._armed = None
        heap = self._heap
        operations = self._operations
        last_due = _last_key_at(time.monotonic())
        while heap and heap[0] <= last_due:
            operations.pop(heapq.heappop(heap)).force_complete()
        if heap:
            self._arm(_key_time_s(heap[0]))

    def close(self) -> None:
        if self._armed is not None:
            self._armed.cancel()


@dataclass(frozen=True, slots=True)
class RunResult:
    """The figures of one run."""

    mode: str
    target_rate: float
    achieved_rate: float
    elapsed_s: float
    cpu_us_per_request: float
    expired: int
    expired_pct: float
    predicted_pct: float
    drawn_pct: float
    expired_vs_predicted: float


def _result(
    mode: str,
    workload: Workload,
    enqueue_s: float,
    elapsed_s: float,
    cpu_s: float,
    expired: int,
) -> RunResult:
    n = len(workload.latencies_ms)
    schedule_s = workload.arrivals_s[-1]
    expired_share = expired / n
    return RunResult(
        mode=mode,
        target_rate=n / schedule_s if schedule_s > 0 else math.inf,
        achieved_rate=n / enqueue_s,
        elapsed_s=elapsed_s,
        cpu_us_per_request=cpu_s * _US_PER_S / n,
        expired=expired,
        expired_pct=100 * expired_share,
        predicted_pct=100 * workload.predicted_expired,
        drawn_pct=100 * workload.drawn_expired / n,
        expired_vs_predicted=expired_share / workload.predicted_expired,
    )


def run_threaded(workload: Workload) -> RunResult:
    """Kafka's setup: reaper and executor threads, a completion thread, this thread generating."""
    n = len(workload.latencies_ms)
    all_done = threading.Event()
    latch = _Countdown(n, all_done.set)
    timeout_ms = workload.timeout_ms
    purgatory: DelayedOperationPurgatory[FakeOperation] = DelayedOperationPurgatory(
        "fake purgatory"
    )
    queue = _CompletionQueue()
    watch = purgatory.try_complete_else_watch
    cpu_start_s = time.process_time()
    start_s = time.monotonic()
    for arrival_s, latency_ms, keys in zip(
        workload.arrivals_s, workload.latencies_ms, workload.keys, strict=True
    ):
        now_s = time.monotonic()
        due_s = start_s + arrival_s
        if due_s - now_s >= SLEEP_MIN_S:
            time.sleep(due_s - now_s)
            now_s = time.monotonic()
        operation = FakeOperation(timeout_ms, now_s + latency_ms / _MS_PER_S, latch)
        if latency_ms < timeout_ms:
            queue.add(operation)
        watch(operation, keys)
    enqueue_s = time.monotonic() - start_s
    finished = all_done.wait(RUN_TIMEOUT_S)
    elapsed_s = time.monotonic() - start_s
    cpu_s = time.process_time() - cpu_start_s
    queue.shutdown()
    expired = purgatory.expired
    purgatory.shutdown()
    if not finished:
        raise RuntimeError("threaded run did not finish: requests neither completed nor expired")
    return _result("threaded", workload, enqueue_s, elapsed_s, cpu_s, expired)


async def _generate_on_loop(workload: Workload) -> RunResult:
    loop = asyncio.get_running_loop()
    n = len(workload.latencies_ms)
    all_done: asyncio.Future[None] = loop.create_future()
    latch = _Countdown(n, lambda: all_done.set_result(None))
    timeout_ms = workload.timeout_ms
    timer = SystemTimer("fake purgatory", executor=InlineExecutor())
    driver = AsyncioTimerDriver(timer)
    driver.start()
    purgatory: DelayedOperationPurgatory[FakeOperation] = DelayedOperationPurgatory(
        "fake purgatory", timer, reaper_enabled=False
    )
    queue = _LoopCompletionQueue(loop)
    watch = purgatory.try_complete_else_watch
    cpu_start_s = time.process_time()
    start_s = time.monotonic()
    for i, (arrival_s, latency_ms, keys) in enumerate(
        zip(workload.arrivals_s, workload.latencies_ms, workload.keys, strict=True)
    ):
        now_s = time.monotonic()
        due_s = start_s + arrival_s
        if due_s - now_s >= SLEEP_MIN_S:
            await asyncio.sleep(due_s - now_s)
            now_s = time.monotonic()
        elif i % LOOP_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        operation = FakeOperation(timeout_ms, now_s + latency_ms / _MS_PER_S, latch)
        if latency_ms < timeout_ms:
            queue.add(operation)
        watch(operation, keys)
    enqueue_s = time.monotonic() - start_s
    await asyncio.wait_for(all_done, RUN_TIMEOUT_S)
    elapsed_s = time.monotonic() - start_s
    cpu_s = time.process_time() - cpu_start_s
    queue.close()
    expired = purgatory.expired
    purgatory.shutdown()
    return _result("loop", workload, enqueue_s, elapsed_s, cpu_s, expired)


def run_loop(workload: Workload) -> RunResult:
    """Event-loop mode: one thread; the asyncio driver moves the timer."""
    return asyncio.run(_generate_on_loop(workload))


RUNNERS: dict[str, Callable[[Workload], RunResult]] = {
    "threaded": run_threaded,
    "loop": run_loop,
}


def _median_result(results: Sequence[RunResult]) -> RunResult:
    def med(values: Sequence[float]) -> float:
        return statistics.median(values)

    return RunResult(
        mode=results[0].mode,
        target_rate=med([r.target_rate for r in results]),
        achieved_rate=med([r.achieved_rate for r in results]),
        elapsed_s=med([r.elapsed_s for r in results]),
        cpu_us_per_request=med([r.cpu_us_per_request for r in results]),
        expired=round(med([r.expired for r in results])),
        expired_pct=med([r.expired_pct for r in results]),
        predicted_pct=results[0].predicted_pct,
        drawn_pct=med([r.drawn_pct for r in results]),
        expired_vs_predicted=med([r.expired_vs_predicted for r in results]),
    )


def _rate_label(rate: float) -> str:
    return "unthrottled" if math.isinf(rate) or rate == 0 else f"{rate:,.0f}"


def _print_table(rows: Sequence[tuple[float, RunResult]]) -> None:
    header = (
        f"{'mode':<9} {'target/s':>12} {'achieved/s':>11} {'CPU us/req':>10} "
        f"{'expired':>8} {'expired%':>8} {'predicted%':>10} {'drawn%':>7} {'exp/pred':>8}"
    )
    print(header)
    print("-" * len(header))
    for requested_rate, r in rows:
        target = _rate_label(requested_rate) if requested_rate == 0 else f"{r.target_rate:,.0f}"
        print(
            f"{r.mode:<9} {target:>12} {r.achieved_rate:>11,.0f} {r.cpu_us_per_request:>10.1f} "
            f"{r.expired:>8} {r.expired_pct:>7.2f}% {r.predicted_pct:>9.2f}% "
            f"{r.drawn_pct:>6.2f}% {r.expired_vs_predicted:>8.3f}"
        )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench purgatory",
        description="Kafka's TestPurgatoryPerformance, threaded and on an event loop.",
    )
    parser.add_argument("--num", type=int, default=DEFAULT_NUM, help="requests per run")
    parser.add_argument(
        "--rate",
        type=float,
        action="append",
        help="target requests/s, 0 = unthrottled (repeatable; default: 0 and 10000)",
    )
    parser.add_argument(
        "--key-space-size", type=int, default=DEFAULT_KEY_SPACE_SIZE, help="possible keys"
    )
    parser.add_argument("--keys", "--size", type=int, default=DEFAULT_KEYS, help="keys per request")
    parser.add_argument(
        "--timeout", type=int, default=DEFAULT_TIMEOUT_MS, help="request timeout, ms"
    )
    parser.add_argument(
        "--pct75", type=float, default=DEFAULT_PCT75_MS, help="75th pct latency, ms"
    )
    parser.add_argument("--pct50", type=float, default=DEFAULT_PCT50_MS, help="median latency, ms")
    parser.add_argument(
        "--mode", choices=[*MODES, "both"], default="both", help="threaded, loop, or both"
    )
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs per setting")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    add_png_argument(parser)
    return parser


def _validate(args: argparse.Namespace) -> str | None:
    checks = [
        (args.num >= 1, "--num must be at least 1"),
        (1 <= args.keys <= args.key_space_size, "--keys must be in 1..--key-space-size"),
        (args.timeout >= 1, "--timeout must be at least 1 ms"),
        (0 < args.pct50 < args.pct75, "need 0 < --pct50 < --pct75"),
        (args.repeat >= 1, "--repeat must be at least 1"),
        (all(rate >= 0 for rate in args.rate), "--rate must not be negative"),
    ]
    return next((message for ok, message in checks if not ok), None)


def main(argv: list[str]) -> int:
    """Run the benchmark; prints a table of medians, optionally writes JSON."""
    args = _parser().parse_args(argv)
    if args.rate is None:
        args.rate = list(DEFAULT_RATES)
    error = _validate(args)
    if error is not None:
        print(f"tickwheel bench purgatory: {error}", file=sys.stderr)
        return 2
    modes = list(MODES) if args.mode == "both" else [args.mode]
    print(
        f"# {args.num:,} requests, {args.keys} keys from {args.key_space_size}, "
        f"timeout {args.timeout} ms, pct75 {args.pct75:g} ms, pct50 {args.pct50:g} ms, "
        f"{args.repeat} run(s) each; Python {platform.python_version()}, core: {BUILD}",
        flush=True,
    )
    print(f"# {KAFKA_ANCHOR_SKIPPED}", flush=True)
    rows: list[tuple[float, RunResult]] = []
    runs: list[dict[str, object]] = []
    for rate in args.rate:
        for mode in modes:
            results: list[RunResult] = []
            for repeat in range(args.repeat):
                workload = Workload.draw(args, rate, args.seed + repeat)
                gc.collect()
                result = RUNNERS[mode](workload)
                results.append(result)
                runs.append({"requested_rate": rate, "repeat": repeat, **asdict(result)})
                print(
                    f"  {mode:<8} rate {_rate_label(rate):>11}  run {repeat + 1}/{args.repeat}: "
                    f"{result.achieved_rate:,.0f}/s, {result.cpu_us_per_request:.1f} us/req, "
                    f"expired {result.expired_pct:.2f}%",
                    flush=True,
                )
            rows.append((rate, _median_result(results)))
    print()
    _print_table(rows)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "settings": {k: v for k, v in vars(args).items() if k != "out"},
            "python": platform.python_version(),
            "build": BUILD,
            "runs": runs,
            "medians": [{"requested_rate": rate, **asdict(r)} for rate, r in rows],
        }
        args.out.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"\nwrote {args.out}")
    save_png(args.png, f"tickwheel bench purgatory - {args.num:,} requests per run", _panels(rows))
    return 0


def _panels(rows: Sequence[tuple[float, RunResult]]) -> list[Bars]:
    def by_mode(figure: Callable[[RunResult], float]) -> dict[str, dict[str, float]]:
        values: dict[str, dict[str, float]] = {}
        for rate, result in rows:
            values.setdefault(result.mode, {})[f"target {_rate_label(rate)}/s"] = figure(result)
        return values

    unthrottled = f"target {_rate_label(0)}/s"
    return [
        Bars(
            title="requests completed",
            unit="requests/s (median)",
            values={
                **by_mode(lambda r: r.achieved_rate),
                _KAFKA_JAVA: {unthrottled: KAFKA_JAVA_RATE},
            },
        ),
        Bars(
            title="CPU",
            unit="µs per request (median)",
            values={
                **by_mode(lambda r: r.cpu_us_per_request),
                _KAFKA_JAVA: {unthrottled: KAFKA_JAVA_CPU_US},
            },
        ),
        Bars(
            title="expirations",
            unit="expired / predicted by the latency model",
            values=by_mode(lambda r: r.expired_vs_predicted),
            target=1.0,
        ),
    ]
