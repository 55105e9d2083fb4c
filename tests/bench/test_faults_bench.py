"""``tickwheel bench faults`` runs and prints its table (a few checks: not a measurement)."""

from __future__ import annotations

import pytest

from tickwheel.bench import faults


def test_the_bench_prints_each_layout(capsys: pytest.CaptureFixture[str]) -> None:
    assert faults.main(["--rules", "10", "--checks", "10", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for layout in ("no rule", "10 rules on another API", "other client ids", "other topics"):
        assert layout in out
    assert "target 2 µs" in out
