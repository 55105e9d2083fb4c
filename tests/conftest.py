"""Suite-wide test configuration: hypothesis profiles, and nothing left running.

``ci`` (chosen when the CI environment variable is set) runs more examples with no
per-example deadline, since CI shares a noisy 2-core machine; ``dev`` is the quick
default. ``HYPOTHESIS_PROFILE`` overrides either.

When the session ends (every fixture torn down), nothing the suite started may still
run: no process (brokers, ZooKeeper, client processes), and no client or server inside
the test process -- a librdkafka client's native threads (confluent-kafka), a listening
socket (an in-process broker), a TCP connection (kafka-python, aiokafka, kazoo, a
broker's own). Each is stopped by the test or fixture that started it. Spark's JVM is
the one exception: pyspark keeps one gateway JVM for the life of the process, shared by
every SparkSession the suite makes (the Spark tests' fixture, the documentation's Spark
blocks), so it is stopped here, once, before the check. Anything left behind fails the
run, named (a process with its command line, a socket with its addresses), so a leak is
found where it is made rather than as a slow CI or a port still taken by the next run.

The suite runs in parallel workers (pytest-xdist, ``./run test`` asks for them with
``--dist loadgroup``). Tests wait on sockets, timeouts and child processes far more than
they compute, so workers overlap them; three kinds of test are kept together:

- the Spark tests that use the worker's own SparkSession (the ``spark`` fixture, the
  documentation's Spark blocks) share one worker (``xdist_group("spark")``): a worker's
  SparkSession is one JVM, started once, and two would only compete for the same two
  cores. Spark tests that run their pipelines in child processes of their own (the demo,
  the killed driver) are grouped by module like any other;
- the cluster tests (ZooKeeper and three brokers each) are split by module into
  ``CLUSTER_GROUPS`` groups, so at most that many clusters run at once and their
  session and lag timeouts are not starved of CPU;
- any other module's tests stay together, so its module-scoped fixtures start once.

Each worker checks itself and its children when its session ends and reports what it
found to the controller, which fails the run if any worker (or the controller itself)
left something. A socket left open is named with the test during which it was opened:
each test's sockets are listed (``/proc/self/fd``) around it, a few microseconds.
"""

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

_JVM_STOP_TIMEOUT_S = 30.0
_ROOT = Path(__file__).resolve().parents[1]
_IN_PROCESS_SPARK = frozenset({"spark", "block"})
"""Fixtures whose tests make a SparkSession in the worker: the Spark tests' session, and
the documentation's code blocks (those marked ``spark`` make one)."""
CLUSTER_GROUPS = 2
"""How many cluster tests may run at once, each in its own worker."""
_LEFT_KEY = "left_running"
# On the xdist controller: its workers' pids, and what they reported left running.
_WORKER_PIDS: set[int] = set()
_LEFT_BY_WORKERS: list[str] = []
# In each process: which test was running when a socket (by inode) was opened.
_OPENED_DURING: dict[str, str] = {}

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``, and theirs, from ``/proc``."""
    children = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
        except OSError:
            continue  # gone meanwhile
        if int(fields.get("PPid", "0")) == pid and not fields.get("State", "").startswith("Z"):
            child = int(status.parent.name)
            children += [child, *_children(child)]
    return children


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "(gone)"


def _stop_spark_gateway() -> None:
    """Stop pyspark's gateway JVM, if this process started one."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext  # noqa: PLC0415 - only when pyspark was used

    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.terminate()
        process.wait(_JVM_STOP_TIMEOUT_S)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    SparkContext._gateway = None
    SparkContext._jvm = None


def _module(item: pytest.Item) -> str:
    return item.path.relative_to(_ROOT).as_posix()


def _cluster_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each cluster test module's group: modules by test count, largest first, each to
    the group holding the fewest tests so far."""
    counts: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("cluster") is not None:
            counts[_module(item)] = counts.get(_module(item), 0) + 1
    load = [0] * CLUSTER_GROUPS
    groups = {}
    for module, count in sorted(counts.items(), key=lambda entry: (-entry[1], entry[0])):
        lightest = load.index(min(load))
        groups[module] = f"cluster-{lightest}"
        load[lightest] += count
    return groups


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each test in its xdist group: Spark, a cluster group, or its module."""
    cluster_groups = _cluster_groups(items)
    for item in items:
        if item.get_closest_marker("spark") is not None and _IN_PROCESS_SPARK.intersection(
            getattr(item, "fixturenames", ())
        ):
            group = "spark"
        else:
            group = cluster_groups.get(_module(item), _module(item))
        item.add_marker(pytest.mark.xdist_group(group))


def _left_running() -> list[str]:
    """This process's live descendants, each as "pid: command line"."""
    return [f"{pid}: {_command_line(pid)}" for pid in _children(os.getpid())]


def _librdkafka_threads() -> list[str]:
    """This process's librdkafka threads (named ``rdk:...``): a confluent-kafka client that
    was never closed, or is still referenced."""
    names = []
    for comm in Path("/proc/self/task").glob("*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue  # ended meanwhile
        if name.startswith("rdk:"):
            names.append(name)
    names.sort()
    return [f"librdkafka thread {name} (a confluent-kafka client still open)" for name in names]


def _address(hex_address: str) -> str:
    """``0100007F:1F90`` (``/proc/net/tcp``'s little-endian IPv4) as ``127.0.0.1:8080``;
    IPv6 addresses stay in hex."""
    host, port = hex_address.split(":")
    if len(host) == 8:
        host = ".".join(str(int(host[index : index + 2], 16)) for index in (6, 4, 2, 0))
    return f"{host}:{int(port, 16)}"


_TCP_LISTEN = "0A"
_TCP_CLOSE = "07"


def _socket_inodes() -> set[str]:
    """The inodes of this process's open sockets."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Remember which test opened each socket still open after it (setup to teardown)."""
    if not Path("/proc/self/fd").is_dir():
        return (yield)
    before = _socket_inodes()
    try:
        return (yield)
    finally:
        for inode in _socket_inodes() - before:
            _OPENED_DURING.setdefault(inode, item.nodeid)


def _open_tcp_sockets() -> list[str]:
    """This process's TCP sockets still open: listening (a server) or connected (a client,
    or a server's side of a connection), each with the test it was opened during."""
    inodes = _socket_inodes()
    sockets = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if inode not in inodes or state == _TCP_CLOSE:
                continue
            opened = f" (opened during {_OPENED_DURING.get(inode, 'no test')})"
            if state == _TCP_LISTEN:
                sockets.append(f"socket listening on {_address(local)}{opened}")
            else:
                sockets.append(f"socket {_address(local)} -> {_address(remote)}{opened}")
    return sockets


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the controller: keep what a finished worker reported left running."""
    output = getattr(node, "workeroutput", {})
    _WORKER_PIDS.add(output.get("pid", -1))
    _LEFT_BY_WORKERS.extend(output.get(_LEFT_KEY, []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not Path("/proc").is_dir():
        return
    _stop_spark_gateway()
    gc.collect()  # a client nothing references any more closes in its finaliser
    in_process = _librdkafka_threads() + _open_tcp_sockets()
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        worker_output["pid"] = os.getpid()
        worker_output[_LEFT_KEY] = [
            *_left_running(),
            *(f"{os.getpid()} (a test worker): {line}" for line in in_process),
        ]
        return
    workers = _worker_tree()
    processes = [line for line in _left_running() if int(line.split(":", 1)[0]) not in workers]
    left = _LEFT_BY_WORKERS + processes + in_process
    if left:
        lines = "\n".join(f"  {line}" for line in left)
        print(f"\nwhat the suite started is still running:\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _worker_tree() -> set[int]:
    """The xdist workers and their descendants (each worker checks its own)."""
    return {pid for worker in _WORKER_PIDS for pid in (worker, *_children(worker))}
