"""``tickwheel bench NAME [ARGS...]``: run the benchmark module ``tickwheel.bench.NAME``.

Every public module of ``tickwheel.bench`` with a ``main(argv: list[str]) -> int`` is a
benchmark, so adding one needs no change here.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable

from tickwheel import bench


def _benchmarks() -> list[str]:
    modules = pkgutil.iter_modules(bench.__path__)
    return sorted(m.name for m in modules if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    """Dispatch to one benchmark; returns its exit status."""
    names = _benchmarks()
    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: tickwheel bench NAME [ARGS...]\n\nbenchmarks: " + ", ".join(names))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in names:
        known = ", ".join(names)
        print(f"tickwheel bench: unknown benchmark {name!r}; known: {known}", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int] = importlib.import_module(f"tickwheel.bench.{name}").main
    return entry(rest)
