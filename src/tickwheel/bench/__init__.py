"""Benchmarks, one module each, run as ``tickwheel bench NAME``.

Each module has ``main(argv: list[str]) -> int``, runs tickwheel and its peers side by
side in one process or one run, prints medians and ratios, and says how its figures
are recorded in ``docs/benchmarks.md``. Every one takes ``--png PATH`` and draws its
figures there through ``_chart`` (the one module that knows matplotlib). Benchmarks
are commands, never timed tests.
"""
