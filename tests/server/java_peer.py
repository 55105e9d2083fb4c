"""Kafka's own Java client as a test peer: small programs under ``java/`` run against a
broker, print what the client saw as ``key=value`` lines, and the test asserts on them.

The client is built from source outside the repository (docs/testing.md); the
environment variable ``TICKWHEEL_JAVA_KAFKA`` names its ``out`` folder, whose
``runtime.classpath`` lists the jars. Without it (CI cannot build it) every test that
asks for the peer skips with a one-line reason. The programs are compiled once per test
session with ``javac``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

JAVA_KAFKA_ENV = "TICKWHEEL_JAVA_KAFKA"
PROGRAMS_DIR = Path(__file__).parent / "java"
_JAVAC_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class JavaPeer:
    """Compiled peer programs and the classpath that runs them."""

    classpath: str

    def run(self, program: str, *args: str, timeout_s: float = 120.0) -> dict[str, str]:
        """Run ``program`` with ``args``; its ``key=value`` lines as a dict. A program
        that exits non-zero fails the test with its stderr's tail."""
        done = subprocess.run(
            ["java", "-cp", self.classpath, program, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(
                f"{program} {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}"
            )
        return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def compile_peer(build_dir: Path) -> JavaPeer:
    """Compile every program under ``java/`` into ``build_dir``; skip the calling test
    when the Java client or a JDK is not there."""
    out = os.environ.get(JAVA_KAFKA_ENV)
    if not out:
        pytest.skip(
            f"{JAVA_KAFKA_ENV} is unset: Kafka's Java client is not built (docs/testing.md)"
        )
    classpath_file = Path(out) / "runtime.classpath"
    if not classpath_file.is_file():
        pytest.skip(f"{JAVA_KAFKA_ENV}={out} has no runtime.classpath (docs/testing.md)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK on PATH (javac and java)")
    classpath = classpath_file.read_text().strip()
    sources = sorted(str(path) for path in PROGRAMS_DIR.glob("*.java"))
    compiled = subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(build_dir), *sources],
        capture_output=True,
        text=True,
        timeout=_JAVAC_TIMEOUT_S,
        check=False,
    )
    if compiled.returncode != 0:
        pytest.fail(f"javac failed: {compiled.stderr[-3000:]}")
    return JavaPeer(classpath=f"{build_dir}{os.pathsep}{classpath}")
