"""Which build of the core is in use: the mypyc-compiled twins, or the pure-Python modules.

The core -- every module of ``tickwheel.timer`` and ``tickwheel.purgatory`` but the
packages' ``__init__`` and this one -- exists in two builds:

- *pure Python*: the modules themselves, ``tickwheel/timer/_task.py`` and so on;
- *compiled*: their twins, ``tickwheel.timer._mypyc._task`` and so on, extension
  modules that mypyc built at install from copies of the same sources (the build hook,
  ``hatch_build.py`` at the project's root, tells how) -- but for the modules named in
  ``TWIN_SOURCES``, whose twin is built from another file of the package with the same
  API (the bucket: a ``set`` in pure Python, an indexed array compiled).

The twins have names of their own because an extension module beside a ``.py`` of the
same name always wins at import: were the compiled ``_task`` put beside ``_task.py``,
nothing could ask for the pure one again. The packages' ``__init__`` import the public
names from one build or the other, chosen here once, at the first import of
``tickwheel.timer``:

- ``TICKWHEEL_PURE_PYTHON=1`` (any value but empty or ``0``) forces pure Python;
- otherwise the compiled twins, when they are installed and were built from the
  sources now present: the build wrote the hash of those sources
  (``_mypyc/sources.sha256``); a twin built from other sources (a checkout changed
  since its last ``pip install -e``) is stale and not used;
- otherwise -- no compiler at install, a failed build, an interpreter the twins were
  not built for -- pure Python.

Both builds hold the same classes under the same names, but a class of one build is
not a class of the other: a program must take everything from the public packages
(``tickwheel.timer``, ``tickwheel.purgatory``), never from a private module.
``BUILD`` tells which build is in use, for ``tickwheel --version``.

A few modules outside the core have a compiled twin of their own (the Spark source's
record scan, the schema validation's prefix scan): ``select_standalone_twin`` makes the
same choice for one of them, from the hash of its one source beside its twin.

This module is never compiled: it also holds ``mypyc_attr``, the decorator mypyc reads
on the classes that interpreted code may subclass (``TimerTask``, ``DelayedOperation``
and a few more), as ``mypy_extensions.mypyc_attr`` to the type checker and as a no-op
at run time, so that the core needs no third-party package to run.

Concurrency: decided once, at import; read-only after.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr  # noqa: PLC0414 (re-exported)
else:

    def mypyc_attr(*_args: object, **_kwargs: object) -> Callable[[type], type]:
        """Read by mypyc when it compiles a class; a no-op when the module runs."""
        return lambda cls: cls


PURE_PYTHON_ENV: Final = "TICKWHEEL_PURE_PYTHON"
"""Set (to anything but empty or ``0``) to force the pure-Python core."""

TWIN_PACKAGE: Final = "_mypyc"
"""The subpackage of ``tickwheel.timer`` and ``tickwheel.purgatory`` holding the twins."""

HASH_FILE: Final = "sources.sha256"
"""Written by the build beside the timer's twins: the hash of the sources compiled."""

CORE_PACKAGES: Final = ("timer", "purgatory")

TWIN_SOURCES: Final = {"_task_list.py": "_task_list_array.py"}
"""Modules whose compiled twin is built from another file of the same package."""

_NOT_COMPILED: Final = ("__init__.py", "_build.py")


def core_sources(package_dir: Path) -> Iterator[Path]:
    """The modules of one core package that have a compiled twin."""
    for path in package_dir.glob("_*.py"):
        if path.name not in _NOT_COMPILED and path.name not in TWIN_SOURCES.values():
            yield path


def twin_source(module: Path) -> Path:
    """The file the compiled twin of ``module`` is built from: itself, or its stand-in."""
    return module.with_name(TWIN_SOURCES.get(module.name, module.name))


def sources_sha256(tickwheel_dir: Path) -> str:
    """The hash of every core module's source and twin source, in a fixed order."""
    digest = hashlib.sha256()
    for package in CORE_PACKAGES:
        package_dir = tickwheel_dir / package
        stand_ins = (package_dir / name for name in TWIN_SOURCES.values())
        for path in sorted([*core_sources(package_dir), *(p for p in stand_ins if p.exists())]):
            digest.update(f"{package}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _select() -> tuple[bool, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return False, f"pure Python, forced by {PURE_PYTHON_ENV}"
    timer_dir = Path(__file__).resolve().parent
    try:
        built_from = (timer_dir / TWIN_PACKAGE / HASH_FILE).read_text().strip()
    except OSError:
        return False, "pure Python"
    if built_from != sources_sha256(timer_dir.parent):
        return False, "pure Python; the compiled build is stale: reinstall to rebuild it"
    try:
        importlib.import_module(f"tickwheel.timer.{TWIN_PACKAGE}._task")
    except Exception as exc:  # whatever stops the twins from loading: fall back
        return False, f"pure Python; the compiled build does not load: {exc}"
    return True, "compiled: mypyc"


def select_standalone_twin(
    package_dir: Path, source: str, twin_module: str, environ: Mapping[str, str]
) -> tuple[bool, str]:
    """Whether to use ``twin_module``, the compiled twin of module ``source`` (a file
    name) of the package at ``package_dir``, in a process with ``environ``, and the
    build's name: the twin when it loads and was built from the source now present (its
    hash, in ``_mypyc/<module>.sha256``), unless ``TICKWHEEL_PURE_PYTHON`` forces pure
    Python."""
    if environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return False, f"pure Python, forced by {PURE_PYTHON_ENV}"
    module = source.removesuffix(".py")
    try:
        built_from = (package_dir / TWIN_PACKAGE / f"{module}.sha256").read_text().strip()
    except OSError:
        return False, "pure Python"
    if built_from != hashlib.sha256((package_dir / source).read_bytes()).hexdigest():
        return False, "pure Python; the compiled build is stale: reinstall to rebuild it"
    try:
        importlib.import_module(twin_module)
    except Exception as exc:  # whatever stops the twin from loading: fall back
        return False, f"pure Python; the compiled build does not load: {exc}"
    return True, "compiled: mypyc"


COMPILED, BUILD = _select()
"""Whether the compiled twins are in use, and the build's name for ``--version``."""
