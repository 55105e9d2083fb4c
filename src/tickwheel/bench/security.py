"""``tickwheel bench security``: what TLS and SASL cost against PLAINTEXT, side by side.

One ``tickwheel serve`` subprocess (logs on ``/dev/shm`` when it exists) with three
listeners on loopback: ``PLAINTEXT``, ``SASL_PLAINTEXT`` and ``SASL_SSL`` (TLS from a
throw-away CA that ``trustme`` makes; PLAIN with a JAAS user, SCRAM-SHA-256 and
SCRAM-SHA-512). The SCRAM user is created through the admin API on the PLAINTEXT
listener (no authorizer: the bench measures the data path, not ACLs). Two parts:

``throughput`` -- per round (``--rounds``), PLAINTEXT and SASL_SSL take turns so a change
of load on the shared machine hits both:

- produce: confluent-kafka sends ``--messages`` values of ``--value-bytes`` over 6
  partitions of a fresh topic (acks=1, ``linger.ms`` 5, no compression) and waits for
  every delivery; MB/s.
- consume: one consumer reads them back from offset 0 (``assign``, no group); MB/s. On
  PLAINTEXT a fetched slice of 64 KiB or more goes from the page cache to the socket
  with ``sendfile``; TLS cannot, so SASL_SSL reads the records into memory and writes
  them through the TLS transport.

``logins`` -- ``--connections`` new connections of each kind, one after the other, after
``_WARMUP`` of each, from this process with tickwheel's own client (blocking sockets,
``ssl`` for TLS, ``tickwheel.security``'s PLAIN and SCRAM clients, which compute PBKDF2
over the password at every login as librdkafka does): connect and ApiVersions on
PLAINTEXT, the floor; the same plus SaslHandshake v1 and SaslAuthenticate v2 (one for
PLAIN, two for SCRAM at 4096 iterations) on SASL_PLAINTEXT; and over SASL_SSL the TLS
handshake first. The client's PBKDF2 alone is measured apart, so the broker's share can
be read off (the broker never runs PBKDF2: it keeps StoredKey and ServerKey).

It prints the medians, the ratios SASL_SSL / PLAINTEXT (target: consume >= 0.5) and the
logins' median and p99; ``--png`` draws them.

Concurrency: one thread drives the clients; librdkafka's own threads do the I/O.
"""

from __future__ import annotations

import argparse
import functools
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from tickwheel.bench.broker import send_round_robin
from tickwheel.protocol import ApiKey, BlockingClient
from tickwheel.security import (
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    PlainClient,
    SaslClient,
    ScramClient,
)

_LOOPBACK = "127.0.0.1"
_TMPFS = Path("/dev/shm")
_READY_TIMEOUT_S = 30.0
_CLIENT_TIMEOUT_S = 60.0
_PARTITIONS = 6
_CONSUME_BATCH = 10_000
_MB = 1_000_000
_MS_PER_S = 1000.0
_USER = "bench"
_PASSWORD = "bench-secret"
_PLAINTEXT = "PLAINTEXT"
_SASL_PLAINTEXT = "SASL_PLAINTEXT"
_SASL_SSL = "SASL_SSL"
_CONSUME_TARGET = 0.5
_WARMUP = 20
_PBKDF2_SAMPLES = 100
_P99 = 0.99
_CLIENT_ID = "bench"
_API_VERSIONS_VERSION = 3
_API_VERSIONS_VALUES = {"client_software_name": "bench", "client_software_version": "1"}
# The broker's start-up line names each listener as ``host:port (NAME)``.
_LISTENER = re.compile(r"(\S+):(\d+) \((\w+)\)")
_CONFLUENT_SCRAM = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
_PLAIN_JAAS = (
    f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{_USER}="{_PASSWORD}";'
)


@dataclass
class SecuredBroker:
    """A ``tickwheel serve`` subprocess with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL."""

    process: subprocess.Popen[bytes]
    ca_file: Path
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Reads the broker's stderr after start-up, so it never blocks on a full pipe.
    drain: threading.Thread | None = None

    def bootstrap(self, listener: str) -> str:
        """``host:port`` of ``listener``."""
        host, port = self.addresses[listener]
        return f"{host}:{port}"

    def client_config(self, listener: str) -> dict[str, Any]:
        """A confluent-kafka configuration for ``listener`` (SCRAM-SHA-256 on SASL_SSL)."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener)}
        if listener == _SASL_SSL:
            config |= {
                "security.protocol": _SASL_SSL,
                "ssl.ca.location": str(self.ca_file),
                "sasl.mechanism": "SCRAM-SHA-256",
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
        if self.drain is not None:
            self.drain.join()
        if self.process.stderr is not None:
            self.process.stderr.close()


def _write_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA file and the broker's PEM keystore (key and chain) for ``127.0.0.1``."""
    authority = trustme.CA()
    server = authority.issue_cert(_LOOPBACK, "localhost")
    ca_file = directory / "ca.pem"
    keystore = directory / "broker.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    return ca_file, keystore


def _read_listeners(broker: SecuredBroker) -> dict[str, tuple[str, int]]:
    process = broker.process
    assert process.stderr is not None
    said: list[str] = []
    for raw in process.stderr:
        line = raw.decode(errors="replace")
        said.append(line)
        if "listening on" in line:
            broker.drain = threading.Thread(target=process.stderr.read, daemon=True)
            broker.drain.start()
            head = line.split("(advertised", 1)[0]
            return {name: (host, int(port)) for host, port, name in _LISTENER.findall(head)}
    raise RuntimeError("tickwheel serve exited before it listened:\n" + "".join(said[-5:]))


@contextmanager
def secured_broker(directory: Path) -> Iterator[SecuredBroker]:
    """Start the broker with its three listeners and the SCRAM user; stop it afterwards."""
    ca_file, keystore = _write_certificates(directory)
    overrides = {
        "listeners": ",".join(
            f"{name}://{_LOOPBACK}:0" for name in (_PLAINTEXT, _SASL_PLAINTEXT, _SASL_SSL)
        ),
        "log.dirs": str(directory / "logs"),
        "offsets.topic.num.partitions": "1",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _PLAIN_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
    }
    command = [sys.executable, "-m", "tickwheel.cli", "serve"]
    for name, value in overrides.items():
        command += ["--override", f"{name}={value}"]
    broker = SecuredBroker(subprocess.Popen(command, stderr=subprocess.PIPE), ca_file)
    try:
        broker.addresses = _read_listeners(broker)
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
            _USER, ScramCredentialInfo(mechanism, MIN_ITERATIONS), _PASSWORD.encode()
        )
        for mechanism in _CONFLUENT_SCRAM.values()
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(_CLIENT_TIMEOUT_S)


# -- throughput -------------------------------------------------------------------------


def _create_topic(broker: SecuredBroker, topic: str) -> None:
    admin = AdminClient(broker.client_config(_PLAINTEXT))
    for future in admin.create_topics([NewTopic(topic, _PARTITIONS, 1)]).values():
        future.result(_CLIENT_TIMEOUT_S)


def produce(config: dict[str, Any], topic: str, messages: int, value_bytes: int) -> float:
    """Send ``messages`` values round-robin over the partitions; seconds until all acked."""
    producer = Producer(
        config | {"acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
    )
    producer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)
    payload = b"x" * value_bytes
    started = time.perf_counter()
    send_round_robin(producer, topic, payload, messages, _PARTITIONS)
    return time.perf_counter() - started


def consume(config: dict[str, Any], topic: str, messages: int) -> float:
    """Read ``messages`` values back from offset 0; seconds taken."""
    consumer = Consumer(
        config
        | {"group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False}
        | {"fetch.queue.backoff.ms": 0}
    )
    try:
        consumer.list_topics(topic, timeout=_CLIENT_TIMEOUT_S)
        started = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(_PARTITIONS)])
        count = 0
        deadline = time.monotonic() + _CLIENT_TIMEOUT_S
        while count < messages and time.monotonic() < deadline:
            # No more than what is left: consume() waits its timeout for a full batch.
            batch = consumer.consume(min(_CONSUME_BATCH, messages - count), 1.0)
            count += sum(1 for message in batch if message.error() is None)
        seconds = time.perf_counter() - started
    finally:
        consumer.close()
    if count < messages:
        raise RuntimeError(f"consumed {count:,} of {messages:,} messages")
    return seconds


def throughput_round(
    broker: SecuredBroker, messages: int, value_bytes: int, samples: dict[str, list[float]]
) -> None:
    """One round: produce then consume on PLAINTEXT and SASL_SSL, taking turns (MB/s)."""
    mb = messages * value_bytes / _MB
    topics = {
        listener: f"bench-{listener.lower()}-{uuid.uuid4().hex[:8]}"
        for listener in (_PLAINTEXT, _SASL_SSL)
    }
    for listener, topic in topics.items():
        _create_topic(broker, topic)
        seconds = produce(broker.client_config(listener), topic, messages, value_bytes)
        samples.setdefault(f"produce {listener}", []).append(mb / seconds)
    for listener, topic in topics.items():
        seconds = consume(broker.client_config(listener), topic, messages)
        samples.setdefault(f"consume {listener}", []).append(mb / seconds)


# -- logins -----------------------------------------------------------------------------


def _login(address: tuple[str, int], tls: ssl.SSLContext | None, client: SaslClient | None) -> None:
    """Connect, ApiVersions, and log in with ``client`` (none: PLAINTEXT's floor)."""
    host, port = address
    connection = BlockingClient(
        host,
        port,
        client_id=_CLIENT_ID,
        timeout_s=_CLIENT_TIMEOUT_S,
        no_delay=True,
        ssl_context=tls,
    )
    try:
        connection.call(ApiKey.API_VERSIONS, _API_VERSIONS_VERSION, _API_VERSIONS_VALUES)
        if client is not None:
            connection.login(client, peer=f"{host}:{port}")
    finally:
        connection.close()


def _scram_login(address: tuple[str, int], tls: ssl.SSLContext | None, mechanism: str) -> None:
    """A login with a fresh SCRAM client (each has its own nonce)."""
    _login(address, tls, ScramClient(mechanism, _USER, _PASSWORD))


def _times_ms(connect: Callable[[], None], count: int) -> list[float]:
    for _ in range(_WARMUP):
        connect()
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        connect()
        times.append((time.perf_counter() - started) * _MS_PER_S)
    return sorted(times)


def pbkdf2_ms(mechanism: str) -> float:
    """The client's PBKDF2 over the password alone, in ms (4096 iterations)."""
    scram = SCRAM_MECHANISMS[mechanism]
    started = time.perf_counter()
    for _ in range(_PBKDF2_SAMPLES):
        scram.salted_password(_PASSWORD, b"tickwheel-bench-salt", MIN_ITERATIONS)
    return (time.perf_counter() - started) * _MS_PER_S / _PBKDF2_SAMPLES


def logins(broker: SecuredBroker, count: int) -> dict[str, list[float]]:
    """Each kind of new connection's times in ms, sorted."""
    tls = ssl.create_default_context(cafile=str(broker.ca_file))
    plain, sasl, secured = (
        broker.addresses[name] for name in (_PLAINTEXT, _SASL_PLAINTEXT, _SASL_SSL)
    )
    kinds: dict[str, Callable[[], None]] = {
        "PLAINTEXT (ApiVersions)": lambda: _login(plain, None, None),
        "SASL_PLAINTEXT PLAIN": lambda: _login(sasl, None, PlainClient(_USER, _PASSWORD)),
    }
    for mechanism in SCRAM_MECHANISMS:
        kinds[f"SASL_PLAINTEXT {mechanism}"] = functools.partial(
            _scram_login, sasl, None, mechanism
        )
    for mechanism in SCRAM_MECHANISMS:
        kinds[f"SASL_SSL {mechanism}"] = functools.partial(_scram_login, secured, tls, mechanism)
    return {kind: _times_ms(connect, count) for kind, connect in kinds.items()}


# -- report -----------------------------------------------------------------------------


def _p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(len(values) * _P99))]


def report(
    throughput: Mapping[str, list[float]],
    times: Mapping[str, list[float]],
    args: argparse.Namespace,
) -> str:
    """The figures as printed."""
    lines: list[str] = []
    if throughput:
        lines += [
            f"throughput: {args.messages:,} values of {args.value_bytes:,} B, {_PARTITIONS} "
            f"partitions, median of {args.rounds} rounds",
            "",
            f"| pass | {_PLAINTEXT} (MB/s) | {_SASL_SSL} (MB/s) | ratio |",
            "|---|---:|---:|---:|",
        ]
        for kind in ("produce", "consume"):
            plain = statistics.median(throughput[f"{kind} {_PLAINTEXT}"])
            secured = statistics.median(throughput[f"{kind} {_SASL_SSL}"])
            target = f" (target >= {_CONSUME_TARGET})" if kind == "consume" else ""
            lines.append(
                f"| {kind} | {plain:.1f} | {secured:.1f} | {secured / plain:.2f}{target} |"
            )
        lines.append("")
    if times:
        lines += [
            f"logins: {args.connections} new connections of each kind",
            "",
            "| connection | median (ms) | p99 (ms) | client PBKDF2 (ms) |",
            "|---|---:|---:|---:|",
        ]
        for kind, values in times.items():
            mechanism = kind.rpartition(" ")[2]
            pbkdf2 = f"{pbkdf2_ms(mechanism):.2f}" if mechanism in SCRAM_MECHANISMS else "-"
            lines.append(
                f"| {kind} | {statistics.median(values):.2f} | {_p99(values):.2f} | {pbkdf2} |"
            )
    return "\n".join(lines)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench security", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--parts",
        default="throughput,logins",
        help="comma-separated: throughput, logins (default both)",
    )
    parser.add_argument("--messages", type=_positive, default=200_000, help="values per pass")
    parser.add_argument("--value-bytes", type=_positive, default=1000, help="bytes per value")
    parser.add_argument("--rounds", type=_positive, default=5, help="throughput rounds")
    parser.add_argument(
        "--connections", type=_positive, default=500, help="new connections of each kind"
    )
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Run the parts asked for; print the figures."""
    parser = _parser()
    args = parser.parse_args(argv)
    parts = {part.strip() for part in args.parts.split(",") if part.strip()}
    if not parts or parts - {"throughput", "logins"}:
        parser.error(f"--parts takes throughput and logins, got {args.parts!r}")
    parent = _TMPFS if _TMPFS.is_dir() else None
    throughput: dict[str, list[float]] = {}
    times: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="tickwheel-bench-", dir=parent) as base,
        secured_broker(Path(base)) as broker,
    ):
        if "throughput" in parts:
            for _ in range(args.rounds):
                throughput_round(broker, args.messages, args.value_bytes, throughput)
        if "logins" in parts:
            times = logins(broker, args.connections)
    print(report(throughput, times, args))
    panels: list[Bars] = []
    if throughput:
        panels.append(
            Bars(
                title="Throughput",
                unit="MB/s",
                values={
                    listener: {
                        kind: statistics.median(throughput[f"{kind} {listener}"])
                        for kind in ("produce", "consume")
                    }
                    for listener in (_PLAINTEXT, _SASL_SSL)
                },
            )
        )
    if times:
        panels.append(
            Bars(
                title="A new connection, logged in",
                unit="ms",
                values={
                    "median": {kind: statistics.median(v) for kind, v in times.items()},
                    "p99": {kind: _p99(v) for kind, v in times.items()},
                },
            )
        )
    save_png(args.png, "tickwheel bench security", panels)
    return 0
