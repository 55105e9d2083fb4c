"""docs/apis.md's table of Kafka APIs is the broker's own list: every key, its versions."""

from __future__ import annotations

import re
from pathlib import Path

from tickwheel.protocol import ApiKey
from tickwheel.server.apis import ADVERTISED_VERSIONS, API_SPECS, SUPPORTED_VERSIONS

_PAGE = Path(__file__).resolve().parents[2] / "docs" / "apis.md"
_ROW = re.compile(r"^\| (\d+) \| ([A-Za-z_]+) \| (.+) \|$")


def _rows() -> dict[int, tuple[str, str]]:
    rows = {}
    for line in _PAGE.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match:
            rows[int(match[1])] = (match[2], match[3])
    return rows


def test_every_api_key_has_one_row() -> None:
    assert sorted(_rows()) == sorted(int(key) for key in ApiKey)


def test_a_served_api_shows_its_name_and_the_versions_it_serves() -> None:
    rows = _rows()
    for spec in API_SPECS:
        name, versions = rows[spec.api_key]
        assert name == spec.name
        served = f"{spec.versions.min_version}-{spec.versions.max_version}"
        assert versions.split(" ")[0] == served, spec.name
        listed = ADVERTISED_VERSIONS[spec.api_key]
        if listed != spec.versions:
            assert f"listed from {listed.min_version}" in versions, spec.name


def test_a_key_not_served_says_so_and_why() -> None:
    for key, (_, versions) in _rows().items():
        if key not in SUPPORTED_VERSIONS:
            assert re.fullmatch(r"not served(: .+| yet)", versions), (key, versions)
