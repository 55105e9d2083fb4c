"""``tickwheel feature describe|upgrade|downgrade|disable`` against a broker, in-process."""

from __future__ import annotations

import json

import pytest

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration


def run(
    capsys: pytest.CaptureFixture[str], broker: BackgroundBroker, *argv: str
) -> tuple[int, str, str]:
    status = main(["feature", *argv, "-b", broker.bootstrap_servers])
    out, err = capsys.readouterr()
    return status, out, err


def levels(capsys: pytest.CaptureFixture[str], broker: BackgroundBroker) -> dict[str, object]:
    status, out, _ = run(capsys, broker, "describe", "--format", "json")
    assert status == 0
    return {row["feature"]: (row["finalized_level"], row["epoch"]) for row in json.loads(out)}


def test_describe_then_change_the_levels(
    capsys: pytest.CaptureFixture[str], tickwheel_broker: BackgroundBroker
) -> None:
    status, out, _ = run(capsys, tickwheel_broker, "describe")
    assert status == 0
    assert out.splitlines() == [
        "FEATURE                           SUPPORTED-MIN  SUPPORTED-MAX  FINALIZED-LEVEL  EPOCH",
        "eligible.leader.replicas.version  0              1              1                0",
        "group.version                     0              1              1                0",
        "share.version                     0              1              1                0",
        "transaction.version               0              2              2                0",
    ]
    dry = run(capsys, tickwheel_broker, "disable", "--feature", "share.version", "--dry-run")
    assert dry == (0, "share.version can be downgraded to 0.\n", "")
    assert levels(capsys, tickwheel_broker)["share.version"] == (1, 0)
    done = run(capsys, tickwheel_broker, "downgrade", "--feature", "share.version=0", "--unsafe")
    assert done == (0, "share.version was downgraded to 0.\n", "")
    assert levels(capsys, tickwheel_broker)["share.version"] == (0, 1)
    up = run(capsys, tickwheel_broker, "upgrade", "--feature", "share.version=1")
    assert up == (0, "share.version was upgraded to 1.\n", "")
    assert levels(capsys, tickwheel_broker)["share.version"] == (1, 2)


def test_a_refused_or_malformed_update_is_one_line(
    capsys: pytest.CaptureFixture[str], tickwheel_broker: BackgroundBroker
) -> None:
    status, out, err = run(
        capsys, tickwheel_broker, "upgrade", "--feature", "transaction.version=3"
    )
    assert (status, out) == (1, "")
    assert err == (
        "tickwheel feature upgrade: INVALID_UPDATE_VERSION: The update failed for all "
        "features since the following feature had an error: Invalid update version 3 for "
        "feature transaction.version. Broker 0 only supports versions 0-2\n"
    )
    status, _, err = run(capsys, tickwheel_broker, "upgrade", "--feature", "group.version=x")
    assert (status, err) == (
        1,
        "tickwheel feature upgrade: --feature: the level is not a number: 'x'\n",
    )
    with pytest.raises(SystemExit) as usage:
        main(["feature", "upgrade", "--feature", "group.version"])
    assert usage.value.code == 2
