"""``LocalCluster``: ZooKeeper and N brokers on loopback, each in its own process.

What ``tickwheel cluster`` runs and what the cluster tests use. Under one base
directory it keeps ZooKeeper's data (``zookeeper/``) and one log directory per broker
(``broker-<id>/``, beside its output in ``broker-<id>.log``). Each broker is
``python -m tickwheel.cli serve`` with Kafka's properties as overrides: its
``broker.id``, loopback listeners on ports of its own, its ``log.dirs`` and
``zookeeper.connect`` (with the chroot given, if any), plus any extra properties.
The listeners are named by ``listeners`` (default one ``PLAINTEXT``); the first is the
one clients use (``bootstrap_servers``); their protocols, certificates and the
inter-broker listener come with the extra properties.

``start`` returns once every broker has registered in ZooKeeper; ``stop`` sends every
broker SIGTERM at once (a clean stop: logs flushed, checkpoints written, registration
removed) and waits for each, then stops ZooKeeper; a broker still running after the
bound its controlled shutdown settings give (``BrokerProcess.stop_timeout_s``) is
killed, so a stop always ends, whatever died first. A ``BrokerProcess`` can also be
killed (SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and started again on the same
port and directory (``restart``: SIGKILL, then start, as a crash and a supervisor
would). Processes are only ever signalled by the PIDs started here.

With ``faults=True`` each broker serves its fault plan (``tickwheel.faults``) over HTTP
on a metrics port of its own (``BrokerProcess.faults``, a ``FaultEndpointClient``), and
``isolate(broker_id)`` cuts one broker off from the others, both ways, on every
inter-broker channel (``INTER_BROKER_CHANNELS``: replica fetching, transaction markers
and verification, share state): the others close every connection it opens to them,
and it closes every connection of theirs, so it neither follows nor leads, writes no
marker and verifies no transaction across the cut, while ZooKeeper still sees it
registered (its followers leave the ISRs of the partitions it leads after
``replica.lag.time.max.ms``; it falls behind on the ones it follows). ``heal`` takes
those rules out. ``move_leader`` moves a partition's leadership: to a replica named
(its replicas reordered, then a preferred election, through the controller), or off
its leader (a clean stop and a start of that broker).

Concurrency: one owner thread; not thread-safe.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode

from tickwheel.cluster._channels import INTER_BROKER_CHANNELS
from tickwheel.cluster._znodes import (
    CONTROLLER_PATH,
    broker_path,
    decode_controller,
    decode_partition_state,
    decode_topic,
    partition_state_path,
    topic_path,
)
from tickwheel.cluster._zookeeper import DEFAULT_TICK_MS, ZooKeeperServer, free_port
from tickwheel.faults import FaultEndpointClient
from tickwheel.protocol import ApiKey, BlockingClient
from tickwheel.replica import NO_LEADER, LeaderAndIsr

LOOPBACK = "127.0.0.1"
DEFAULT_START_TIMEOUT_S = 60.0
_STOP_SLACK_S = 10.0
"""What a broker's stop may take past its controlled shutdown (5 s, the README says)
plus room for a slow, shared machine."""
_CLIENT_CLOSE_TIMEOUT_S = 5.0
_MS_PER_S = 1000.0
_POLL_INTERVAL_S = 0.05
_METRICS_PORT = "tickwheel.metrics.port"
_FAULTS_ENDPOINT = "tickwheel.faults.endpoint.enable"
# What a replica fetcher sends: its connection's first request, and its two APIs.
_ADMIN_CLIENT_ID = "tickwheel-local-cluster"
_REASSIGN_VERSION = 0
_ELECT_VERSION = 1
_PREFERRED_ELECTION = 0


def _check(error_code: int, api: str) -> None:
    if error_code != ErrorCode.none:
        raise RuntimeError(f"{api} answered {ErrorCode(error_code).name.upper()}")


def _close_client(client: KazooClient) -> None:
    client.stop()
    client.close()


class BrokerProcess:
    """One broker of a ``LocalCluster``: a ``tickwheel serve`` process."""

    def __init__(
        self,
        broker_id: int,
        port: int,
        log_dir: Path,
        properties: Mapping[str, str],
        *,
        client_listener: str = "PLAINTEXT",
        other_listeners: Mapping[str, int] | None = None,
        faults_port: int | None = None,
    ) -> None:
        """A broker whose ``client_listener`` is on ``port``, and each of
        ``other_listeners`` (name -> port) on its own port; its fault plan served on
        ``faults_port`` (its metrics port), if given."""
        self.broker_id = broker_id
        self.port = port
        self.listener_ports = {client_listener: port, **(other_listeners or {})}
        self.log_dir = log_dir
        self.properties = dict(properties)
        self.faults: FaultEndpointClient | None = None
        if faults_port is not None:
            self.properties[_METRICS_PORT] = str(faults_port)
            self.properties[_FAULTS_ENDPOINT] = "true"
            self.faults = FaultEndpointClient(f"http://{LOOPBACK}:{faults_port}")
        self.output = log_dir.with_suffix(".log")
        self._process: subprocess.Popen[bytes] | None = None
        # The process a SIGTERM was sent to (``terminate``), if any.
        self._terminated: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of this broker's client listener."""
        return f"{LOOPBACK}:{self.port}"

    def address(self, listener_name: str) -> str:
        """``host:port`` of this broker's listener named."""
        return f"{LOOPBACK}:{self.listener_ports[listener_name]}"

    @property
    def pid(self) -> int | None:
        """The process id while it runs."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        """Whether the process is alive (paused counts as alive)."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the broker process (it registers in ZooKeeper once listening)."""
        overrides = {
            **self.properties,
            "broker.id": str(self.broker_id),
            "listeners": ",".join(
                f"{name}://{LOOPBACK}:{port}" for name, port in self.listener_ports.items()
            ),
            "log.dirs": str(self.log_dir),
        }
        command = [sys.executable, "-m", "tickwheel.cli", "serve"]
        for name, value in overrides.items():
            command += ["--override", f"{name}={value}"]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.output.open("ab") as output:
            # Its own session: a Ctrl-C meant for the owner reaches it only through
            # ``stop``, in order (brokers first, ZooKeeper last).
            self._process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _signal(self, signum: signal.Signals) -> None:
        if self._process is None or self._process.poll() is not None:
            raise RuntimeError(f"broker {self.broker_id} is not running")
        self._process.send_signal(signum)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): it keeps its sockets but does nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused process run again (SIGCONT)."""
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """Kill the process at once (SIGKILL), as a crash would."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def restart(self) -> None:
        """Kill the process (SIGKILL) and start it again on the same port and logs."""
        self.kill()
        self.start()

    @property
    def stop_timeout_s(self) -> float:
        """How long a stop may take: its controlled shutdown's attempts, as its
        properties (or Kafka's defaults) bound them, plus ``_STOP_SLACK_S``."""
        properties = self.properties
        retries = int(properties.get("controlled.shutdown.max.retries", "3"))
        backoff_ms = int(properties.get("controlled.shutdown.retry.backoff.ms", "5000"))
        request_timeout_ms = int(properties.get("request.timeout.ms", "30000"))
        return retries * (backoff_ms + request_timeout_ms) / _MS_PER_S + _STOP_SLACK_S

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM; a paused one is resumed first), not waiting;
        once per process: a second SIGTERM would make it skip its orderly stop."""
        process = self._process
        if process is not None and process.poll() is None and process is not self._terminated:
            # A paused process must run to handle SIGTERM.
            process.send_signal(signal.SIGCONT)
            process.send_signal(signal.SIGTERM)
            self._terminated = process

    def stop(self, timeout_s: float | None = None) -> int | None:
        """Stop cleanly (SIGTERM; SIGKILL after ``timeout_s``, by default
        ``stop_timeout_s``); returns the exit status."""
        self.terminate()
        process, self._process = self._process, None
        if process is None:
            return None
        try:
            process.wait(self.stop_timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return process.returncode


class LocalCluster:
    """ZooKeeper plus ``num_brokers`` broker processes under ``base_dir``."""

    def __init__(
        self,
        base_dir: str | Path,
        num_brokers: int = 3,
        *,
        properties: Mapping[str, str] | None = None,
        zookeeper_port: int = 0,
        base_port: int = 0,
        chroot: str = "",
        zookeeper_tick_ms: int = DEFAULT_TICK_MS,
        listeners: Sequence[str] = ("PLAINTEXT",),
        faults: bool = False,
    ) -> None:
        """``listeners``: the names of each broker's listeners, the client one first;
        ``faults``: each broker serves its fault plan (``isolate`` needs it)."""
        if num_brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.base_dir = Path(base_dir)
        self.zookeeper = ZooKeeperServer(
            self.base_dir / "zookeeper", port=zookeeper_port, tick_ms=zookeeper_tick_ms
        )
        self.chroot = chroot
        common = {**(properties or {}), "zookeeper.connect": self.zookeeper_connect}
        self.brokers = [
            BrokerProcess(
                broker_id,
                base_port + broker_id if base_port else free_port(LOOPBACK),
                self.base_dir / f"broker-{broker_id}",
                common,
                client_listener=listeners[0],
                other_listeners={name: free_port(LOOPBACK) for name in listeners[1:]},
                faults_port=free_port(LOOPBACK) if faults else None,
            )
            for broker_id in range(num_brokers)
        ]
        self._zk: KazooClient | None = None
        # Per broker: the process (pid) and the ZooKeeper session of its last registration
        # seen, so that a restarted broker is not taken as registered while the session
        # of the process it replaced has yet to expire.
        self._registrations: dict[int, tuple[int | None, int]] = {}

    @property
    def zookeeper_connect(self) -> str:
        """``zookeeper.connect`` for this cluster's brokers, chroot included."""
        return self.zookeeper.connect + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port``, comma-separated."""
        return ",".join(b.bootstrap_servers for b in self.brokers)

    def start(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Self:
        """Start ZooKeeper, then every broker; wait until all have registered."""
        self.zookeeper.start()
        try:
            for broker in self.brokers:
                broker.start()
            for broker in self.brokers:
                self.wait_registered(broker.broker_id, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _faults(self, broker: BrokerProcess) -> FaultEndpointClient:
        if broker.faults is None:
            raise RuntimeError("the cluster was made without faults=True: no fault endpoints")
        return broker.faults

    def isolate(self, broker_id: int) -> None:
        """Cut broker ``broker_id`` off from the other brokers, both ways (fault rules
        closing every inter-broker channel's connections); ZooKeeper still sees it."""
        isolated = self.brokers[broker_id]
        for other in self.brokers:
            if other is isolated:
                continue
            for channel in INTER_BROKER_CHANNELS:
                for api in channel.apis:
                    self._faults(other).add(
                        api=api, kind="close", client_id=channel.client_id(broker_id)
                    )
                    self._faults(isolated).add(
                        api=api, kind="close", client_id=channel.client_id(other.broker_id)
                    )

    def heal(self) -> None:
        """Take every fault rule out of every running broker: isolation ends."""
        for broker in self.brokers:
            if broker.running:
                self._faults(broker).clear()

    def _client(self) -> KazooClient:
        if self._zk is None:
            # The chroot exists once a broker has started; until then read from the root.
            self._zk = KazooClient(hosts=self.zookeeper.connect)
            self._zk.start()
        return self._zk

    def _path(self, path: str) -> str:
        return self.chroot + path

    def is_registered(self, broker_id: int) -> bool:
        """Whether broker ``broker_id`` is registered in ZooKeeper now."""
        return self._client().exists(self._path(broker_path(broker_id))) is not None

    def _registered_by_current_process(self, broker_id: int) -> bool:
        stat = self._client().exists(self._path(broker_path(broker_id)))
        if stat is None:
            return False
        pid = self.brokers[broker_id].pid
        session = int(stat.ephemeralOwner)
        seen = self._registrations.get(broker_id)
        if seen is not None and seen[0] != pid and seen[1] == session:
            return False  # still the registration of the process this one replaced
        self._registrations[broker_id] = (pid, session)
        return True

    def wait_registered(self, broker_id: int, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Wait until broker ``broker_id``'s running process has registered.

        After a restart, the registration of the killed process lingers until its
        ZooKeeper session expires; it does not count.
        """
        broker = self.brokers[broker_id]
        deadline = time.monotonic() + timeout_s
        while not self._registered_by_current_process(broker_id):
            if not broker.running:
                raise RuntimeError(
                    f"broker {broker_id} exited before registering; see {broker.output}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {broker_id} did not register in {timeout_s} s")
            time.sleep(_POLL_INTERVAL_S)

    def read_znode(self, path: str) -> bytes | None:
        """The data of a znode (``path`` below the chroot), or None if it does not exist."""
        try:
            data: bytes = self._client().get(self._path(path))[0]
        except NoNodeError:  # never made, or deleted (a controller dying, say)
            return None
        return data

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        """A partition's ``LeaderAndIsr`` as ZooKeeper holds it now, or None."""
        path = self._path(partition_state_path(topic, partition))
        try:
            data, stat = self._client().get(path)
        except NoNodeError:
            return None
        return decode_partition_state(path, data, int(stat.version))

    def move_leader(
        self,
        topic: str,
        partition: int,
        to: int | None = None,
        timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> int:
        """Move the partition's leadership off its leader, to replica ``to`` if given;
        the new leader's id.

        To a replica: the controller reorders the partition's replicas, ``to`` first
        (AlterPartitionReassignments, the same replicas: nothing is copied), then elects
        the preferred leader (ElectLeaders), as ``kafka-reassign-partitions.sh`` and
        ``kafka-leader-election.sh`` would; ``to`` must be in the ISR. Without ``to``:
        the leader stops cleanly (its controlled shutdown hands each partition it leads
        to the next live in-sync replica, as Kafka's does), then starts again and
        registers; every partition it led moves with this one.
        """
        state = self.partition_state(topic, partition)
        if state is None or state.leader == NO_LEADER:
            raise RuntimeError(f"{topic}-{partition} has no leader to move")
        if to is not None:
            self._prefer(topic, partition, to, timeout_s)
            return to
        old = self.brokers[state.leader]
        old.stop()
        deadline = time.monotonic() + timeout_s
        while (moved := self.partition_state(topic, partition)) is None or moved.leader in (
            old.broker_id,
            NO_LEADER,
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition} found no new leader in {timeout_s} s")
            time.sleep(_POLL_INTERVAL_S)
        old.start()
        self.wait_registered(old.broker_id, timeout_s)
        return moved.leader

    def _prefer(self, topic: str, partition: int, to: int, timeout_s: float) -> None:
        """Make ``to`` the partition's preferred replica, then its leader."""
        data = self.read_znode(topic_path(topic))
        if data is None:
            raise RuntimeError(f"topic {topic} does not exist")
        replicas = decode_topic(topic, data).partitions[partition]
        if to not in replicas:
            raise ValueError(f"broker {to} is not a replica of {topic}-{partition}: {replicas}")
        reordered = [to, *(r for r in replicas if r != to)]
        controller = self.controller_id()
        if controller is None:
            raise RuntimeError("the cluster has no controller")
        broker = self.brokers[controller]
        client = BlockingClient(
            LOOPBACK, broker.port, client_id=_ADMIN_CLIENT_ID, timeout_s=timeout_s
        )
        try:
            moved = client.call(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                _REASSIGN_VERSION,
                {
                    "timeout": int(timeout_s * _MS_PER_S),
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [{"partition_index": partition, "replicas": reordered}],
                        }
                    ],
                },
            )
            _check(moved.error_code, "AlterPartitionReassignments")
            _check(moved.responses[0].partitions[0].error_code, "AlterPartitionReassignments")
            elected = client.call(
                ApiKey.ELECT_LEADERS,
                _ELECT_VERSION,
                {
                    "election_type": _PREFERRED_ELECTION,
                    "topic_partitions": [{"topic": topic, "partitions": [partition]}],
                    "timeout": int(timeout_s * _MS_PER_S),
                },
            )
        finally:
            client.close()
        _check(elected.error_code, "ElectLeaders")
        result = elected.replica_election_results[0].partition_result[0]
        if result.error_code != ErrorCode.election_not_needed:
            _check(result.error_code, "ElectLeaders")

    def controller_id(self) -> int | None:
        """The broker holding ``/controller`` now, or None."""
        data = self.read_znode(CONTROLLER_PATH)
        return None if data is None else decode_controller(data)

    def stop(self) -> None:
        """Stop every broker cleanly, all at once, then ZooKeeper; idempotent.

        Bounded whatever state the cluster is in (ZooKeeper gone first included): each
        broker is waited for its ``stop_timeout_s``, then killed.
        """
        client, self._zk = self._zk, None
        if client is not None:
            # On a thread of its own: with ZooKeeper gone, kazoo's close waits for its
            # connection attempt in progress.
            closer = threading.Thread(target=_close_client, args=(client,), daemon=True)
            closer.start()
            closer.join(_CLIENT_CLOSE_TIMEOUT_S)
        for broker in self.brokers:
            broker.terminate()
        for broker in self.brokers:
            broker.stop()
        self.zookeeper.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
