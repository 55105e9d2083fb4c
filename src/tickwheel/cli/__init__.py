"""The ``tickwheel`` command: one verb per module, listed in ``_VERBS``.

Each verb's module has ``main(argv: list[str]) -> int`` and is imported only when its
verb runs, so ``tickwheel bench timer`` never pays for the broker's imports.
Nothing in a library layer imports this package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

# verb -> (module with main(argv), one line of help)
_VERBS: dict[str, tuple[str, str]] = {
    "bench": ("tickwheel.cli._bench", "run a benchmark (tickwheel bench --help lists them)"),
    "cluster": ("tickwheel.cli._cluster", "run ZooKeeper and N brokers on loopback"),
    "demo": ("tickwheel.cli._demo", "run the clickstream pipeline: broker -> Spark -> Kafka"),
    "serve": ("tickwheel.cli._serve", "run a Kafka-compatible broker (server.properties)"),
}


def _usage() -> str:
    lines = ["usage: tickwheel VERB [ARGS...]", "", "verbs:"]
    lines += [f"  {verb:<8} {help_text}" for verb, (_, help_text) in sorted(_VERBS.items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else 2
    verb, rest = args[0], args[1:]
    if verb not in _VERBS:
        print(f"tickwheel: unknown verb {verb!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    entry: Callable[[list[str]], int] = importlib.import_module(_VERBS[verb][0]).main
    return entry(rest)
