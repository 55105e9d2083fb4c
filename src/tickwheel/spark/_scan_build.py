"""Which build of the record scan runs: its mypyc-compiled twin or the pure-Python module.

``_record_scan`` is the source's one loop over records (its docstring tells why), so it
exists in two builds, as the core does (``tickwheel.timer._build`` tells the scheme):
the module itself, and its *compiled twin* ``tickwheel.spark._mypyc._record_scan``, an
extension module that the build hook (``hatch_build.py``, ``STANDALONE_TWINS``) compiled
from a copy of the same source, under a name of its own so that both stay importable.
The hook writes the sha256 of the source it compiled beside the twin
(``_mypyc/_record_scan.sha256``). The choice is made once, at the first import, by
every process that imports the source, from the files it sees (Spark's Python workers
under ``local_session`` run the driver's interpreter and environment, so they choose
as the driver does):

- ``TICKWHEEL_PURE_PYTHON=1`` (any value but empty or ``0``) forces pure Python, for
  the core and the scan alike;
- otherwise the twin, when it is installed and was built from the ``_record_scan.py``
  now present (a twin built from another source is stale and not used);
- otherwise -- no compiler at install, a failed build, another interpreter -- pure
  Python.

Both builds scan alike, but each has its own ``RecordScanError`` class: take both names
from here. ``BUILD`` names the choice (a test asks Spark's workers for it); ``COMPILED`` says
whether it is the twin.

Concurrency: decided once, at import; read-only after.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tickwheel.timer._build import PURE_PYTHON_ENV, TWIN_PACKAGE, select_standalone_twin

SOURCE: Final = "_record_scan.py"
TWIN_MODULE: Final = f"tickwheel.spark.{TWIN_PACKAGE}._record_scan"
HASH_FILE: Final = "_record_scan.sha256"
"""Written by the build beside the twin: the sha256 of the source compiled."""


def select(spark_dir: Path, environ: Mapping[str, str]) -> tuple[bool, str]:
    """Whether to use the twin, and the build's name, for the package at ``spark_dir``
    in a process with ``environ`` (see the module doc)."""
    return select_standalone_twin(spark_dir, SOURCE, TWIN_MODULE, environ)


COMPILED, BUILD = select(Path(__file__).resolve().parent, os.environ)
"""Whether the compiled twin is in use, and the build's name."""

if TYPE_CHECKING or not COMPILED:
    from tickwheel.spark._record_scan import RecordScanError, scan_records
else:
    from tickwheel.spark._mypyc._record_scan import RecordScanError, scan_records

__all__ = ["BUILD", "COMPILED", "PURE_PYTHON_ENV", "RecordScanError", "scan_records"]
