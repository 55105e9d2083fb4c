"""``tickwheel bench replication``: what replication costs a produce, on loopback.

A ``LocalCluster`` (ZooKeeper and three ``tickwheel serve`` processes, logs under
``--log-parent``, default ``/dev/shm``) faces confluent-kafka (librdkafka) clients in
this process:

1. **Latency.** One message at a time (``linger.ms=0``, wait for each delivery)
   with ``acks=all`` to a one-partition topic with replication factor 3, and, as the
   reference, the same to a topic with replication factor 1: p50, p99 and max of the
   time from ``produce`` to the delivery report. With RF 3 the leader appends, wakes
   both followers' parked fetches, each follower appends and fetches again, and that
   second fetch moves the high watermark, which completes the DelayedProduce.
2. **Throughput.** ``--messages`` messages of 100 bytes to six partitions with
   ``acks=all`` (``linger.ms=5``), alternately to an RF 1 and an RF 3 topic for
   ``--rounds`` rounds: messages/s and MB/s, medians over the rounds, and the ratio
   RF 3 / RF 1. Beside it, the CPU the three broker processes spent per message
   (their ``utime + stime`` from ``/proc/PID/stat`` before and after the round,
   all three brokers summed), medians over the rounds, and the ratio RF 3 / RF 1.
3. **Latency against rate.** For each ``--rate`` (messages/s; by default a sweep from
   10 to 10,000), ``--rate-messages`` messages, or as many as ``--rate-seconds`` of
   sending takes at that rate if fewer (but at least 100), paced at that rate
   (``linger.ms=0``, ``acks=all``, one partition, RF 3 and RF 1), the producer
   serving delivery reports while it waits for the next send: p50 and p99 from
   ``produce`` to the delivery report, after one delivery (the followers fetch the
   new partition), and the brokers' CPU per message as in (2). Where the broker keeps
   up, the latency stays near (1); past that, messages queue and it climbs.

``--png PATH`` draws (1) and (2) as bars and (3) as lines.

Targets: RF 3 p99 ≤ 10 ms at every rate of (3), RF 3 throughput at least
0.7 of RF 1's, and RF 3's broker CPU per message at most three times RF 1's. The machine is
shared: run it twice before trusting a small difference.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Bars, Lines, add_png_argument, save_png
from tickwheel.bench.broker import process_cpu_seconds
from tickwheel.cluster import LocalCluster

_TMPFS = "/dev/shm"
_CLIENT_TIMEOUT_S = 120.0
_BROKERS = 3
_PARTITIONS = 6
_MESSAGE_BYTES = 100
_WARMUP_MESSAGES = 50
_MS_PER_S = 1000.0
_BYTES_PER_MB = 1_000_000
_P99 = 0.99
_PERCENT = 100
_US_PER_S = 1_000_000
_LATENCY_TARGET_MS = 10.0
_THROUGHPUT_TARGET_RATIO = 0.7
_CPU_TARGET_RATIO = 3.0
_RATES = (10, 100, 1000, 4000, 10000)
"""Measurement 3's default rates, messages/s: a sweep from idle to 10,000."""
_MIN_RATE_MESSAGES = 100


@dataclass(frozen=True, slots=True)
class Latency:
    """Produce-to-delivery latency of one topic, in ms."""

    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class Throughput:
    """One throughput round: messages/s, and the brokers' CPU per message in µs."""

    messages_per_s: float
    cpu_us_per_message: float


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds the processes ``pids`` have used so far."""
    return sum(process_cpu_seconds(pid) for pid in pids)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


def _create(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(_CLIENT_TIMEOUT_S)


def _check(error: KafkaError | None, _message: Message) -> None:
    if error is not None:
        raise RuntimeError(f"delivery failed: {error}")


def measure_latency(bootstrap: str, topic: str, messages: int) -> Latency:
    """Send ``messages`` one at a time with acks=all; the latency distribution."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1}
    )
    payload = b"x" * _MESSAGE_BYTES
    samples: list[float] = []
    for index in range(_WARMUP_MESSAGES + messages):
        started = time.perf_counter()
        producer.produce(topic, value=payload, on_delivery=_check)
        if producer.flush(_CLIENT_TIMEOUT_S) != 0:
            raise RuntimeError("a message was not delivered in time")
        if index >= _WARMUP_MESSAGES:
            samples.append((time.perf_counter() - started) * _MS_PER_S)
    samples.sort()
    return Latency(
        p50_ms=statistics.median(samples), p99_ms=_percentile(samples, _P99), max_ms=samples[-1]
    )


def _delivered(
    samples: list[float], started_s: float, error: KafkaError | None, _message: Message
) -> None:
    if error is not None:
        raise RuntimeError(f"delivery failed: {error}")
    samples.append((time.perf_counter() - started_s) * _MS_PER_S)


def measure_latency_at_rate(
    bootstrap: str, topic: str, rate: float, messages: int, broker_pids: list[int]
) -> tuple[Latency, float]:
    """Send ``messages`` paced at ``rate`` per second with acks=all; the latency
    distribution from ``produce`` to each delivery report, and the CPU the processes
    ``broker_pids`` spent meanwhile per message, in µs."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    payload = b"x" * _MESSAGE_BYTES
    # One delivery first: until the followers fetch the new partition (up to
    # replica.fetch.wait.max.ms when their fetch to its leader is parked for other
    # partitions), acks=all waits, and the backlog would be measured, not the rate.
    producer.produce(topic, value=payload, on_delivery=_check)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("the warm-up message was not delivered in time")
    samples: list[float] = []
    cpu_started_s = cpu_seconds(broker_pids)
    interval_s = 1.0 / rate
    next_send_s = time.perf_counter()
    for _ in range(messages):
        while (wait_s := next_send_s - time.perf_counter()) > 0:
            producer.poll(wait_s)  # serves delivery reports until the next send is due
        producer.produce(
            topic,
            value=payload,
            on_delivery=functools.partial(_delivered, samples, time.perf_counter()),
        )
        next_send_s += interval_s
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("messages were not delivered in time")
    cpu_s = cpu_seconds(broker_pids) - cpu_started_s
    samples.sort()
    latency = Latency(
        p50_ms=statistics.median(samples), p99_ms=_percentile(samples, _P99), max_ms=samples[-1]
    )
    return latency, cpu_s * _US_PER_S / messages


def measure_throughput(
    bootstrap: str, topic: str, messages: int, broker_pids: list[int]
) -> Throughput:
    """Produce ``messages`` with acks=all as fast as the client goes; messages/s, and
    the CPU the processes ``broker_pids`` spent meanwhile per message."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.messages": max(messages, 100_000),
        }
    )
    payload = b"x" * _MESSAGE_BYTES
    # One delivery per partition first, so every leader is known before the clock starts.
    for partition in range(_PARTITIONS):
        producer.produce(topic, value=payload, partition=partition, on_delivery=_check)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("the warm-up messages were not delivered in time")
    started = time.perf_counter()
    cpu_started_s = cpu_seconds(broker_pids)
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value=payload, on_delivery=_check)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("messages were not delivered in time")
    elapsed_s = time.perf_counter() - started
    cpu_s = cpu_seconds(broker_pids) - cpu_started_s
    return Throughput(messages / elapsed_s, cpu_s * _US_PER_S / messages)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench replication",
        description="Produce latency and throughput with replication factor 3 vs 1.",
    )
    parser.add_argument("--latency-messages", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--rate",
        type=float,
        action="append",
        help=f"messages/s of measurement 3 (repeatable; default {', '.join(map(str, _RATES))})",
    )
    parser.add_argument("--rate-messages", type=int, default=2000, help="messages per rate")
    parser.add_argument(
        "--rate-seconds",
        type=float,
        default=10.0,
        help="send for at most this long per rate (fewer messages at low rates; at least "
        f"{_MIN_RATE_MESSAGES})",
    )
    parser.add_argument("--log-parent", default=_TMPFS, help="where the brokers' logs go")
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run both measurements on a fresh three-broker cluster and print a table."""
    args = _parser().parse_args(argv)
    paced_rates = sorted(args.rate or _RATES)
    parent = args.log_parent if Path(args.log_parent).is_dir() else None
    with (
        tempfile.TemporaryDirectory(prefix="tickwheel-bench-replication-", dir=parent) as base,
        LocalCluster(base, _BROKERS) as cluster,
    ):
        bootstrap = cluster.bootstrap_servers
        pids = [pid for broker in cluster.brokers if (pid := broker.pid) is not None]
        _create(bootstrap, "latency-rf3", 1, 3)
        _create(bootstrap, "latency-rf1", 1, 1)
        rf3 = measure_latency(bootstrap, "latency-rf3", args.latency_messages)
        rf1 = measure_latency(bootstrap, "latency-rf1", args.latency_messages)
        rounds: dict[int, list[Throughput]] = {1: [], 3: []}
        for round_index in range(args.rounds):
            for replication in (1, 3):
                topic = f"throughput-rf{replication}-{round_index}"
                _create(bootstrap, topic, _PARTITIONS, replication)
                rounds[replication].append(
                    measure_throughput(bootstrap, topic, args.messages, pids)
                )
        paced: dict[int, list[tuple[float, Latency]]] = {1: [], 3: []}
        paced_cpu: dict[int, list[float]] = {1: [], 3: []}
        for rate in paced_rates:
            count = max(
                _MIN_RATE_MESSAGES, min(args.rate_messages, round(rate * args.rate_seconds))
            )
            for replication in (1, 3):
                topic = f"paced-rf{replication}-{rate:g}"
                _create(bootstrap, topic, 1, replication)
                latency, cpu_us = measure_latency_at_rate(bootstrap, topic, rate, count, pids)
                paced[replication].append((rate, latency))
                paced_cpu[replication].append(cpu_us)
    rates = {n: [r.messages_per_s for r in rounds[n]] for n in (1, 3)}
    cpus = {n: [r.cpu_us_per_message for r in rounds[n]] for n in (1, 3)}
    rate1, rate3 = statistics.median(rates[1]), statistics.median(rates[3])
    ratio = rate3 / rate1
    cpu1, cpu3 = statistics.median(cpus[1]), statistics.median(cpus[3])
    cpu_ratio = cpu3 / cpu1
    print(f"## Replication ({_BROKERS} brokers on loopback, confluent-kafka, acks=all)\n")
    print("| latency, one message at a time | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, latency in (("RF 3", rf3), ("RF 1", rf1)):
        print(f"| {name} | {latency.p50_ms:.2f} | {latency.p99_ms:.2f} | {latency.max_ms:.2f} |")
    print(
        f"\n| throughput, {args.messages:,} x {_MESSAGE_BYTES} B, {_PARTITIONS} partitions "
        f"| msgs/s (median of {args.rounds}) | MB/s | broker CPU µs/msg | rounds msgs/s |"
    )
    print("|---|---:|---:|---:|---|")
    for replication, rate, cpu in ((1, rate1, cpu1), (3, rate3, cpu3)):
        each = ", ".join(f"{r:,.0f}" for r in rates[replication])
        megabytes = rate * _MESSAGE_BYTES / _BYTES_PER_MB
        print(f"| RF {replication} | {rate:,.0f} | {megabytes:.1f} | {cpu:.2f} | {each} |")
    ratio_ok = "met" if ratio >= _THROUGHPUT_TARGET_RATIO else "MISSED"
    cpu_ok = "met" if cpu_ratio <= _CPU_TARGET_RATIO else "MISSED"
    print(
        f"\nRF 3 / RF 1 throughput {ratio:.2f} = {ratio * _PERCENT:.0f}% "
        f"(target ≥ {_THROUGHPUT_TARGET_RATIO}: {ratio_ok}); "
        f"RF 3 / RF 1 broker CPU per message {cpu_ratio:.2f} "
        f"(target ≤ {_CPU_TARGET_RATIO:.0f}: {cpu_ok})"
    )
    print(
        f"\n| latency at a rate, up to {args.rate_messages:,} messages or "
        f"{args.rate_seconds:g} s | msgs/s | p50 ms | p99 ms | broker CPU µs/msg |"
    )
    print("|---|---:|---:|---:|---:|")
    for replication in (3, 1):
        for (rate, latency), cpu_us in zip(paced[replication], paced_cpu[replication], strict=True):
            print(
                f"| RF {replication} | {rate:,.0f} | {latency.p50_ms:.2f} | {latency.p99_ms:.2f} "
                f"| {cpu_us:.0f} |"
            )
    worst_rate, worst = max(paced[3], key=lambda point: point[1].p99_ms)
    paced_ok = "met" if worst.p99_ms <= _LATENCY_TARGET_MS else "MISSED"
    print(
        f"\nRF 3 paced p99, worst {worst.p99_ms:.2f} ms at {worst_rate:,.0f} msgs/s "
        f"(target ≤ {_LATENCY_TARGET_MS:.0f} ms at every rate: {paced_ok})"
    )
    save_png(
        args.png,
        f"tickwheel bench replication - {_BROKERS} brokers on loopback, acks=all",
        [
            Bars(
                title="latency, one message at a time",
                unit="ms",
                values={
                    f"RF {n}": {"p50": lat.p50_ms, "p99": lat.p99_ms}
                    for n, lat in ((3, rf3), (1, rf1))
                },
                target=_LATENCY_TARGET_MS,
            ),
            Bars(
                title=f"throughput, {_PARTITIONS} partitions",
                unit="messages/s (median of rounds)",
                values={"RF 3": {"": rate3}, "RF 1": {"": rate1}},
            ),
            Lines(
                title="latency against produce rate",
                x_label="messages/s",
                unit="ms (log scale)",
                points={
                    **{f"RF {n} p50": [(r, lat.p50_ms) for r, lat in paced[n]] for n in (3, 1)},
                    **{f"RF {n} p99": [(r, lat.p99_ms) for r, lat in paced[n]] for n in (3, 1)},
                },
                log_scale=True,
            ),
        ],
    )
    return 0
