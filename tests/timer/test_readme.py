"""The README's Timer example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_timer_example_runs() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Timer\n") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    exec(compile(match.group(1), "README.md#timer", "exec"), {"__name__": "readme_timer"})
