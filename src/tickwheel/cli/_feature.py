"""``tickwheel feature describe|upgrade|downgrade|disable``: the cluster's feature levels.

The verbs of ``kafka-features.sh``. No Python client with librdkafka exposes them, so
they go over ``_wire``'s raw connection to the bootstrap broker, as Kafka's admin
client sends them:

- ``describe``: ApiVersions v3+ (v4 where served: below it a broker leaves out every
  feature whose supported range starts at 0): each feature's supported range, its
  finalized level and the finalized epoch.
- ``upgrade`` / ``downgrade`` / ``disable``: UpdateFeatures v1+ with each
  ``--feature NAME=LEVEL`` (``disable``: ``--feature NAME``, level 0) as an upgrade, a
  safe downgrade or, with ``--unsafe``, an unsafe one; ``--dry-run`` only validates.
  A broker answers Kafka 4's way (any broker takes the request), so the request goes to
  the bootstrap broker. A refusal is the broker's own message, one line, exit status 1
  (Kafka refuses the whole request when one feature is refused).

Concurrency: one thread; each command opens its connection and closes it.
"""

from __future__ import annotations

import argparse
from typing import Final

from kio.schema.errors import ErrorCode

from tickwheel.cli._client import CommandError, add_bootstrap_argument, key_value, run
from tickwheel.cli._output import Row, add_format_argument, emit
from tickwheel.cli._wire import Api, connect_bootstrap
from tickwheel.protocol import ApiKey, VersionRange

API_VERSIONS: Final = Api(ApiKey.API_VERSIONS, "ApiVersions", VersionRange(3, 4))
UPDATE_FEATURES: Final = Api(ApiKey.UPDATE_FEATURES, "UpdateFeatures", VersionRange(1, 2))
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3
_NO_RESULTS_VERSION = 2
"""From v2 an UpdateFeatures answer has no per-feature results."""
_SOFTWARE_NAME = "tickwheel-cli"
_SOFTWARE_VERSION = "1"
_REQUEST_TIMEOUT_MS = 10_000


def _describe(args: argparse.Namespace) -> int:
    with connect_bootstrap(args.bootstrap_server) as connection:
        answer = connection.request(
            API_VERSIONS,
            {
                "client_software_name": _SOFTWARE_NAME,
                "client_software_version": _SOFTWARE_VERSION,
            },
        )
    if answer.error_code != ErrorCode.none:
        raise CommandError(f"ApiVersions: {ErrorCode(answer.error_code).name.upper()}")
    supported = {
        f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features
    }
    finalized = {f.name: int(f.max_version_level) for f in answer.finalized_features}
    epoch = int(answer.finalized_features_epoch)
    rows: list[Row] = [
        {
            "feature": name,
            "supported_min": supported[name][0] if name in supported else None,
            "supported_max": supported[name][1] if name in supported else None,
            "finalized_level": finalized.get(name, 0),
            "epoch": epoch if epoch >= 0 else None,
        }
        for name in sorted(supported.keys() | finalized.keys())
    ]
    emit(rows, args.format, tables=[("", rows)])
    return 0


def _level(text: str) -> int:
    try:
        level = int(text)
    except ValueError:
        raise CommandError(f"--feature: the level is not a number: {text!r}") from None
    if level < 0:
        raise CommandError(f"--feature: the level must be at least 0: {text!r}")
    return level


def _update(args: argparse.Namespace) -> int:
    if args.verb == "disable":
        levels = dict.fromkeys(args.feature, 0)
    else:
        levels = {name: _level(level) for name, level in args.feature}
    if args.verb == "upgrade":
        upgrade_type = _UPGRADE
    else:
        upgrade_type = _UNSAFE_DOWNGRADE if args.unsafe else _SAFE_DOWNGRADE
    with connect_bootstrap(args.bootstrap_server) as connection:
        version = connection.version(UPDATE_FEATURES)
        answer = connection.request(
            UPDATE_FEATURES,
            {
                "timeout": _REQUEST_TIMEOUT_MS,
                "feature_updates": [
                    {"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}
                    for name, level in levels.items()
                ],
                "validate_only": args.dry_run,
            },
        )
    failures = [(answer.error_code, answer.error_message)]
    if version < _NO_RESULTS_VERSION:
        failures += [(r.error_code, r.error_message) for r in answer.results]
    for error_code, message in failures:
        if error_code != ErrorCode.none:
            name = ErrorCode(error_code).name.upper()
            raise CommandError(f"{name}: {message}" if message else name)
    verb = "downgraded" if args.verb == "disable" else f"{args.verb}d"
    for name, level in levels.items():
        print(f"{name} {'can be' if args.dry_run else 'was'} {verb} to {level}.")
    return 0


def parser() -> argparse.ArgumentParser:
    """The ``tickwheel feature`` parser, one subcommand per verb."""
    top = argparse.ArgumentParser(
        prog="tickwheel feature",
        description="Describe or change the cluster's finalized feature levels.",
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")
    describe = verbs.add_parser(
        "describe",
        help="show each feature's supported levels, finalized level and epoch",
        description="Describe the features the bootstrap broker advertises.",
    )
    add_format_argument(describe)
    describe.set_defaults(command=_describe)
    changes = []
    for verb, action in (("upgrade", "raise"), ("downgrade", "lower")):
        change = verbs.add_parser(
            verb,
            help=f"{action} finalized feature levels",
            description=f"{action.capitalize()} the finalized level of each --feature.",
        )
        change.add_argument(
            "--feature",
            type=key_value,
            action="append",
            required=True,
            metavar="NAME=LEVEL",
            help="a feature and its new level (repeatable)",
        )
        changes.append(change)
    disable = verbs.add_parser(
        "disable",
        help="set features to level 0",
        description="Downgrade each --feature to level 0.",
    )
    disable.add_argument(
        "--feature",
        action="append",
        required=True,
        metavar="NAME",
        help="a feature to disable (repeatable)",
    )
    changes.append(disable)
    for change in changes:
        change.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
        if change is not changes[0]:
            change.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
        change.set_defaults(command=_update)
    for sub in (describe, *changes):
        add_bootstrap_argument(sub)
    return top


def main(argv: list[str]) -> int:
    """Run one ``feature`` verb; returns the exit status."""
    args = parser().parse_args(argv)
    return run(f"tickwheel feature {args.verb}", args.command, args)
