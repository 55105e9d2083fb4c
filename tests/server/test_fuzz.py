"""Random and mutated request frames never take the broker down.

Each example opens a connection and sends 50 frames -- random bytes behind a real or
made-up API key and version, or a well-formed request with bytes flipped, replaced,
inserted or cut -- then a fresh connection must still be answered. 200 examples make
10,000 frames; afterwards a real client produces and consumes as usual. The seeds (one
request per API and version the broker serves), the mutations and the random frames
are those of ``tickwheel bench fuzz``, whose own run is tested here too, bounded.
SASL conversations with random and damaged tokens (``fuzz.sasl_conversation``) go to a
SASL_PLAINTEXT listener the same way: after each, a fresh connection still logs in, and
afterwards a real client logs in and produces and consumes.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tickwheel.bench import _served, fuzz
from tickwheel.pytest_plugin import TEST_BROKER_PROPERTIES
from tickwheel.security import PlainClient
from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.server.apis import API_SPECS

from .wire import WireClient, host_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = 200
FRAMES_PER_EXAMPLE = 50
TIMEOUT_S = 15.0
BENCH_FRAMES = 10_000
SEEDS = fuzz.seed_frames()

SASL_EXAMPLES = 150
SASL_CONVERSATIONS_PER_EXAMPLE = 5
random_frames = st.builds(fuzz.random_frame, st.randoms(use_true_random=False))
sasl_conversations = st.builds(fuzz.sasl_conversation, st.randoms(use_true_random=False))
mutated_frames = st.builds(fuzz.mutate, st.sampled_from(SEEDS), st.randoms(use_true_random=False))


def _send_all(broker: BackgroundBroker, frames: list[bytes]) -> None:
    with socket.create_connection(host_port(broker.bootstrap_servers), timeout=TIMEOUT_S) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                return  # the broker closed this connection: expected for bad frames


def _answers(broker: BackgroundBroker) -> bool:
    client = WireClient(broker.bootstrap_servers)
    try:
        body = client.call(18, 3, {"client_software_name": "check", "client_software_version": "1"})
        return bool(body.error_code == ErrorCode.none)
    finally:
        client.close()


def test_every_seed_is_answered(tickwheel_broker: BackgroundBroker) -> None:
    """The seeds are well-formed requests, so their mutations reach the handlers' logic."""
    seeded = {struct.unpack_from(">hh", seed, 4) for seed in SEEDS}
    assert seeded == {
        (spec.api_key, version)
        for spec in API_SPECS
        for version in range(spec.versions.min_version, spec.versions.max_version + 1)
    }
    client = WireClient(tickwheel_broker.bootstrap_servers)
    # JoinGroup v1 waits for the v0 seed's member up to its session timeout.
    client.sock.settimeout(TIMEOUT_S)
    try:
        for seed in SEEDS:
            client.sock.sendall(seed)
            frame = client.read_frame()
            assert frame is not None, f"seed for api key {struct.unpack_from('>h', seed, 4)[0]}"
            assert frame[:4] == seed[8:12], "answered with the seed's correlation id"
    finally:
        client.close()


def test_bad_frames_never_stop_the_broker(tickwheel_broker: BackgroundBroker) -> None:
    sent: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        st.lists(
            random_frames | mutated_frames,
            min_size=FRAMES_PER_EXAMPLE,
            max_size=FRAMES_PER_EXAMPLE,
        )
    )
    def run(frames: list[bytes]) -> None:
        _send_all(tickwheel_broker, frames)
        sent.append(len(frames))
        assert _answers(tickwheel_broker)

    run()
    assert sum(sent) >= EXAMPLES * FRAMES_PER_EXAMPLE
    producer = Producer({"bootstrap.servers": tickwheel_broker.bootstrap_servers})
    producer.produce("after-fuzz", value=b"still here", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {"bootstrap.servers": tickwheel_broker.bootstrap_servers, "group.id": "after-fuzz"}
    )
    consumer.assign([TopicPartition("after-fuzz", 0, 0)])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
    finally:
        consumer.close()
    assert message is not None
    assert message.value() == b"still here"


def _logs_in(bootstrap_servers: str) -> bool:
    client = WireClient(bootstrap_servers)
    try:
        handshake = client.call(17, 1, {"mechanism": "PLAIN"})
        token = PlainClient(_served.SASL_USER, _served.SASL_PASSWORD).initial_response()
        answer = client.call(36, 2, {"auth_bytes": token})
        return bool(handshake.error_code == ErrorCode.none and answer.error_code == ErrorCode.none)
    finally:
        client.close()


def test_sasl_frames_never_stop_the_broker(tmp_path: Path) -> None:
    properties = {
        **TEST_BROKER_PROPERTIES,
        **_served.SASL_BROKER_PROPERTIES,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path),
        # Failed logins still wait on the wheel, only briefly, so the test stays short.
        "connection.failed.authentication.delay.ms": "5",
    }
    sent: list[int] = []
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        servers = broker.bootstrap_servers

        @settings(
            max_examples=SASL_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(
            st.lists(
                sasl_conversations,
                min_size=SASL_CONVERSATIONS_PER_EXAMPLE,
                max_size=SASL_CONVERSATIONS_PER_EXAMPLE,
            )
        )
        def run(conversations: list[list[bytes]]) -> None:
            for frames in conversations:
                _send_all(broker, frames)
                sent.append(len(frames))
            assert _logs_in(servers)

        run()
        assert len(sent) >= SASL_EXAMPLES * SASL_CONVERSATIONS_PER_EXAMPLE
        config = fuzz.sasl_client_config(servers)
        producer = Producer(config)
        producer.produce("after-sasl-fuzz", value=b"still here", partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        consumer = Consumer({**config, "group.id": "after-sasl-fuzz"})
        consumer.assign([TopicPartition("after-sasl-fuzz", 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        message = None
        try:
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
        finally:
            consumer.close()
        assert message is not None
        assert message.value() == b"still here"


def test_the_fuzz_command_finds_no_traceback_and_no_death(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``tickwheel bench fuzz``, bounded: a broker subprocess, every schema-breaking
    request, mutated and random frames, then a real client (the attacks on the connection
    defences it also runs are the defence tier's, tests/server/net/test_defences.py)."""
    assert fuzz.main(["--frames", str(BENCH_FRAMES), "--skip-defences"]) == 0
    report = capsys.readouterr().out
    figures = {
        cells[1].strip(): cells[2].strip()
        for cells in (line.split("|") for line in report.splitlines() if line.startswith("| "))
    }
    assert int(figures["frames sent"].replace(",", "")) >= BENCH_FRAMES
    assert figures["broker tracebacks"] == "0"
    assert figures["broker deaths"] == "0"
    assert figures["confluent-kafka produce + consume afterwards"] == "ok"
    assert int(figures["SASL conversations (SASL_PLAINTEXT listener)"].replace(",", "")) > 0
    assert figures["confluent-kafka SASL PLAIN login, produce + consume afterwards"] == "ok"
