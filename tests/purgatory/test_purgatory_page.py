"""The Purgatory page's examples (docs/purgatory.md) run and print what they say they
print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PURGATORY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "purgatory.md"


def _purgatory_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PURGATORY_PAGE.read_text(), re.DOTALL)


def test_there_are_two_examples() -> None:
    assert len(_purgatory_examples()) == 2


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, "hello\ntimed out\nNone 1\n"), (1, "hello\nNone\n")],
)
def test_example_runs(index: int, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = compile(_purgatory_examples()[index], f"docs/purgatory.md example {index}", "exec")
    exec(code, {"__name__": "__purgatory_page__"})
    assert capsys.readouterr().out == expected
