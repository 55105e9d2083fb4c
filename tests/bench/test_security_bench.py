"""``tickwheel bench security``: bad arguments are refused, and a tiny run goes through
every figure's code path against a real SASL_SSL broker."""

from __future__ import annotations

import pytest

from tickwheel.bench import security


@pytest.mark.parametrize(
    "argv", [["--messages", "0"], ["--rounds", "0"], ["--connections", "0"], ["--value-bytes", "0"]]
)
def test_counts_below_one_are_refused(argv: list[str]) -> None:
    assert security.main(argv) == 2


@pytest.mark.integration
def test_a_tiny_run_reports_both_listeners(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--messages", "300", "--rounds", "1", "--connections", "1", "--value-bytes", "100"]
    assert security.main(argv) == 0
    out = capsys.readouterr().out
    for row in ("produce", "consume", "PLAINTEXT", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert row in out
