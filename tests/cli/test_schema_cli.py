"""``tickwheel schema`` against the registry a broker serves: register, get, list, check,
delete, and refusals as one line with the registry's error code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickwheel.cli import main
from tickwheel.server import BackgroundBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"schema.registry.listeners": "http://127.0.0.1:0"}


@pytest.fixture
def url(tickwheel_broker: BackgroundBroker) -> str:
    return f"http://127.0.0.1:{tickwheel_broker.schema_registry_ports[0]}"


def schema_file(tmp_path: Path, name: str, *fields: dict[str, object]) -> str:
    path = tmp_path / f"{name}.avsc"
    record = {
        "type": "record",
        "name": "User",
        "fields": [{"name": "name", "type": "string"}, *fields],
    }
    path.write_text(json.dumps(record))
    return str(path)


def schema(url: str, *args: str) -> int:
    return main(["schema", "--url", url, "--format", "json", *args])


def test_register_get_list_check_delete(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = schema_file(tmp_path, "v1")
    v2 = schema_file(tmp_path, "v2", {"name": "age", "type": "int", "default": 0})
    bad = schema_file(tmp_path, "bad", {"name": "email", "type": "string"})
    assert schema(url, "register", "users-value", v1) == 0
    assert json.loads(capsys.readouterr().out) == {"id": 1}
    assert schema(url, "check", "users-value", v2) == 0
    assert json.loads(capsys.readouterr().out)["is_compatible"] is True
    assert schema(url, "check", "users-value", bad) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["is_compatible"] is False
    assert any("email" in message for message in answer["messages"])
    assert schema(url, "register", "users-value", v2) == 0
    capsys.readouterr()
    assert schema(url, "list") == 0
    assert json.loads(capsys.readouterr().out) == ["users-value"]
    assert schema(url, "list", "users-value") == 0
    assert json.loads(capsys.readouterr().out) == [1, 2]
    assert schema(url, "get", "users-value") == 0
    assert json.loads(capsys.readouterr().out)["version"] == 2
    assert main(["schema", "--url", url, "get", "--id", "1"]) == 0
    assert '"name":"name"' in capsys.readouterr().out
    assert schema(url, "delete", "users-value") == 0
    assert json.loads(capsys.readouterr().out) == [1, 2]
    assert schema(url, "delete", "users-value", "--permanent") == 0
    capsys.readouterr()
    assert schema(url, "list", "--deleted") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_refusals_are_one_line_with_the_error_code(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert schema(url, "get", "nobody") == 1
    assert capsys.readouterr().err.strip() == (
        "tickwheel schema: error 40401: Subject 'nobody' not found."
    )
    broken = tmp_path / "broken.avsc"
    broken.write_text('{"type": "record"')
    assert schema(url, "register", "s", str(broken)) == 1
    assert "error 42201: Invalid schema" in capsys.readouterr().err
    assert schema(url, "register", "s", str(tmp_path / "missing.avsc")) == 1
    assert "cannot read the schema file" in capsys.readouterr().err


def test_no_registry_answering_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert schema("http://127.0.0.1:9", "list") == 1
    assert "no schema registry answered at http://127.0.0.1:9" in capsys.readouterr().err
