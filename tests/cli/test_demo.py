"""``tickwheel demo`` end to end, small, in its own process (it starts and stops its own
broker and SparkSession, which must not be the test run's shared session)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

DEMO_TIMEOUT_S = 240


def run_demo(*extra: str) -> str:
    """Run ``tickwheel demo`` on a small clickstream; returns its output."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwheel.cli",
            "demo",
            "--page-views",
            "6000",
            "--minutes",
            "8",
            "--batch-records",
            "2000",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_demo_runs_the_pipeline_and_checks_its_counts() -> None:
    out = run_demo()

    assert "[6/6] read pageview-counts back" in out
    # 8 minutes of events, the last ~3 still within the watermark: 5 closed minutes of
    # 12 pages, every one matching the producer's tally.
    assert "checked: 60 of 60 windows written match the producer's tally" in out
    assert "no window repeated" in out
    assert "Fetch" in out
    assert "total" in out


def test_demo_exactly_once_mirrors_every_page_view_once() -> None:
    out = run_demo("--exactly-once")

    assert "sink exactlyOnce=true" in out
    assert "checked: 60 of 60 windows written match the producer's tally" in out
    assert "no window repeated" in out
    assert "[7/7] compare pageviews-mirror with pageviews" in out
    assert "6,000 records in pageviews-mirror (read_committed), 6,000 produced: 0 missing" in out
