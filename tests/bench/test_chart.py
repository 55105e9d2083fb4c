"""``--png``: the shared chart helper draws both panel kinds, and every benchmark has it."""

from __future__ import annotations

import contextlib
import importlib
import io
from pathlib import Path

import pytest

from tickwheel.bench._chart import Bars, Lines, Panel, save_png
from tickwheel.cli._bench import _benchmarks

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_bars_and_lines_make_one_png(tmp_path: Path) -> None:
    path = tmp_path / "charts" / "figures.png"
    panels: list[Panel] = [
        Bars(
            title="latency",
            unit="ms",
            values={"tickwheel": {"p50": 1.1, "p99": 4.7}, "tansu": {"p50": 122.0}},
            log_scale=True,
            target=15.0,
        ),
        Lines(
            title="against rate",
            x_label="messages/s",
            unit="ms",
            points={"RF 3": [(1000, 3.0), (250, 2.0)], "RF 1": []},
        ),
    ]
    assert save_png(path, "title", panels)
    assert path.read_bytes().startswith(PNG_SIGNATURE)


def test_no_path_draws_nothing(tmp_path: Path) -> None:
    assert not save_png(None, "title", [])
    assert not save_png("", "title", [])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", _benchmarks())
def test_every_benchmark_takes_png(name: str) -> None:
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit) as exited:
        importlib.import_module(f"tickwheel.bench.{name}").main(["--help"])
    assert exited.value.code == 0
    assert "--png PATH" in help_text.getvalue()
