"""Kafka's own Java SystemTimer, built from Kafka's source at bench time, as a peer.

``tickwheel bench timer`` runs Apache Kafka's timer beside tickwheel's as its
anchor. No Kafka jar is needed (nor downloaded): the bench copies Kafka's source files
of the timer, unmodified, out of a checkout or git directory of apache/kafka, compiles
them with ``javac`` into a temporary directory together with a driver written for this
bench (``java/TimerBench.java``), and runs that driver in one long-lived JVM that answers
one workload per command, so the Java peer takes its turn with the Python peers in every
repetition.

What is compiled:

- Kafka's, unmodified, from ``server-common/.../server/util/timer/``: ``SystemTimer``,
  ``TimingWheel``, ``TimerTaskList``, ``TimerTaskEntry``, ``TimerTask``, ``Timer``
  (``SystemTimerReaper`` is left out: the driver advances the clock itself, and it would
  need ``ShutdownableThread``).
- Kafka's, unmodified, from ``clients/.../common/utils/``: ``Time``, ``Timer`` (which
  ``Time`` names), ``KafkaThread`` and ``ThreadUtils`` (they need only slf4j-api, taken
  from the system: Debian's ``libslf4j-java``).
- One shim of tickwheel's own, ``java/shim/SystemTime.java``, in place of Kafka's
  ``SystemTime`` (whose ``sleep`` calls ``Utils``, which pulls in most of the clients
  module): a simulated clock behind ``Time.SYSTEM``. Kafka's ``SystemTimer`` takes no
  ``Time``; it and its bucket lists read ``Time.SYSTEM``, so this is where the bench's
  simulated clock goes, as every Python peer has one.

Which source: a git directory (bare or a checkout's) is read at a pinned commit,
``KAFKA_PINNED_REV`` unless told otherwise, never from its working tree, so that two
runs build the same classes; a plain source tree (no git) is read as it is and its
commit recorded as unknown. The commit built goes into the bench's output.

The inputs are the Python bench's own pre-drawn numbers, written once to a file of
little-endian 32-bit integers (``write_inputs``) that the driver reads at start, so both
languages run on identical inputs. The JVM starts with Kafka's broker options
(``JVM_OPTIONS``) and runs ``WARMUP_ROUNDS`` of every workload before its first answer
(JIT compilation), and each answer is measured on a fresh ``SystemTimer``.

Anything missing (no source, no ``javac``/``java``, no slf4j-api, a failed compile) raises
``JavaUnavailableError`` with a one-line reason, which the bench prints as its skip message.

Concurrency: a ``JavaTimerDriver`` is used by one thread; commands are answered one at a
time (the JVM's own threads, Kafka's executor among them, are its business).
"""

from __future__ import annotations

import array
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

KAFKA_PINNED_REV = "1eb7644349cb07139d6a3c1ad1986979647cac99"
"""apache/kafka trunk of 2024-10-25: the commit of the recorded figures (docs/benchmarks.md)."""

KAFKA_SOURCE_ENV = "TICKWHEEL_KAFKA_SOURCE"
"""The environment's default for ``--kafka-source``."""

_TIMER_DIR = "server-common/src/main/java/org/apache/kafka/server/util/timer"
_UTILS_DIR = "clients/src/main/java/org/apache/kafka/common/utils"
KAFKA_FILES = (
    *(
        f"{_TIMER_DIR}/{name}.java"
        for name in (
            "SystemTimer",
            "TimingWheel",
            "TimerTaskList",
            "TimerTaskEntry",
            "TimerTask",
            "Timer",
        )
    ),
    *(f"{_UTILS_DIR}/{name}.java" for name in ("Time", "Timer", "KafkaThread", "ThreadUtils")),
)
"""Kafka's files compiled unmodified, as paths in its repository."""

JAVA_DIR = Path(__file__).parent / "java"
DRIVER_SOURCE = JAVA_DIR / "TimerBench.java"
SHIM_SOURCES = (JAVA_DIR / "shim" / "SystemTime.java",)
DRIVER_CLASS = "tickwheel.bench.TimerBench"

SLF4J_API_JAR = Path("/usr/share/java/slf4j-api.jar")
SLF4J_NOP_JAR = Path("/usr/share/java/slf4j-nop.jar")
"""slf4j-api for KafkaThread and ThreadUtils; the no-op binding (if present) silences
slf4j's warning that it has none."""

JVM_OPTIONS = (
    "-Xms1G",
    "-Xmx1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:MaxInlineLevel=15",
)
"""Kafka's broker JVM (bin/kafka-server-start.sh, bin/kafka-run-class.sh) but for
``-XX:+ExplicitGCInvokesConcurrent``: the driver's ``System.gc()`` before a run, and
around the (d) reading, must be a full collection, as the Python bench's ``gc.collect()``."""

WARMUP_ROUNDS = 2
"""Rounds of (a), (b), (c) the JVM runs before its first measured answer."""

_COMPILE_TIMEOUT_S = 300.0


class JavaUnavailableError(Exception):
    """Why Kafka's Java timer cannot run here: the bench prints it and goes on without."""


@dataclass(frozen=True, kw_only=True, slots=True)
class KafkaTimerBuild:
    """Kafka's timer compiled with the driver: what to run, and what it was built from."""

    java: str
    classpath: str
    source: str
    commit: str
    java_version: str

    def describe(self) -> str:
        """One line for the bench's output."""
        return (
            f"Kafka SystemTimer (Java): apache/kafka {self.commit} from {self.source}, "
            f"{self.java_version}; Kafka's Time, KafkaThread, ThreadUtils and timer classes "
            f"unmodified, tickwheel's SystemTime shim (a simulated clock)"
        )


def resolve_source(option: str | None) -> str | None:
    """The Kafka source to build: the option, else the environment's, else None."""
    return option or os.environ.get(KAFKA_SOURCE_ENV) or None


def _tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailableError(
            f"no {name} on PATH (nor in JAVA_HOME): install a JDK, 17 or later"
        )
    return found


def _git(repository: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repository), *args], capture_output=True, text=True, check=False
    )


def copy_sources(source: Path, rev: str, into: Path) -> str:
    """Write KAFKA_FILES under ``into``; returns the commit they were read at."""
    if not source.exists():
        raise JavaUnavailableError(f"no Kafka source at {source}")
    is_git = (
        shutil.which("git") is not None and _git(source, "rev-parse", "--git-dir").returncode == 0
    )
    if is_git:
        resolved = _git(source, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if resolved.returncode != 0:
            raise JavaUnavailableError(
                f"{source} has no commit {rev} (fetch it, or choose one with --kafka-rev)"
            )
        commit = resolved.stdout.strip()
    else:
        commit = "unknown (a source tree without git)"
    for path in KAFKA_FILES:
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if is_git:
            shown = _git(source, "show", f"{commit}:{path}")
            if shown.returncode != 0:
                raise JavaUnavailableError(f"apache/kafka {commit} has no {path}")
            target.write_text(shown.stdout)
        else:
            if not (source / path).is_file():
                raise JavaUnavailableError(f"{source} is not a Kafka source tree: no {path}")
            shutil.copyfile(source / path, target)
    return commit


def build(source: Path, rev: str, work_dir: Path) -> KafkaTimerBuild:
    """Compile Kafka's timer at ``rev`` (if ``source`` is a git directory) with the driver.

    Raises JavaUnavailableError with the reason when anything needed is missing.
    """
    javac = _tool("javac")
    java = _tool("java")
    if not SLF4J_API_JAR.is_file():
        raise JavaUnavailableError(f"no {SLF4J_API_JAR} (Debian: apt-get install libslf4j-java)")
    sources_dir = work_dir / "kafka-src"
    classes_dir = work_dir / "classes"
    commit = copy_sources(source, rev, sources_dir)
    files = [sources_dir / path for path in KAFKA_FILES] + [*SHIM_SOURCES, DRIVER_SOURCE]
    options = ["-nowarn", "-encoding", "UTF-8", "-d", str(classes_dir), "-cp", str(SLF4J_API_JAR)]
    compiled = subprocess.run(
        [javac, *options, *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=_COMPILE_TIMEOUT_S,
    )
    if compiled.returncode != 0:
        first_error = next(
            (line for line in compiled.stderr.splitlines() if "error" in line), "javac failed"
        )
        raise JavaUnavailableError(f"javac could not build Kafka's timer: {first_error}")
    jars = [SLF4J_API_JAR, *([SLF4J_NOP_JAR] if SLF4J_NOP_JAR.is_file() else [])]
    version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    version_lines = version.stderr.splitlines()
    return KafkaTimerBuild(
        java=java,
        classpath=os.pathsep.join([str(classes_dir), *map(str, jars)]),
        source=str(source),
        commit=commit,
        java_version=version_lines[0] if version_lines else "java (version unknown)",
    )


def write_inputs(
    path: Path,
    *,
    delays_ms: Sequence[int],
    cancel_order: Sequence[int],
    pending_delays_ms: Sequence[int],
    churn_slots: Sequence[int],
    churn_delays_ms: Sequence[int],
) -> None:
    """The driver's inputs file: three counts, then the five arrays (little-endian int32)."""
    values = array.array("i", [len(delays_ms), len(pending_delays_ms), len(churn_slots)])
    for part in (delays_ms, cancel_order, pending_delays_ms, churn_slots, churn_delays_ms):
        values.extend(part)
    if sys.byteorder != "little":
        values.byteswap()
    path.write_bytes(values.tobytes())


class JavaTimerDriver:
    """The driver's JVM: started on an inputs file, asked for one workload at a time."""

    def __init__(self, kafka: KafkaTimerBuild, inputs_path: Path) -> None:
        """Start the JVM; returns once its warm-up rounds are done."""
        self._process = subprocess.Popen(
            [
                kafka.java,
                *JVM_OPTIONS,
                "-cp",
                kafka.classpath,
                DRIVER_CLASS,
                str(inputs_path),
                str(WARMUP_ROUNDS),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self._read_line()
        if ready != "ready":
            self.close()
            raise JavaUnavailableError(f"the Java driver did not start: {ready!r}")

    def _read_line(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline().strip()

    def run(self, workload: str) -> list[float]:
        """The figures of one run of ``workload`` ("a", "b", "c" or "d")."""
        assert self._process.stdin is not None
        self._process.stdin.write(workload + "\n")
        self._process.stdin.flush()
        reply = self._read_line()
        status, _, figures = reply.partition(" ")
        if status != "ok":
            raise RuntimeError(f"Kafka's Java timer, workload {workload}: {reply or 'no reply'}")
        return [float(figure) for figure in figures.split()]

    def close(self) -> None:
        """Ask the JVM to quit and wait for it."""
        stdin = self._process.stdin
        if stdin is not None and not stdin.closed:
            try:
                stdin.write("quit\n")
                stdin.close()
            except BrokenPipeError:
                pass
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
