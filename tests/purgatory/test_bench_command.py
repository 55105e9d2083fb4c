"""``tickwheel bench purgatory`` runs end to end on a tiny workload (not a timed test)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tickwheel.bench import purgatory as bench


def test_both_modes_run_and_account_for_every_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "purgatory.json"
    argv = ["--num", "400", "--timeout", "20", "--pct50", "2", "--pct75", "6"]
    argv += ["--rate", "0", "--rate", "20000", "--repeat", "1", "--out", str(out)]
    assert bench.main(argv) == 0
    printed = capsys.readouterr().out
    assert "unthrottled" in printed
    assert "threaded" in printed
    assert "loop" in printed
    assert bench.KAFKA_ANCHOR_SKIPPED in printed
    results = json.loads(out.read_text())
    medians = results["medians"]
    assert [(m["mode"], m["requested_rate"]) for m in medians] == [
        ("threaded", 0.0),
        ("loop", 0.0),
        ("threaded", 20000.0),
        ("loop", 20000.0),
    ]
    for median in medians:
        # Every request whose drawn latency reaches the timeout expires; late
        # completions may add a few more, never fewer.
        assert median["expired_pct"] >= median["drawn_pct"]
        assert median["achieved_rate"] > 0
    assert math.isclose(
        medians[0]["predicted_pct"],
        100 * 0.5 * math.erfc(math.log(10) / (math.log(3) / bench.Z_75) / math.sqrt(2)),
    )


@pytest.mark.parametrize(
    "argv",
    [["--num", "0"], ["--keys", "5", "--key-space-size", "3"], ["--pct50", "9", "--pct75", "3"]],
)
def test_bad_arguments_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(argv) == 2
    assert "tickwheel bench purgatory:" in capsys.readouterr().err
