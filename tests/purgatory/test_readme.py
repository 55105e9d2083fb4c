"""The README's Purgatory examples run and print what they say they print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _purgatory_examples() -> list[str]:
    text = README.read_text()
    section = text[text.index("\n## Purgatory\n") :]
    next_section = section.find("\n## ", 1)
    if next_section != -1:
        section = section[:next_section]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


def test_there_are_two_examples() -> None:
    assert len(_purgatory_examples()) == 2


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, "hello\ntimed out\nNone 1\n"), (1, "hello\nNone\n")],
)
def test_example_runs(index: int, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = compile(_purgatory_examples()[index], f"README.md example {index}", "exec")
    exec(code, {"__name__": "__readme__"})
    assert capsys.readouterr().out == expected
