"""SIGTERM always stops a broker, within a bound, whatever state its cluster is in, and
the broker restarts on the same log directory without recovering anything.

The bound is Kafka's: ``controlled.shutdown.max.retries`` attempts, each at most
``request.timeout.ms``, ``controlled.shutdown.retry.backoff.ms`` apart, plus 5 s; a
healthy cluster's stop takes at most 5 s. The settings here are short (so is the
ZooKeeper session) and every bound is computed from them. "Without recovery" is the
log layer's own word: a log opened with records above its recovery point (one that was
not flushed and closed) logs ``UNFLUSHED_RECOVERED``; a SIGKILLed broker shows that the
line does appear when it should.

The faults are made with real processes: ZooKeeper unreachable (its process paused) or
gone (stopped), the controller killed, the other brokers paused (partitioned from this
one; ZooKeeper still answers), the leader this broker follows paused, a client's
long-poll fetch and a 100 MB request half sent, a full disk (``RLIMIT_FSIZE`` set on the
broker's process: its writes past the limit fail with EFBIG, as they would with ENOSPC
on a full disk), and ``/controller`` deleted as the signal arrives. One cluster serves
the whole module; each test leaves it whole again, and the last one stops it with its
ZooKeeper gone first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import resource
import signal
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient  # type: ignore[import-untyped]

from tickwheel.cluster import BrokerProcess, LocalCluster
from tickwheel.log import UNFLUSHED_RECOVERED

from .helpers import WAIT_S, create_topic, fetch_raw, local_cluster, raw_fetch, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.integration, pytest.mark.slow]

MAX_RETRIES = 2
RETRY_BACKOFF_MS = 300
REQUEST_TIMEOUT_MS = 1500
SESSION_TIMEOUT_MS = 3000
SETTINGS = {
    "controlled.shutdown.max.retries": str(MAX_RETRIES),
    "controlled.shutdown.retry.backoff.ms": str(RETRY_BACKOFF_MS),
    "request.timeout.ms": str(REQUEST_TIMEOUT_MS),
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "zookeeper.connection.timeout.ms": str(SESSION_TIMEOUT_MS),
}
_MS_PER_S = 1000
SLACK_S = 5.0
FAULT_BOUND_S = MAX_RETRIES * (RETRY_BACKOFF_MS + REQUEST_TIMEOUT_MS) / _MS_PER_S + SLACK_S
HEALTHY_BOUND_S = 5.0
SECOND_SIGNAL_BOUND_S = 2.0
"""A second signal stops the broker "at once": the logs' flush and the process's exit."""
_KILL_MARGIN_S = 30.0
"""How long past its bound a broker is waited for before the test kills it."""

TOPIC = "stopping"
# Each broker leads one partition and follows the two others.
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
RECORDS = 50
LONG_POLL_MS = 20_000
HUGE_FRAME_BYTES = 104_857_600
HALF_SENT_BYTES = 65_536
DISK_ROOM_BYTES = 256 * 1024
BIG_RECORD = b"d" * 100_000
FULL_DISK_PRODUCE_TIMEOUT_MS = 3000
CONTROLLER_PATH = "/tickwheel-test/controller"

STARTED = "listening on"
"""Words of the line a broker logs once its logs are open and it listens."""

STOP_TIMES: dict[str, float] = {}
"""Each fault state's measured stop time, printed at the end of the module."""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One three-broker cluster with the short shutdown settings, for every test here."""
    with local_cluster(tmp_path_factory.mktemp("shutdown"), properties=SETTINGS) as running:
        create_topic(running, TOPIC, ASSIGNMENT)
        yield running
    for state, seconds in STOP_TIMES.items():
        print(f"stop time, {state}: {seconds:.2f} s")


def _produce(cluster: LocalCluster, value: bytes = b"record", count: int = RECORDS) -> None:
    """Write to every partition, acks=all: unflushed records on every broker."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for index in range(count):
        producer.produce(TOPIC, value=value, partition=index % len(ASSIGNMENT))
    assert producer.flush(WAIT_S) == 0


def _stop(broker: BrokerProcess, state: str, bound_s: float) -> None:
    """SIGTERM ``broker``; it must exit with status 0 within ``bound_s``."""
    started = time.monotonic()
    status = broker.stop(timeout_s=bound_s + _KILL_MARGIN_S)
    elapsed_s = time.monotonic() - started
    STOP_TIMES[state] = elapsed_s
    assert status == 0, f"exit status {status}; see {broker.output}"
    assert elapsed_s <= bound_s, f"stopped in {elapsed_s:.1f} s, over {bound_s} s"


def _output_since(broker: BrokerProcess, offset: int) -> str:
    with broker.output.open("rb") as output:
        output.seek(offset)
        return output.read().decode(errors="replace")


def _started_output(broker: BrokerProcess, offset: int) -> str:
    """What ``broker`` logged past ``offset`` until it listened (its logs all open)."""
    wait_for(lambda: STARTED in _output_since(broker, offset), f"broker {broker.broker_id}")
    return _output_since(broker, offset)


def _restart(cluster: LocalCluster, broker: BrokerProcess) -> str:
    """Start ``broker`` again on its log directory; what it logged until it listened."""
    offset = broker.output.stat().st_size
    broker.start()
    cluster.wait_registered(broker.broker_id, SESSION_TIMEOUT_MS / _MS_PER_S + WAIT_S)
    return _started_output(broker, offset)


def _restart_clean(cluster: LocalCluster, broker: BrokerProcess) -> None:
    """Restart ``broker``: it must open every log without recovering anything."""
    logged = _restart(cluster, broker)
    assert "log dirs" in logged, logged
    assert UNFLUSHED_RECOVERED not in logged, logged


def _logged(broker: BrokerProcess, words: str) -> bool:
    return words in broker.output.read_text(errors="replace")


def _leader(cluster: LocalCluster, partition: int) -> int:
    state = cluster.partition_state(TOPIC, partition)
    assert state is not None
    return state.leader


def _zookeeper_pid(cluster: LocalCluster) -> int:
    pid = cluster.zookeeper.pid
    assert pid is not None
    return pid


def test_a_healthy_broker_stops_within_5_s_and_a_killed_one_recovers(
    shared: LocalCluster,
) -> None:
    _produce(shared)
    broker = shared.brokers[0]
    _stop(broker, "healthy cluster", HEALTHY_BOUND_S)
    assert _logged(broker, "controlled shutdown done")
    _restart_clean(shared, broker)

    # The observable can fail: a broker killed with unflushed records recovers them.
    _produce(shared)
    broker.kill()
    assert UNFLUSHED_RECOVERED in _restart(shared, broker)


def test_zookeeper_unreachable(shared: LocalCluster) -> None:
    _produce(shared)
    broker = shared.brokers[1]
    zookeeper = _zookeeper_pid(shared)
    os.kill(zookeeper, signal.SIGSTOP)
    try:
        _stop(broker, "ZooKeeper unreachable", FAULT_BOUND_S)
    finally:
        os.kill(zookeeper, signal.SIGCONT)
    assert _logged(broker, "proceeding to do an unclean shutdown")
    _restart_clean(shared, broker)


def test_a_second_signal_flushes_and_stops_at_once(shared: LocalCluster) -> None:
    _produce(shared)
    broker = shared.brokers[2]
    zookeeper = _zookeeper_pid(shared)
    pid = broker.pid
    assert pid is not None
    os.kill(zookeeper, signal.SIGSTOP)
    try:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: _logged(broker, "signal received, stopping"), "the first signal")
        started = time.monotonic()
        status = broker.stop(timeout_s=SECOND_SIGNAL_BOUND_S + _KILL_MARGIN_S)
        STOP_TIMES["second SIGTERM during a stop"] = elapsed_s = time.monotonic() - started
    finally:
        os.kill(zookeeper, signal.SIGCONT)
    assert status == 128 + signal.SIGTERM
    assert elapsed_s <= SECOND_SIGNAL_BOUND_S
    _restart_clean(shared, broker)


def test_the_controller_gone(shared: LocalCluster) -> None:
    _produce(shared)
    controller_id = shared.controller_id()
    assert controller_id is not None
    controller = shared.brokers[controller_id]
    broker = shared.brokers[(controller_id + 1) % len(shared.brokers)]
    controller.kill()
    _stop(broker, "controller gone", FAULT_BOUND_S)
    _restart_clean(shared, broker)
    _restart(shared, controller)


def test_partitioned_from_the_other_brokers_but_not_from_zookeeper(
    shared: LocalCluster,
) -> None:
    _produce(shared)
    broker, *others = shared.brokers
    for other in others:
        other.pause()
    try:
        _stop(broker, "partitioned from the other brokers", FAULT_BOUND_S)
    finally:
        for other in others:
            other.resume()
    _restart_clean(shared, broker)


def test_a_follower_fetch_outstanding_to_a_dead_leader(shared: LocalCluster) -> None:
    _produce(shared)
    leader = shared.brokers[_leader(shared, 0)]
    follower = next(b for b in shared.brokers if b is not leader)
    leader.pause()
    try:
        _stop(follower, "follower fetch to a dead leader", FAULT_BOUND_S)
    finally:
        leader.resume()
    _restart_clean(shared, follower)


def test_a_long_poll_fetch_and_a_100_mb_frame_half_sent(shared: LocalCluster) -> None:
    _produce(shared)
    broker = shared.brokers[_leader(shared, 0)]
    half_sent = socket.create_connection(("127.0.0.1", broker.port))
    half_sent.sendall(struct.pack(">i", HUGE_FRAME_BYTES) + b"\0" * HALF_SENT_BYTES)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        long_poll = pool.submit(
            asyncio.run,
            raw_fetch(
                broker.bootstrap_servers,
                TOPIC,
                max_wait_ms=LONG_POLL_MS,
                min_bytes=HUGE_FRAME_BYTES,
            ),
        )
        # A round trip on another connection: the broker's loop has read the long poll
        # (sent first), which waits in the Fetch purgatory for bytes that never come.
        assert fetch_raw(broker.bootstrap_servers, TOPIC) == 0
        assert not long_poll.done()
        _stop(broker, "long-poll fetch and 100 MB frame half sent", HEALTHY_BOUND_S)
        # Answered before the broker went (an error code, not a dropped connection).
        assert isinstance(long_poll.result(WAIT_S), int)
    with half_sent:
        half_sent.settimeout(WAIT_S)
        # Closed by the broker: an end of stream, or a reset if it dropped unread bytes.
        with contextlib.suppress(ConnectionResetError):
            assert half_sent.recv(1) == b""
    _restart_clean(shared, broker)


def test_a_full_disk(shared: LocalCluster) -> None:
    broker = shared.brokers[_leader(shared, 1)]
    pid = broker.pid
    assert pid is not None
    largest = max(p.stat().st_size for p in [broker.output, *Path(broker.log_dir).rglob("*")])
    limit = largest + DISK_ROOM_BYTES
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, limit))
    producer = Producer(
        {
            "bootstrap.servers": shared.bootstrap_servers,
            "acks": "1",
            "message.timeout.ms": FULL_DISK_PRODUCE_TIMEOUT_MS,
        }
    )
    for _ in range(2 * DISK_ROOM_BYTES // len(BIG_RECORD) + 1):
        producer.produce(TOPIC, value=BIG_RECORD, partition=1)
    # Some fail (KAFKA_STORAGE_ERROR until they time out): the disk is full.
    producer.flush(WAIT_S)
    wait_for(lambda: _logged(broker, "is offline after an I/O error"), "the disk to fill")
    _stop(broker, "full disk", FAULT_BOUND_S)
    # The failed directory's logs were closed unflushed, as Kafka's are: they are
    # recovered at the next start, and the broker serves again.
    _restart(shared, broker)


def test_during_its_own_controller_election(shared: LocalCluster) -> None:
    _produce(shared)
    broker = shared.brokers[0]
    client = KazooClient(hosts=shared.zookeeper.connect)
    client.start()
    try:
        client.delete(CONTROLLER_PATH)
        _stop(broker, "during its controller election", FAULT_BOUND_S)
    finally:
        client.stop()
        client.close()
    _restart_clean(shared, broker)


def test_zookeeper_gone_then_the_whole_cluster_stops(shared: LocalCluster) -> None:
    _produce(shared)
    pids = [b.pid for b in shared.brokers]
    zookeeper = _zookeeper_pid(shared)
    shared.zookeeper.stop()
    _stop(shared.brokers[0], "ZooKeeper gone", FAULT_BOUND_S)
    started = time.monotonic()
    shared.stop()
    STOP_TIMES["LocalCluster.stop, ZooKeeper gone"] = time.monotonic() - started
    for pid in [*pids, zookeeper]:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert time.monotonic() - started <= FAULT_BOUND_S
    offsets = [b.output.stat().st_size for b in shared.brokers]
    shared.start()
    for broker, offset in zip(shared.brokers, offsets, strict=True):
        assert UNFLUSHED_RECOVERED not in _started_output(broker, offset)
