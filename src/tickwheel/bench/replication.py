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
   RF 3 / RF 1.
3. **Latency against rate.** For each ``--rate`` (messages/s), ``--rate-messages``
   messages paced at that rate (``linger.ms=0``, ``acks=all``, one partition, RF 3
   and RF 1), the producer serving delivery reports while it waits for the next send:
   p50 and p99 from ``produce`` to the delivery report, after one delivery (the
   followers fetch the new partition). Where the broker keeps up, the latency stays
   near (1); past that, messages queue and it climbs.

``--png PATH`` draws (1) and (2) as bars and (3) as lines.

Targets (issue 7): p99 ≤ 15 ms with RF 3, and RF 3 throughput at least half of RF 1.
The machine is shared: run it twice before trusting a small difference.
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
_LATENCY_TARGET_MS = 15.0
_THROUGHPUT_TARGET_RATIO = 0.5
_RATES = (250, 1000, 4000)
"""Measurement 3's default rates, messages/s: idle, busy, and past what RF 3 keeps up with."""


@dataclass(frozen=True, slots=True)
class Latency:
    """Produce-to-delivery latency of one topic, in ms."""

    p50_ms: float
    p99_ms: float
    max_ms: float


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


def measure_latency_at_rate(bootstrap: str, topic: str, rate: float, messages: int) -> Latency:
    """Send ``messages`` paced at ``rate`` per second with acks=all; the latency
    distribution from ``produce`` to each delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    payload = b"x" * _MESSAGE_BYTES
    # One delivery first: until the followers fetch the new partition (up to
    # replica.fetch.wait.max.ms when their fetch to its leader is parked for other
    # partitions), acks=all waits, and the backlog would be measured, not the rate.
    producer.produce(topic, value=payload, on_delivery=_check)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("the warm-up message was not delivered in time")
    samples: list[float] = []
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
    samples.sort()
    return Latency(
        p50_ms=statistics.median(samples), p99_ms=_percentile(samples, _P99), max_ms=samples[-1]
    )


def measure_throughput(bootstrap: str, topic: str, messages: int) -> float:
    """Produce ``messages`` with acks=all as fast as the client goes; messages/s."""
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
    return messages / (time.perf_counter() - started)


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
        _create(bootstrap, "latency-rf3", 1, 3)
        _create(bootstrap, "latency-rf1", 1, 1)
        rf3 = measure_latency(bootstrap, "latency-rf3", args.latency_messages)
        rf1 = measure_latency(bootstrap, "latency-rf1", args.latency_messages)
        rates: dict[int, list[float]] = {1: [], 3: []}
        for round_index in range(args.rounds):
            for replication in (1, 3):
                topic = f"throughput-rf{replication}-{round_index}"
                _create(bootstrap, topic, _PARTITIONS, replication)
                rates[replication].append(measure_throughput(bootstrap, topic, args.messages))
        paced: dict[int, list[tuple[float, Latency]]] = {1: [], 3: []}
        for rate in paced_rates:
            for replication in (1, 3):
                topic = f"paced-rf{replication}-{rate:g}"
                _create(bootstrap, topic, 1, replication)
                latency = measure_latency_at_rate(bootstrap, topic, rate, args.rate_messages)
                paced[replication].append((rate, latency))
    rate1, rate3 = statistics.median(rates[1]), statistics.median(rates[3])
    ratio = rate3 / rate1
    print(f"## Replication ({_BROKERS} brokers on loopback, confluent-kafka, acks=all)\n")
    print("| latency, one message at a time | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, latency in (("RF 3", rf3), ("RF 1", rf1)):
        print(f"| {name} | {latency.p50_ms:.2f} | {latency.p99_ms:.2f} | {latency.max_ms:.2f} |")
    print(
        f"\n| throughput, {args.messages:,} x {_MESSAGE_BYTES} B, {_PARTITIONS} partitions "
        f"| msgs/s (median of {args.rounds}) | MB/s | rounds |"
    )
    print("|---|---:|---:|---|")
    for replication, rate in ((1, rate1), (3, rate3)):
        rounds = ", ".join(f"{r:,.0f}" for r in rates[replication])
        megabytes = rate * _MESSAGE_BYTES / _BYTES_PER_MB
        print(f"| RF {replication} | {rate:,.0f} | {megabytes:.1f} | {rounds} |")
    latency_ok = "met" if rf3.p99_ms <= _LATENCY_TARGET_MS else "MISSED"
    ratio_ok = "met" if ratio >= _THROUGHPUT_TARGET_RATIO else "MISSED"
    print(
        f"\nRF 3 p99 {rf3.p99_ms:.2f} ms (target ≤ {_LATENCY_TARGET_MS:.0f} ms: {latency_ok}); "
        f"RF 3 / RF 1 throughput {ratio:.2f} = {ratio * _PERCENT:.0f}% "
        f"(target ≥ {_THROUGHPUT_TARGET_RATIO}: {ratio_ok})"
    )
    print(f"\n| latency at a rate, {args.rate_messages:,} messages | msgs/s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for replication in (3, 1):
        for rate, latency in paced[replication]:
            print(
                f"| RF {replication} | {rate:,.0f} | {latency.p50_ms:.2f} | {latency.p99_ms:.2f} |"
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
