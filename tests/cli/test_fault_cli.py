"""``tickwheel fault add|list|remove|clear`` against a broker's fault endpoint, in-process."""

from __future__ import annotations

import json

import pytest

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"tickwheel.metrics.port": "0", "tickwheel.faults.endpoint.enable": "true"}


def run(
    capsys: pytest.CaptureFixture[str], broker: BackgroundBroker, *argv: str
) -> tuple[int, str, str]:
    command, *rest = argv
    url = f"http://127.0.0.1:{broker.metrics_port}"
    status = main(["fault", command, "--url", url, "--format", "json", *rest])
    out, err = capsys.readouterr()
    return status, out, err


def test_add_list_remove_and_clear(
    capsys: pytest.CaptureFixture[str], tickwheel_broker: BackgroundBroker
) -> None:
    status, out, _ = run(
        capsys, tickwheel_broker, "add", "--api", "Produce", "--error", "6", "--topic", "t"
    )
    assert status == 0
    added = json.loads(out)
    assert added["rule"] == "Produce error NOT_LEADER_OR_FOLLOWER (topic=t)"
    run(capsys, tickwheel_broker, "add", "--api", "Fetch", "--kind", "delay", "--delay-ms", "50")
    status, out, _ = run(capsys, tickwheel_broker, "list")
    assert [rule["rule"] for rule in json.loads(out)] == [
        "Produce error NOT_LEADER_OR_FOLLOWER (topic=t)",
        "Fetch delay 50 ms",
    ]
    assert run(capsys, tickwheel_broker, "remove", str(added["id"]))[0] == 0
    assert [handle.rule.describe() for handle in tickwheel_broker.faults.handles] == [
        "Fetch delay 50 ms"
    ]
    assert run(capsys, tickwheel_broker, "clear")[0] == 0
    assert not tickwheel_broker.faults.armed


def test_a_refused_rule_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tickwheel_broker: BackgroundBroker
) -> None:
    status, out, err = run(capsys, tickwheel_broker, "add", "--api", "Produse", "--error", "6")
    assert (status, out) == (1, "")
    assert err == (
        "tickwheel fault add: 400: field 'api': unknown API 'Produse' "
        "(e.g. 'Produce', 'Fetch', 0)\n"
    )
    status, _, err = run(capsys, tickwheel_broker, "remove", "99")
    assert (status, err) == (1, "tickwheel fault remove: 404: no fault rule 99\n")


def test_no_endpoint_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["fault", "list", "--url", "http://127.0.0.1:1"])
    _, err = capsys.readouterr()
    assert status == 1
    assert err.startswith("tickwheel fault list: no fault endpoint answered at http://127.0.0.1:1")
