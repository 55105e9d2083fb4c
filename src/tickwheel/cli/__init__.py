"""The ``tickwheel`` command: one verb per module, listed in ``_VERBS``.

Each verb's module has ``main(argv: list[str]) -> int`` and is imported only when its
verb runs, so ``tickwheel bench timer`` never pays for the broker's imports.
Nothing in a library layer imports this package.

Each verb parses its own arguments with argparse (the standard library: no dependency,
and subcommands, choices and ``--help`` are all it needs here), so a typo in a verb, a
subcommand or a choice is a usage message with exit status 2, never a traceback. The
admin verbs (``topic``, ``group``, ``produce``, ``consume``) speak the Kafka protocol
through confluent-kafka, and ``transaction``, ``feature`` and ``reassign`` through raw
requests of their own (``_wire``, for the APIs no client library exposes), so they all work against
any Kafka-compatible broker.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from collections.abc import Callable, Sequence

# verb -> (module with main(argv), one line of help)
_VERBS: dict[str, tuple[str, str]] = {
    "bench": ("tickwheel.cli._bench", "run a benchmark (tickwheel bench --help lists them)"),
    "cluster": (
        "tickwheel.cli._cluster",
        "run ZooKeeper and N brokers on loopback; 'cluster health' checks one",
    ),
    "consume": ("tickwheel.cli._consume", "print records of a topic (kcat-like --format)"),
    "demo": ("tickwheel.cli._demo", "run the clickstream pipeline: broker -> Spark -> Kafka"),
    "fault": (
        "tickwheel.cli._fault",
        "add, list, remove or clear a broker's fault rules (its /faults endpoint)",
    ),
    "feature": (
        "tickwheel.cli._feature",
        "describe, upgrade, downgrade or disable the cluster's finalized feature levels",
    ),
    "group": (
        "tickwheel.cli._group",
        "list, describe (offsets, lag), delete or seek (reset offsets of) consumer groups",
    ),
    "produce": ("tickwheel.cli._produce", "send one record per line of stdin to a topic"),
    "reassign": (
        "tickwheel.cli._reassign",
        "list, start or cancel moves of partitions' replicas (kafka-reassign-partitions)",
    ),
    "schema": (
        "tickwheel.cli._schema",
        "register, get, list, check or delete schemas in a schema registry",
    ),
    "serve": ("tickwheel.cli._serve", "run a Kafka-compatible broker (server.properties)"),
    "topic": ("tickwheel.cli._topic", "create, list, describe, delete, grow or reconfigure topics"),
    "transaction": (
        "tickwheel.cli._transaction",
        "list or describe transactions; describe a partition's producers",
    ),
}

# The extra that installs a verb's missing dependency (a top-level module's name).
_EXTRAS = {
    "confluent_kafka": "admin",
    "kio": "broker",
    "crc32c": "broker",
    "prometheus_client": "broker",
    "kazoo": "cluster",
    "pyspark": "spark",
}


def version() -> str:
    """``tickwheel VERSION (BUILD)``: the package's version and its core's build.

    The build is ``tickwheel.timer.BUILD``: ``compiled: mypyc`` or ``pure Python``
    (with the reason when a compiled build exists but is not used).
    """
    from tickwheel.timer import BUILD  # noqa: PLC0415 (the timer is imported for this verb only)

    return f"tickwheel {importlib.metadata.version('tickwheel')} ({BUILD})"


def _usage() -> str:
    lines = ["usage: tickwheel [--version] VERB [ARGS...]", "", "verbs:"]
    width = max(len(verb) for verb in _VERBS)
    lines += [f"  {verb:<{width}} {help_text}" for verb, (_, help_text) in sorted(_VERBS.items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(version())
        return 0
    verb, rest = args[0], args[1:]
    if verb not in _VERBS:
        print(f"tickwheel: unknown verb {verb!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(_VERBS[verb][0])
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(str(exc.name), "dev")
        print(
            f"tickwheel {verb}: needs {exc.name}, of the {extra} extra: "
            f"pip install './[{extra}]' in a checkout of tickwheel",
            file=sys.stderr,
        )
        return 2
    entry: Callable[[list[str]], int] = module.main
    return entry(rest)
