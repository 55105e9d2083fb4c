"""``tickwheel bench sasl``, bounded: every kind of connection logs in and is timed."""

from __future__ import annotations

import pytest

from tickwheel.bench import sasl

pytestmark = pytest.mark.integration


def test_the_sasl_command_times_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert sasl.main(["--connections", "5"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    kinds = [row.split("|")[1].strip() for row in rows[1:]]
    assert kinds == ["PLAINTEXT (ApiVersions)", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
