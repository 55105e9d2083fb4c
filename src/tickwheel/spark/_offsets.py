"""Kafka offsets as Spark checkpoints them, and the arithmetic of a micro-batch's range.

An offset map sends ``(topic, partition)`` to the next offset to read. In Spark's offset
log it is the JSON Spark's own Kafka connector writes, ``{"topic": {"0": 42, "1": 7}}``:
topics sorted, partitions in numeric order, so the same offsets always serialise to the
same text (Spark decides "no new data" by comparing them). ``-2`` means earliest and
``-1`` latest in the option JSON of ``startingOffsets`` / ``endingOffsets`` only; a
checkpointed map always holds resolved offsets.

``limit_offsets`` is the admission control behind ``maxOffsetsPerTrigger``: it shares a
budget of records among partitions in proportion to what each has waiting, by the
largest-remainder method, so a batch never admits more than the budget and every offset
it picks is reached by a whole number of records.

``offsets_behind_latest`` gives the progress ``metrics`` Spark's own Kafka source reports
(``min/max/avgOffsetsBehindLatest``) from a progress's ``endOffset`` and
``latestOffset``: PySpark has no way for a Python source to report them itself.

Concurrency: pure functions over immutable inputs; safe from any thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tickwheel.spark._errors import SparkKafkaError

TopicPartitionId = tuple[str, int]
OffsetMap = dict[TopicPartitionId, int]

# Spark's Kafka connector's markers in offset JSON (and Kafka's ListOffsets timestamps).
EARLIEST = -2
LATEST = -1


def sorted_offsets(offsets: Mapping[TopicPartitionId, int]) -> OffsetMap:
    """The same offsets in canonical order: topic, then partition number."""
    return {tp: offsets[tp] for tp in sorted(offsets)}


def offsets_to_json(offsets: Mapping[TopicPartitionId, int]) -> dict[str, dict[str, int]]:
    """The checkpoint form of ``offsets`` (a dict of primitives in canonical order)."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted_offsets(offsets).items():
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def offsets_from_json(value: Mapping[str, Mapping[str, int]], *, what: str) -> OffsetMap:
    """Parse the checkpoint or option form ``{"topic": {"0": 42}}``; ``what`` names it in errors."""
    if not isinstance(value, Mapping):
        raise SparkKafkaError(
            f'{what}: expected {{"topic": {{"partition": offset}}}}, got {value!r}'
        )
    offsets: OffsetMap = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            raise SparkKafkaError(f"{what}: topic {topic!r} needs a partition->offset object")
        for partition, offset in partitions.items():
            try:
                tp = (str(topic), int(partition))
            except ValueError:
                raise SparkKafkaError(f"{what}: partition {partition!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise SparkKafkaError(f"{what}: offset of {topic}-{partition} is {offset!r}")
            offsets[tp] = offset
    return sorted_offsets(offsets)


def parse_offsets_option(text: str, *, what: str) -> OffsetMap:
    """Parse a per-partition JSON option such as ``startingOffsets``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SparkKafkaError(f"{what}: not JSON ({exc.msg}): {text!r}") from None
    return offsets_from_json(value, what=what)


def limit_offsets(start: OffsetMap, latest: OffsetMap, max_records: int) -> OffsetMap:
    """End offsets that admit at most ``max_records`` records beyond ``start``.

    Every partition of ``latest`` appears in the result; a partition missing from
    ``start`` is new and begins at offset 0. A partition whose latest offset is not
    ahead of its start keeps the latest offset (a shrunken log is the reader's concern).
    """
    waiting = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
    total = sum(waiting.values())
    if total <= max_records:
        return sorted_offsets(latest)
    # Largest remainder: floor of each proportional share, then one more record to the
    # partitions with the largest fractional parts until the budget is spent.
    shares = {tp: waiting[tp] * max_records // total for tp in waiting}
    remainders = sorted(waiting, key=lambda tp: (-(waiting[tp] * max_records % total), tp))
    for tp in remainders[: max_records - sum(shares.values())]:
        shares[tp] += 1
    return sorted_offsets(
        {tp: start.get(tp, 0) + shares[tp] if waiting[tp] else latest[tp] for tp in latest}
    )


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> dict[str, str]:
    """Spark's Kafka source metrics for one source of a streaming query's progress.

    ``source_progress`` is an element of ``StreamingQueryProgress.sources`` (or its
    JSON): how far each partition's ``latestOffset`` -- the log end the source saw when
    it planned the batch -- is ahead of the batch's ``endOffset``, as the minimum,
    maximum and mean over partitions, formatted as Spark formats them. Empty when the
    progress lacks either offset.
    """
    end = _parsed(source_progress.get("endOffset"))
    latest_seen = _parsed(source_progress.get("latestOffset"))
    if not end or not latest_seen:
        return {}
    consumed = offsets_from_json(end, what="progress endOffset")
    latest = offsets_from_json(latest_seen, what="progress latestOffset")
    behind = [offset - consumed[tp] for tp, offset in latest.items() if tp in consumed]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


def _parsed(offsets: object) -> Mapping[str, Mapping[str, int]] | None:
    """Offsets as a progress holds them: JSON text (PySpark's, ``"null"`` for none) or
    already parsed; ``None`` when there are none."""
    value = json.loads(offsets) if isinstance(offsets, str) and offsets else offsets
    return value if isinstance(value, Mapping) else None
