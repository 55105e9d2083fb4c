"""``tickwheel bench security``: bad arguments are refused, and a tiny run goes through
every figure's path against a real broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL."""

from __future__ import annotations

import pytest

from tickwheel.bench import security


@pytest.mark.parametrize(
    "argv",
    [
        ["--messages", "0"],
        ["--rounds", "0"],
        ["--connections", "0"],
        ["--value-bytes", "0"],
        ["--parts", "logins,speed"],
        ["--parts", ","],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        security.main(argv)
    assert exited.value.code == 2


@pytest.mark.integration
def test_a_tiny_run_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--messages", "300", "--rounds", "1", "--connections", "2", "--value-bytes", "100"]
    assert security.main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    kinds = [row.split("|")[1].strip() for row in rows]
    assert kinds == [
        "pass",
        "produce",
        "consume",
        "connection",
        "PLAINTEXT (ApiVersions)",
        "SASL_PLAINTEXT PLAIN",
        "SASL_PLAINTEXT SCRAM-SHA-256",
        "SASL_PLAINTEXT SCRAM-SHA-512",
        "SASL_SSL SCRAM-SHA-256",
        "SASL_SSL SCRAM-SHA-512",
    ]
