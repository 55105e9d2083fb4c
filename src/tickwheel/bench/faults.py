"""``tickwheel bench faults``: what the fault plan costs a request, per rule check.

The dispatcher asks the plan about a request only while a rule is set, so with none
the cost is one attribute read. With rules it is ``FaultPlan.match``: measured here on
a decoded Produce request (one topic, one partition, as a ``linger.ms=0`` producer
sends) against plans of ``--rules`` rules (100) in three layouts:

- every rule on another API (one dictionary lookup, then nothing);
- every rule on Produce, each naming another client id (a header read per rule);
- every rule on Produce, each naming another topic (the request's partitions read
  once, then compared per rule): the worst case, and the one the target is for.

Printed: µs per check for each layout (the best of ``--repeat`` runs of ``--checks``
checks each, as ``timeit`` advises) and whether the worst stays within the target of
2 µs. No peer: Kafka has no fault injection to compare with.
"""

from __future__ import annotations

import argparse
import functools
import timeit
from collections.abc import Callable

from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.faults import FaultPlan
from tickwheel.protocol import (
    SIZE_PREFIX_BYTES,
    ApiKey,
    DecodedRequest,
    VersionRange,
    build_entity,
    decode_request,
    encode_request,
    request_schema,
)

_TARGET_US = 2.0
_PRODUCE_VERSION = 9
_MICROSECONDS_PER_S = 1_000_000


def _produce_request() -> DecodedRequest:
    """A decoded Produce v9 request for one partition of topic ``orders``."""
    body = build_entity(
        request_schema(ApiKey.PRODUCE, _PRODUCE_VERSION),
        {
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": None}]}],
        },
    )
    frame = encode_request(1, body, client_id="bench")[SIZE_PREFIX_BYTES:]
    served: dict[int, VersionRange] = {
        ApiKey.PRODUCE: VersionRange(_PRODUCE_VERSION, _PRODUCE_VERSION)
    }
    return decode_request(frame, served)


def _plans(rules: int) -> dict[str, FaultPlan]:
    other_api, other_client, other_topic = FaultPlan(), FaultPlan(), FaultPlan()
    for n in range(rules):
        other_api.add(api="Fetch", kind="delay", delay_ms=n)
        other_client.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", client_id=f"c{n}")
        other_topic.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic=f"t{n}")
    return {
        "rules on another API": other_api,
        "rules on Produce, other client ids": other_client,
        "rules on Produce, other topics": other_topic,
    }


def _per_check_us(check: Callable[[], object], checks: int, repeat: int) -> float:
    best_s = min(timeit.repeat(check, number=checks, repeat=repeat))
    return best_s / checks * _MICROSECONDS_PER_S


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench faults", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("--rules", type=int, default=100, help="rules in each plan")
    parser.add_argument("--checks", type=int, default=20_000, help="checks per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is kept")
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Time the rule check of each plan layout and print the table."""
    args = _parser().parse_args(argv)
    request = _produce_request()
    empty = FaultPlan()
    rows = [
        (
            "no rule (the dispatcher's armed check)",
            _per_check_us(lambda: empty.armed, args.checks, args.repeat),
        )
    ]
    for name, plan in _plans(args.rules).items():
        assert plan.match(request) is None
        rows.append(
            (
                f"{args.rules} {name}",
                _per_check_us(functools.partial(plan.match, request), args.checks, args.repeat),
            )
        )
    print(f"## Fault plan: a request's rule check ({args.checks} checks, best of {args.repeat})\n")
    print("| plan | µs per check |")
    print("|---|---:|")
    for name, micros in rows:
        print(f"| {name} | {micros:.3f} |")
    worst = max(micros for _, micros in rows)
    verdict = "met" if worst <= _TARGET_US else "missed"
    print(f"\nworst {worst:.2f} µs; target {_TARGET_US:.0f} µs: {verdict}")
    per_check = Bars(
        title="a request's rule check",
        unit="µs",
        values={"tickwheel": dict(rows)},
        target=_TARGET_US,
    )
    save_png(args.png, "tickwheel bench faults (best of runs)", [per_check])
    return 0
