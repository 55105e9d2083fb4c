"""Which build of the prefix scan runs: its mypyc-compiled twin or the pure-Python module.

``_prefix_scan`` is schema validation's one loop over records, so it exists in two
builds, as the core and the Spark source's record scan do (``tickwheel.timer._build``
tells the scheme and ``select_standalone_twin`` makes the choice): the module itself,
and its twin ``tickwheel.registry._mypyc._prefix_scan``, which the build hook
(``hatch_build.py``, ``STANDALONE_TWINS``) compiles from a copy of the same source and
uses only while that source is the one present. ``BUILD`` names the choice.

Concurrency: decided once, at import; read-only after.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tickwheel.timer._build import TWIN_PACKAGE, select_standalone_twin

SOURCE: Final = "_prefix_scan.py"
TWIN_MODULE: Final = f"tickwheel.registry.{TWIN_PACKAGE}._prefix_scan"

COMPILED, BUILD = select_standalone_twin(
    Path(__file__).resolve().parent, SOURCE, TWIN_MODULE, os.environ
)
"""Whether the compiled twin is in use, and the build's name."""

if TYPE_CHECKING or not COMPILED:
    from tickwheel.registry._prefix_scan import distinct_prefixes
else:
    from tickwheel.registry._mypyc._prefix_scan import distinct_prefixes

__all__ = ["BUILD", "COMPILED", "distinct_prefixes"]
