"""Suite-wide test configuration: hypothesis profiles, and nothing left running.

``ci`` (chosen when the CI environment variable is set) runs more examples with no
per-example deadline, since CI shares a noisy 2-core machine; ``dev`` is the quick
default. ``HYPOTHESIS_PROFILE`` overrides either.

When the session ends (every fixture torn down), no process the suite started may still
run: brokers, ZooKeeper and client processes are each stopped by the test or fixture
that started them. Spark's JVM is the one exception to that rule: pyspark keeps one
gateway JVM for the life of the process, shared by every SparkSession the suite makes
(the Spark tests' fixture, the documentation's Spark blocks), so it is stopped here,
once, before the check. A process left behind fails the run, named with its
command line, so a leak is found where it is made rather than as a slow CI or a port
still taken by the next run.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_JVM_STOP_TIMEOUT_S = 30.0

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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not Path("/proc").is_dir() or hasattr(session.config, "workerinput"):
        return
    _stop_spark_gateway()
    left = _children(os.getpid())
    if left:
        lines = "\n".join(f"  {pid}: {_command_line(pid)}" for pid in left)
        print(f"\nprocesses the suite started are still running:\n{lines}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
