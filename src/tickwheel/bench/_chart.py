"""Benchmark figures as a PNG chart: the ``--png PATH`` option of every ``tickwheel bench``.

A benchmark describes what it measured as panels and hands them to ``save_png``; only
this module knows matplotlib. Two kinds of panel cover every benchmark here:

- ``Bars``: one value per category per series, the series side by side in each
  category (tickwheel beside its peer; RF 3 beside RF 1), with an optional dashed
  target line;
- ``Lines``: values against an x axis per series (a figure against a rate).

matplotlib is the optional ``bench`` extra and is imported only when a chart is drawn:
without it ``save_png`` prints one line on stderr and returns False, and the figures
the benchmark printed are unaffected. The Agg backend draws without a display.

Concurrency: call from one thread at a time (pyplot's state is global).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes

_DPI = 110
_PANEL_WIDTH_IN = 5.5
_PANEL_HEIGHT_IN = 4.5
_MAX_COLUMNS = 2
"""Panels per row: more go on further rows, so a chart stays readable when shrunk."""
_GROUP_WIDTH = 0.8
"""The share of a category's slot its bars fill together."""
_LABEL_WIDTH_CHARS = 14
"""Category labels wrap at this width, so neighbours never overlap."""
_SMALL_FONT = 8
_TITLE_FONT = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Bars:
    """Grouped bars: ``values[series][category]``, in the order given."""

    title: str
    unit: str
    values: Mapping[str, Mapping[str, float]]
    log_scale: bool = False
    target: float | None = None
    """A dashed horizontal line (a target the figures are held to)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lines:
    """One line per series through ``points[series]`` = [(x, y), ...]."""

    title: str
    x_label: str
    unit: str
    points: Mapping[str, Sequence[tuple[float, float]]]
    log_scale: bool = False


Panel = Bars | Lines


def add_png_argument(parser: argparse.ArgumentParser, *, default: str | None = None) -> None:
    """Give a benchmark's ``parser`` the ``--png PATH`` option."""
    parser.add_argument(
        "--png",
        metavar="PATH",
        default=default,
        help="also draw the figures as a PNG chart here (needs the bench extra)"
        + (f"; default {default}, '' for none" if default else ""),
    )


def _categories(values: Mapping[str, Mapping[str, float]]) -> list[str]:
    seen: dict[str, None] = {}
    for per_category in values.values():
        seen.update(dict.fromkeys(per_category))
    return list(seen)


def _draw_bars(axes: Axes, panel: Bars) -> None:
    categories = _categories(panel.values)
    width = _GROUP_WIDTH / max(len(panel.values), 1)
    for index, (series, per_category) in enumerate(panel.values.items()):
        slots = [i for i, category in enumerate(categories) if category in per_category]
        heights = [per_category[categories[i]] for i in slots]
        axes.bar([i + index * width for i in slots], heights, width, label=series)
    middle = (len(panel.values) - 1) * width / 2
    axes.set_xticks([i + middle for i in range(len(categories))])
    labels = [textwrap.fill(category, _LABEL_WIDTH_CHARS) for category in categories]
    axes.set_xticklabels(labels, fontsize=_SMALL_FONT)
    if panel.target is not None:
        axes.axhline(panel.target, color="grey", linestyle="--", linewidth=0.8, label="target")


def _draw_lines(axes: Axes, panel: Lines) -> None:
    for series, points in panel.points.items():
        xs, ys = zip(*sorted(points), strict=True) if points else ((), ())
        axes.plot(xs, ys, marker="o", label=series)
    axes.set_xlabel(panel.x_label, fontsize=_SMALL_FONT)


def save_png(path: str | Path | None, title: str, panels: Sequence[Panel]) -> bool:
    """Draw ``panels`` (two per row) under ``title`` into ``path``; True once written.

    ``path`` None or empty draws nothing (no ``--png``); a missing matplotlib is one
    line on stderr.
    """
    if not path:
        return False
    try:
        import matplotlib  # noqa: PLC0415 - the optional bench extra, only when drawing

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print(
            "matplotlib is missing (the bench extra: pip install './[bench]' in a checkout "
            "of tickwheel): no chart",
            file=sys.stderr,
        )
        return False
    columns = min(len(panels), _MAX_COLUMNS)
    rows = -(-len(panels) // columns)
    figure, axes_grid = plt.subplots(
        rows,
        columns,
        figsize=(_PANEL_WIDTH_IN * columns, _PANEL_HEIGHT_IN * rows),
        squeeze=False,
    )
    all_axes = list(axes_grid.flat)
    for unused in all_axes[len(panels) :]:
        unused.set_visible(False)
    for axes, panel in zip(all_axes, panels, strict=False):
        if isinstance(panel, Bars):
            _draw_bars(axes, panel)
        else:
            _draw_lines(axes, panel)
        if panel.log_scale:
            axes.set_yscale("log")
        axes.set_title(panel.title, fontsize=_TITLE_FONT)
        axes.set_ylabel(panel.unit, fontsize=_SMALL_FONT)
        axes.legend(fontsize=_SMALL_FONT)
    figure.suptitle(title, fontsize=_TITLE_FONT)
    figure.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=_DPI)
    plt.close(figure)
    print(f"wrote {out}", file=sys.stderr)
    return True
