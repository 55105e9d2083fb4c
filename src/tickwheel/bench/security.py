"""``tickwheel bench security``: what SASL_SSL costs against PLAINTEXT, side by side.

One ``tickwheel serve`` subprocess (logs on ``/dev/shm`` when it exists) with two
listeners on loopback: ``PLAINTEXT`` and ``SASL_SSL`` (TLS from a throw-away CA that
``trustme`` makes, SCRAM-SHA-256 and SCRAM-SHA-512 enabled). A SCRAM user is created
through the admin API on the PLAINTEXT listener (no authorizer: the bench measures
the data path, not ACLs). Per round (``--rounds``), the two listeners take turns so a
change of load on the shared machine hits both:

- ``produce``: confluent-kafka sends ``--messages`` values of ``--value-bytes`` over 6
  partitions of a fresh topic (acks=1, ``linger.ms`` 5, ``compression.type`` none), and
  waits for every delivery; messages/s and MB/s.
- ``consume``: one consumer reads them back from offset 0 (``assign``, no group); MB/s.
  On PLAINTEXT a fetched slice of 64 KiB or more goes from the page cache to the
  socket with ``sendfile``; TLS cannot, so SASL_SSL reads the records into memory and
  writes them through the TLS transport.
- ``connect``: ``--connections`` new clients, one after another, each a fresh
  confluent-kafka ``Producer`` whose first ``list_topics`` is answered; ms from the
  client's creation to that answer, on PLAINTEXT and over SASL_SSL with
  SCRAM-SHA-256 and SCRAM-SHA-512 (TCP, TLS handshake, ApiVersions, SaslHandshake,
  the two SCRAM round trips, Metadata). The difference from PLAINTEXT is the cost of
  authenticating a new connection.

It prints each figure's median over the rounds and the ratios SASL_SSL / PLAINTEXT
(target: consume >= 0.5); ``--png`` draws them.

Concurrency: one thread drives the clients; librdkafka's own threads do the I/O.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from tickwheel.bench._chart import Bars, add_png_argument, save_png

_LOOPBACK = "127.0.0.1"
_TMPFS = Path("/dev/shm")
_READY_TIMEOUT_S = 30.0
_CLIENT_TIMEOUT_S = 60.0
_PARTITIONS = 6
_BUFFER_FULL_WAIT_S = 0.01
_CONSUME_BATCH = 10_000
_MB = 1_000_000
_MS_PER_S = 1000.0
_USER = "bench"
_PASSWORD = "bench-secret"
_SCRAM_ITERATIONS = 4096
_PLAINTEXT = "PLAINTEXT"
_SASL_SSL = "SASL_SSL"
_CONSUME_TARGET = 0.5
# The broker's start-up line names each listener as ``host:port (NAME)``.
_LISTENER = re.compile(r"(\S+):(\d+) \((\w+)\)")
_SCRAM_MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}


@dataclass
class SecuredBroker:
    """A ``tickwheel serve`` subprocess with a PLAINTEXT and a SASL_SSL listener."""

    process: subprocess.Popen[bytes]
    addresses: dict[str, str]
    ca_file: Path

    def client_config(self, listener: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
        """A confluent-kafka configuration for ``listener`` (as the user ``bench``)."""
        config: dict[str, Any] = {"bootstrap.servers": self.addresses[listener]}
        if listener == _SASL_SSL:
            config |= {
                "security.protocol": _SASL_SSL,
                "ssl.ca.location": str(self.ca_file),
                "sasl.mechanism": mechanism,
                "sasl.username": _USER,
                "sasl.password": _PASSWORD,
            }
        return config

    def stop(self) -> None:
        """SIGTERM, then wait."""
        self.process.terminate()
        try:
            self.process.wait(_READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _write_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA file and the broker's PEM keystore (key and chain) for ``127.0.0.1``."""
    authority = trustme.CA()
    server = authority.issue_cert(_LOOPBACK, "localhost")
    ca_file = directory / "ca.pem"
    keystore = directory / "broker.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    return ca_file, keystore


def _read_listeners(process: subprocess.Popen[bytes]) -> dict[str, str]:
    assert process.stderr is not None
    for raw in process.stderr:
        line = raw.decode(errors="replace")
        if "listening on" in line:
            # Keep draining stderr so the broker never blocks on a full pipe.
            threading.Thread(target=process.stderr.read, daemon=True).start()
            head = line.split("(advertised", 1)[0]
            return {name: f"{host}:{port}" for host, port, name in _LISTENER.findall(head)}
    raise RuntimeError("tickwheel serve exited before it listened")


@contextmanager
def secured_broker(directory: Path) -> Iterator[SecuredBroker]:
    """Start the broker with both listeners and the SCRAM user; stop it afterwards."""
    ca_file, keystore = _write_certificates(directory)
    overrides = {
        "listeners": f"PLAINTEXT://{_LOOPBACK}:0,SASL_SSL://{_LOOPBACK}:0",
        "log.dirs": str(directory / "logs"),
        "offsets.topic.num.partitions": "1",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": ",".join(_SCRAM_MECHANISMS),
    }
    command = [sys.executable, "-m", "tickwheel.cli", "serve"]
    for name, value in overrides.items():
        command += ["--override", f"{name}={value}"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    broker = SecuredBroker(process, {}, ca_file)
    try:
        broker.addresses = _read_listeners(process)
        _create_user(broker)
        yield broker
    finally:
        broker.stop()


def _create_user(broker: SecuredBroker) -> None:
    admin = AdminClient(broker.client_config(_PLAINTEXT))
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        try:
            admin.list_topics(timeout=1)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(
            _USER, ScramCredentialInfo(mechanism, _SCRAM_ITERATIONS), _PASSWORD.encode()
        )
        for mechanism in _SCRAM_MECHANISMS.values()
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(_CLIENT_TIMEOUT_S)


def _create_topic(broker: SecuredBroker, topic: str) -> None:
    admin = AdminClient(broker.client_config(_PLAINTEXT))
    futures = admin.create_topics([NewTopic(topic, _PARTITIONS, 1)])
    for future in futures.values():
        future.result(_CLIENT_TIMEOUT_S)


def _timed(run: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    count = run()
    return count, time.perf_counter() - started


def produce(config: dict[str, Any], topic: str, messages: int, value_bytes: int) -> float:
    """Send ``messages`` values round-robin over the partitions; seconds until all acked."""
    producer = Producer(
        config | {"acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    producer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)
    payload = b"x" * value_bytes

    def run() -> int:
        for i in range(messages):
            while True:
                try:
                    producer.produce(topic, payload, partition=i % _PARTITIONS)
                    break
                except BufferError:
                    producer.poll(_BUFFER_FULL_WAIT_S)
        if producer.flush(_CLIENT_TIMEOUT_S) != 0:
            raise RuntimeError("messages were left undelivered")
        return messages

    return _timed(run)[1]


def consume(config: dict[str, Any], topic: str, messages: int) -> float:
    """Read ``messages`` values back from offset 0; seconds taken."""
    consumer = Consumer(
        config
        | {
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 0,
        }
    )
    consumer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)

    def run() -> int:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(_PARTITIONS)])
        count = 0
        deadline = time.monotonic() + _CLIENT_TIMEOUT_S
        while count < messages and time.monotonic() < deadline:
            batch = consumer.consume(_CONSUME_BATCH, 1.0)
            count += sum(1 for message in batch if message.error() is None)
        return count

    try:
        count, seconds = _timed(run)
    finally:
        consumer.close()
    if count < messages:
        raise RuntimeError(f"consumed {count:,} of {messages:,} messages")
    return seconds


def connect_ms(config: dict[str, Any], topic: str, connections: int) -> float:
    """Median ms from a new client's creation to its first Metadata answer."""
    samples: list[float] = []
    for _ in range(connections):
        started = time.perf_counter()
        producer = Producer(config)
        producer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)
        samples.append((time.perf_counter() - started) * _MS_PER_S)
        del producer
    return statistics.median(samples)


@dataclass
class Samples:
    """Every round's figure under each label (``produce PLAINTEXT``, ...)."""

    values: dict[str, list[float]]

    def add(self, label: str, value: float) -> None:
        """Record one round's value."""
        self.values.setdefault(label, []).append(value)

    def median(self, label: str) -> float:
        """The median over the rounds."""
        return statistics.median(self.values[label])


def run_round(broker: SecuredBroker, args: argparse.Namespace, samples: Samples) -> None:
    """One round: produce, consume and connect on each listener, taking turns."""
    mb = args.messages * args.value_bytes / _MB
    topics = {
        listener: f"bench-{listener.lower()}-{uuid.uuid4().hex[:8]}"
        for listener in (_PLAINTEXT, _SASL_SSL)
    }
    for listener, topic in topics.items():
        _create_topic(broker, topic)
        seconds = produce(broker.client_config(listener), topic, args.messages, args.value_bytes)
        samples.add(f"produce {listener}", mb / seconds)
    for listener, topic in topics.items():
        seconds = consume(broker.client_config(listener), topic, args.messages)
        samples.add(f"consume {listener}", mb / seconds)
    topic = topics[_PLAINTEXT]
    samples.add(
        f"connect {_PLAINTEXT}",
        connect_ms(broker.client_config(_PLAINTEXT), topic, args.connections),
    )
    for mechanism in _SCRAM_MECHANISMS:
        config = broker.client_config(_SASL_SSL, mechanism)
        samples.add(f"connect {mechanism}", connect_ms(config, topic, args.connections))


def report(samples: Samples, args: argparse.Namespace) -> str:
    """The medians and the SASL_SSL / PLAINTEXT ratios, as printed."""
    lines = [
        f"tickwheel bench security: {args.messages:,} values of {args.value_bytes:,} B, "
        f"{_PARTITIONS} partitions, {args.rounds} rounds (medians)",
        "",
        f"{'':<10}{'PLAINTEXT':>14}{'SASL_SSL':>14}{'ratio':>8}",
    ]
    for kind in ("produce", "consume"):
        plain, secured = (
            samples.median(f"{kind} {_PLAINTEXT}"),
            samples.median(f"{kind} {_SASL_SSL}"),
        )
        target = f"  (target >= {_CONSUME_TARGET})" if kind == "consume" else ""
        lines.append(
            f"{kind:<10}{plain:>9.1f} MB/s{secured:>9.1f} MB/s{secured / plain:>8.2f}{target}"
        )
    plain_ms = samples.median(f"connect {_PLAINTEXT}")
    lines += [
        "",
        f"new connection to first Metadata answer (median of {args.connections} per round):",
    ]
    lines.append(f"  {_PLAINTEXT:<16}{plain_ms:>8.1f} ms")
    for mechanism in _SCRAM_MECHANISMS:
        ms = samples.median(f"connect {mechanism}")
        lines.append(f"  {mechanism:<16}{ms:>8.1f} ms  (+{ms - plain_ms:.1f} ms: TLS and SCRAM)")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench security", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--messages", type=int, default=200_000, help="values per pass")
    parser.add_argument("--value-bytes", type=int, default=1000, help="bytes per value")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (medians are quoted)")
    parser.add_argument(
        "--connections", type=int, default=20, help="new clients per round and kind"
    )
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run the rounds; print the medians and ratios."""
    args = _parser().parse_args(argv)
    if min(args.messages, args.value_bytes, args.rounds, args.connections) < 1:
        print("tickwheel bench security: every count must be at least 1", file=sys.stderr)
        return 2
    parent = _TMPFS if _TMPFS.is_dir() else None
    samples = Samples({})
    with (
        tempfile.TemporaryDirectory(prefix="tickwheel-bench-", dir=parent) as base,
        secured_broker(Path(base)) as broker,
    ):
        for _ in range(args.rounds):
            run_round(broker, args, samples)
    print(report(samples, args))
    save_png(
        args.png,
        "SASL_SSL against PLAINTEXT",
        [
            Bars(
                title="Throughput",
                unit="MB/s",
                values={
                    listener: {
                        kind: samples.median(f"{kind} {listener}")
                        for kind in ("produce", "consume")
                    }
                    for listener in (_PLAINTEXT, _SASL_SSL)
                },
            ),
            Bars(
                title="New connection to first Metadata answer",
                unit="ms",
                values={
                    label: {"connect": samples.median(f"connect {label}")}
                    for label in (_PLAINTEXT, *_SCRAM_MECHANISMS)
                },
            ),
        ],
    )
    return 0
