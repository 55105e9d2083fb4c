"""Build hook: compile tickwheel's core (timer, purgatory) with mypyc, optionally.

Hatchling runs ``CustomBuildHook`` when it builds a wheel, an editable one included
(``pip install -e .``). The hook makes the *compiled twins* of the core's modules:
each module ``tickwheel/timer/_X.py`` is copied to ``tickwheel/timer/_mypyc/_X.py``
(likewise for the purgatory), its imports of ``tickwheel.timer._Y`` and
``tickwheel.purgatory._Y`` rewritten to the twins, and mypyc compiles the copies into
one group of extension modules. A module named in ``TWIN_SOURCES`` (``_build.py``) gets
its twin from its stand-in instead: ``_task_list.py``'s is ``_task_list_array.py``, the
bucket as an array of entries that know their index, faster compiled and slower
interpreted than the ``set``. mypy checks the copies with ``--strict`` while mypyc
compiles them, which is how the stand-ins (left out of the project's own mypy run: their
types are those of the twins) are type-checked. The twins have names of their own
because an extension module beside a ``.py`` of the same name always wins at import:
under other names, the pure-Python modules stay importable, and ``tickwheel.timer``
chooses between the two at import (see ``tickwheel/timer/_build.py``).

Where the modules go: an editable install builds them in place, into
``src/tickwheel/{timer,purgatory}/_mypyc/`` (ignored by git; so a checkout used
through ``PYTHONPATH=src`` gets them too), a wheel carries them. Either way the hook
writes ``sources.sha256``, the hash of the sources compiled, beside them: the selector
uses the compiled build only while that hash matches the sources, so a stale build is
never used.

A few modules outside the core (``STANDALONE_TWINS``: the Spark source's record scan,
the schema validation's prefix scan)
are compiled in the same group, each into a ``_mypyc`` folder beside it, with a hash
file of its own (``<module>.sha256``, the hash of that one source): they import nothing
of the core, and their package chooses between its two builds itself
(``tickwheel/spark/_scan_build.py``).

The compilation runs in a child process. Whatever stops it -- no C compiler, no
Python headers, a mypyc error -- is reported as a warning and the install goes on
with the pure-Python modules only. ``TICKWHEEL_NO_COMPILE=1`` skips it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"
PACKAGES = ("timer", "purgatory")
TWIN = "_mypyc"
GROUP = f"tickwheel.timer.{TWIN}.core"
"""mypyc's group name: its shared library is ``tickwheel/timer/_mypyc/core__mypyc``."""
STANDALONE_TWINS = (
    Path("tickwheel") / "spark" / "_record_scan.py",
    Path("tickwheel") / "registry" / "_prefix_scan.py",
)
"""Modules compiled as twins outside the core, as paths under ``src``."""
BUILD_DIR = ROOT / "build" / "mypyc"
COMPILE_TIMEOUT_S = 900
NO_COMPILE_ENV = "TICKWHEEL_NO_COMPILE"

_IMPORT = re.compile(
    r"^(\s*)(from|import) tickwheel\.(timer|purgatory)\.(?!_build\b)(_\w+)", re.MULTILINE
)


def _selector() -> Any:
    """``tickwheel/timer/_build.py``, loaded by path (it needs only the standard library)."""
    path = SRC / "tickwheel" / "timer" / "_build.py"
    spec = importlib.util.spec_from_file_location("_tickwheel_build", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_twins(tree: Path) -> list[Path]:
    """Copy the core's modules into ``tree`` as their twins; returns the copies."""
    copies: list[Path] = []
    for package in ("tickwheel", *(f"tickwheel/{p}" for p in PACKAGES)):
        (tree / package).mkdir(parents=True, exist_ok=True)
        (tree / package / "__init__.py").write_text("")
    # The selector is not compiled; the twins import its ``mypyc_attr``, so mypy must see it.
    shutil.copy2(SRC / "tickwheel" / "timer" / "_build.py", tree / "tickwheel" / "timer")
    for package in PACKAGES:
        twin_dir = tree / "tickwheel" / package / TWIN
        twin_dir.mkdir(exist_ok=True)
        (twin_dir / "__init__.py").write_text("")
        selector = _selector()
        for source in sorted(selector.core_sources(SRC / "tickwheel" / package)):
            text = selector.twin_source(source).read_text()
            text = _IMPORT.sub(rf"\1\2 tickwheel.\3.{TWIN}.\4", text)
            copy = twin_dir / source.name
            copy.write_text(text)
            copies.append(copy)
    for module in STANDALONE_TWINS:
        twin_dir = tree / module.parent / TWIN
        twin_dir.mkdir(parents=True, exist_ok=True)
        (tree / module.parent / "__init__.py").write_text("")
        (twin_dir / "__init__.py").write_text("")
        copies.append(Path(shutil.copy2(SRC / module, twin_dir / module.name)))
    return copies


def _standalone_hash_file(root: Path, module: Path) -> Path:
    """Where the hash of a standalone twin's source goes, under ``root``."""
    return root / module.parent / TWIN / f"{module.stem}.sha256"


_COMPILE = textwrap.dedent(
    """
    import sys
    from setuptools import setup
    from mypyc.build import mypycify

    build_lib, build_temp, group, *paths = sys.argv[1:]
    setup(
        name="tickwheel-core",
        ext_modules=mypycify(
            ["--strict", "--warn-unreachable", *paths], opt_level="3", group_name=group
        ),
        script_args=["build_ext", "--build-lib", build_lib, "--build-temp", build_temp],
    )
    """
)


def compile_core(out: Path, log: Any = print) -> bool:
    """Compile the twins into ``out`` (a tree rooted like ``src``); False if it failed."""
    shutil.rmtree(BUILD_DIR, ignore_errors=True)
    tree = BUILD_DIR / "src"
    copies = _write_twins(tree)
    command = [
        sys.executable,
        "-c",
        _COMPILE,
        str(out),
        str(BUILD_DIR / "temp"),
        GROUP,
        *(str(p.relative_to(tree)) for p in copies),
    ]
    try:
        result = subprocess.run(
            command,
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"tickwheel: mypyc build failed ({exc}); using the pure-Python core")
        return False
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        log(f"tickwheel: mypyc build failed; using the pure-Python core\n{tail}")
        return False
    digest = _selector().sources_sha256(SRC / "tickwheel")
    for package in PACKAGES:
        (out / "tickwheel" / package / TWIN).mkdir(parents=True, exist_ok=True)
    (out / "tickwheel" / "timer" / TWIN / "sources.sha256").write_text(digest + "\n")
    for module in STANDALONE_TWINS:
        source_digest = hashlib.sha256((SRC / module).read_bytes()).hexdigest()
        _standalone_hash_file(out, module).write_text(source_digest + "\n")
    return True


def built_files(out: Path) -> list[Path]:
    """The compiled modules and the hash files under ``out``."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return [
        *out.rglob(f"*{suffix}"),
        out / "tickwheel" / "timer" / TWIN / "sources.sha256",
        *(_standalone_hash_file(out, module) for module in STANDALONE_TWINS),
    ]


def clean_in_place() -> None:
    """Remove an earlier in-place build (its hash would no longer match anyway)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for package in PACKAGES:
        twin_dir = SRC / "tickwheel" / package / TWIN
        for path in twin_dir.glob(f"*{suffix}"):
            path.unlink()
    (SRC / "tickwheel" / "timer" / TWIN / "sources.sha256").unlink(missing_ok=True)
    for module in STANDALONE_TWINS:
        for path in (SRC / module.parent / TWIN).glob(f"{module.stem}*{suffix}"):
            path.unlink()
        _standalone_hash_file(SRC, module).unlink(missing_ok=True)


def install_in_place(out: Path) -> None:
    """Move the build under ``out`` into ``src``, each file replaced in one rename.

    A process that has the old modules loaded keeps its mapping of the old files.
    """
    clean_in_place()
    for path in built_files(out):
        target = SRC / path.relative_to(out)
        staged = target.with_name(f".{target.name}.new")
        shutil.copy2(path, staged)
        os.replace(staged, target)


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script (python hatch_build.py), outside a build
    BuildHookInterface = object


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Compile the core when building a wheel; never fail the build over it."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if os.environ.get(NO_COMPILE_ENV, "") not in ("", "0"):
            self.app.display_info(f"tickwheel: {NO_COMPILE_ENV} set; pure-Python core only")
            return
        out = BUILD_DIR / "lib"
        if not compile_core(out, self.app.display_warning):
            if version == "editable":
                clean_in_place()
            return
        self.app.display_info("tickwheel: compiled the core with mypyc")
        if version == "editable":
            install_in_place(out)
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        for path in built_files(out):
            build_data["force_include"][str(path)] = str(path.relative_to(out))


if __name__ == "__main__":
    # ``python hatch_build.py``: rebuild in place (mypy and setuptools must be importable).
    if not compile_core(BUILD_DIR / "lib"):
        sys.exit(1)
    install_in_place(BUILD_DIR / "lib")
    print("tickwheel: compiled the core in place")
