"""``tickwheel bench partitions``: a tiny run goes through every step against a real
``tickwheel serve``, and bad arguments are refused naming the option."""

from __future__ import annotations

import pytest

from tickwheel.bench import partitions


@pytest.mark.integration
def test_a_tiny_run_measures_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    code = partitions.main(["--counts", "50", "--idle-s", "0.2", "--skip-tansu", "--png", ""])
    out = capsys.readouterr().out
    assert code == 0
    assert "| figure | tickwheel 50 |" in out
    for label, _, _ in partitions._ROWS:
        (row,) = [line for line in out.splitlines() if line.startswith(f"| {label} |")]
        assert "—" not in row, row


@pytest.mark.parametrize("counts", ["many", "0", ""])
def test_bad_counts_are_refused_naming_the_option(
    counts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        partitions.main(["--counts", counts])
    assert exited.value.code == 2
    assert "--counts" in capsys.readouterr().err


def test_counts_beyond_the_descriptor_limit_are_skipped_with_the_reason() -> None:
    assert partitions._fits(10) is None
    why = partitions._fits(10**12)
    assert why is not None
    assert "hard limit" in why
