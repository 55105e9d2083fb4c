"""``tickwheel bench timer``'s Java anchor: Kafka's SystemTimer built from Kafka's source.

Without a Kafka source the bench says in one line how to give one and runs the Python
peers; a source that is not Kafka's, or lacks the pinned commit, is refused with the
reason. With a JDK and a Kafka git directory (this machine's mirror, or
``TICKWHEEL_KAFKA_SOURCE``), a tiny run builds Kafka's classes at the pinned commit and
gets figures from the JVM (slow: javac and a JVM start).
"""

from __future__ import annotations

import array
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tickwheel.bench import _java_timer as java_timer
from tickwheel.bench import timer as bench

TINY = ["--n", "2000", "--pending", "200", "--iterations", "2000", "--repeat", "1"]
MIRROR = Path("/work/.mirror/apache+kafka/repo")
"""Where this project's machine keeps a bare git mirror of apache/kafka."""


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """Run the bench on tiny inputs with SystemTimer and the Java peer; code and JSON."""
    out = tmp_path / "timer.json"
    argv = [*TINY, "--skip-buckets", "--png", "", "--out", str(out)]
    argv += ["--peers", f"{bench.SYSTEM_TIMER},{bench.KAFKA_JAVA}", *extra]
    code = bench.main(argv)
    results = json.loads(out.read_text()) if out.exists() else {}
    return code, results


def test_without_a_kafka_source_the_java_peer_is_skipped_with_the_option_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(java_timer.KAFKA_SOURCE_ENV, raising=False)
    code, results = _run(tmp_path)
    assert code == 0
    printed = capsys.readouterr().out
    skipped = [line for line in printed.splitlines() if line.startswith(bench.KAFKA_JAVA)]
    assert len(skipped) == 1
    assert "skipped" in skipped[0]
    assert "--kafka-source" in skipped[0]
    assert java_timer.KAFKA_SOURCE_ENV in skipped[0]
    assert list(results["medians"]) == [bench.SYSTEM_TIMER]
    assert "skipped" in results["kafka_java"]


def test_a_missing_source_path_is_a_skip_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK: the skip names javac before it looks at the source")
    missing = tmp_path / "no-kafka-here"
    code, results = _run(tmp_path, "--kafka-source", str(missing))
    assert code == 0
    assert f"skipped, no Kafka source at {missing}" in capsys.readouterr().out
    assert list(results["medians"]) == [bench.SYSTEM_TIMER]


def test_a_tree_without_the_timer_sources_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "not-kafka"
    tree.mkdir()
    with pytest.raises(java_timer.JavaUnavailableError, match="not a Kafka source tree"):
        java_timer.copy_sources(tree, java_timer.KAFKA_PINNED_REV, tmp_path / "into")


def test_a_plain_tree_is_copied_as_it_is_with_an_unknown_commit(tmp_path: Path) -> None:
    tree = tmp_path / "kafka"
    for path in java_timer.KAFKA_FILES:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(f"// {path}\n")
    into = tmp_path / "into"
    commit = java_timer.copy_sources(tree, java_timer.KAFKA_PINNED_REV, into)
    assert commit.startswith("unknown")
    for path in java_timer.KAFKA_FILES:
        assert (into / path).read_text() == f"// {path}\n"


def test_a_git_directory_without_the_pinned_commit_is_refused(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("no git")
    repository = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repository)], check=True)
    with pytest.raises(java_timer.JavaUnavailableError, match="--kafka-rev"):
        java_timer.copy_sources(repository, java_timer.KAFKA_PINNED_REV, tmp_path / "into")


def test_inputs_file_holds_the_counts_then_the_five_arrays(tmp_path: Path) -> None:
    inputs = bench.Inputs.draw(5, 3, 4, seed=7)
    path = tmp_path / "inputs.bin"
    java_timer.write_inputs(
        path,
        delays_ms=inputs.delays_ms,
        cancel_order=inputs.cancel_order,
        pending_delays_ms=inputs.pending_delays_ms,
        churn_slots=inputs.churn_slots,
        churn_delays_ms=inputs.churn_delays_ms,
    )
    values = array.array("i")
    values.frombytes(path.read_bytes())
    assert values.tolist() == [
        5,
        3,
        4,
        *inputs.delays_ms,
        *inputs.cancel_order,
        *inputs.pending_delays_ms,
        *inputs.churn_slots,
        *inputs.churn_delays_ms,
    ]


def _kafka_source() -> Path:
    for tool in ("javac", "java", "git"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on PATH")
    if not java_timer.SLF4J_API_JAR.is_file():
        pytest.skip(f"no {java_timer.SLF4J_API_JAR} (apt-get install libslf4j-java)")
    source = java_timer.resolve_source(None)
    path = Path(source) if source is not None else MIRROR
    if not path.exists():
        pytest.skip(f"no Kafka source: set {java_timer.KAFKA_SOURCE_ENV} (looked in {MIRROR})")
    return path


@pytest.mark.slow
def test_kafkas_timer_is_built_at_the_pin_and_runs_every_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _kafka_source()
    code, results = _run(tmp_path, "--kafka-source", str(source))
    assert code == 0
    printed = capsys.readouterr().out
    assert f"{bench.KAFKA_JAVA}: apache/kafka {java_timer.KAFKA_PINNED_REV}" in printed
    assert "within 1.5x of Kafka's Java" in printed
    record = results["kafka_java"]
    assert record["commit"] == java_timer.KAFKA_PINNED_REV
    java = results["medians"][bench.KAFKA_JAVA]
    for metric in bench.METRICS:
        assert java[metric] > 0, metric
