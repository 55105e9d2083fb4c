"""Benchmarks, one module each, run as ``tickwheel bench NAME``.

Each module has ``main(argv: list[str]) -> int``, runs tickwheel and its peers side by
side in one process or one run, prints medians and ratios, and says how its figures
are recorded in ``docs/benchmarks.md``. Benchmarks are commands, never timed tests.
"""
