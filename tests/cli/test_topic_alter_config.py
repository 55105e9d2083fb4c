"""``tickwheel topic alter-config`` end to end: IncrementalAlterConfigs through
confluent-kafka's AdminClient, the table and ``--format json``, and the broker's
refusal as one line on stderr."""

from __future__ import annotations

import json

import pytest

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_alter_config_sets_deletes_and_appends(
    tickwheel_broker: BackgroundBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = ("-b", tickwheel_broker.bootstrap_servers)
    assert _cli(capsys, "topic", "create", "tuned", "-c", "retention.ms=1000", *bootstrap)[0] == 0
    status, out, _ = _cli(
        capsys,
        "topic",
        "alter-config",
        "tuned",
        "--set",
        "segment.ms=60000",
        "--delete",
        "retention.ms",
        "--append",
        "cleanup.policy=compact",
        *bootstrap,
    )
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "altered configs of topic tuned"
    assert lines[1].split() == ["NAME", "VALUE", "SOURCE"]
    assert lines[2].split() == ["segment.ms", "60000", "DYNAMIC_TOPIC_CONFIG"]
    assert lines[3].split() == ["retention.ms", "604800000", "DEFAULT_CONFIG"]
    assert lines[4].split() == ["cleanup.policy", "delete,compact", "DYNAMIC_TOPIC_CONFIG"]

    status, out, _ = _cli(
        capsys,
        "topic",
        "alter-config",
        "tuned",
        "--set",
        "segment.ms=1000",
        "--validate-only",
        "--format",
        "json",
        *bootstrap,
    )
    assert status == 0
    assert json.loads(out) == {
        "name": "tuned",
        "validate_only": True,
        "configs": [{"name": "segment.ms", "value": "60000", "source": "DYNAMIC_TOPIC_CONFIG"}],
    }


def test_alter_config_reports_the_brokers_refusal(
    tickwheel_broker: BackgroundBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = ("-b", tickwheel_broker.bootstrap_servers)
    assert _cli(capsys, "topic", "create", "strict", *bootstrap)[0] == 0
    status, out, err = _cli(
        capsys, "topic", "alter-config", "strict", "--set", "retention.ms=soon", *bootstrap
    )
    assert status == 1
    assert out == ""
    assert "Invalid value soon for configuration retention.ms" in err
    assert len(err.splitlines()) == 1
    status, _, err = _cli(capsys, "topic", "alter-config", "strict", *bootstrap)
    assert status == 1
    assert "nothing to change" in err
