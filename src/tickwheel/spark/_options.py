"""The options of Spark's Kafka connector, parsed once into frozen, picklable values.

A ``DataSource`` receives its options as case-insensitive strings. ``SourceOptions`` and
``SinkOptions`` turn them into typed values the driver checks before any query starts,
so a typo fails at ``load()``/``start()`` with the option's name in the message rather
than in an executor. The same values are pickled into every executor task.

Names and defaults follow Spark's Kafka connector: ``kafka.bootstrap.servers``; one of
``subscribe`` / ``subscribePattern`` / ``assign``; ``startingOffsets`` (streaming default
``latest``, batch ``earliest``), ``endingOffsets`` (batch only, default ``latest``);
``maxOffsetsPerTrigger``; ``failOnDataLoss`` (default true); ``includeHeaders`` (default
false); ``kafkaConsumer.pollTimeoutMs`` (default 120 s, Spark's network timeout); for
the sink ``topic`` and tickwheel's own ``exactlyOnce`` (default false). Every
``kafka.*`` option goes to the librdkafka client without its prefix, except the few
this layer must own (offset reset and auto-commit, below; ``transactional.id`` with
``exactlyOnce``).
Per-partition JSON need not name every partition: those it leaves out start at
``earliest`` and end at ``latest`` (Spark's connector requires them all).

Concurrency: immutable values; safe from any thread and process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._offsets import (
    EARLIEST,
    LATEST,
    OffsetMap,
    TopicPartitionId,
    parse_offsets_option,
)

CLIENT_PREFIX = "kafka."
BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"
# Spark's default for kafkaConsumer.pollTimeoutMs is spark.network.timeout: 120 s.
DEFAULT_POLL_TIMEOUT_MS = 120_000
# The reader positions its consumer itself and never commits (offsets live in Spark's
# checkpoint), so these client settings are not the user's to change; Spark's
# connector refuses the same ones.
_OWNED_CLIENT_SETTINGS = frozenset({"auto.offset.reset", "enable.auto.commit"})
# The exactly-once sink sets each task's transactional.id itself.
_TRANSACTIONAL_ID = "transactional.id"
_SUBSCRIPTION_OPTIONS = ("subscribe", "subscribepattern", "assign")
_TRUE_FALSE = {"true": True, "false": False}


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which topic-partitions a source reads: a topic list, a pattern or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartitionId, ...] = ()

    def select(self, partitions_by_topic: Mapping[str, int]) -> list[TopicPartitionId]:
        """The topic-partitions to read, given each existing topic's partition count."""
        if self.assigned:
            return sorted(self.assigned)
        if self.pattern is not None:
            regex = re.compile(self.pattern)
            # Java's Pattern.matches (what Spark uses) must match the whole name.
            topics = [t for t in partitions_by_topic if regex.fullmatch(t)]
        else:
            topics = [t for t in self.topics if t in partitions_by_topic]
        return sorted((t, p) for t in topics for p in range(partitions_by_topic[t]))


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Where a read starts or ends: ``EARLIEST``/``LATEST`` for all, or per partition."""

    default: int
    specific: tuple[tuple[TopicPartitionId, int], ...] = ()

    def per_partition(self) -> OffsetMap:
        """The per-partition offsets given as JSON (empty for ``earliest``/``latest``)."""
        return dict(self.specific)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """A Kafka source's options, checked."""

    client_config: tuple[tuple[str, str], ...]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Check and parse a source's options; raises ``SparkKafkaError`` naming the option."""
        opts = {k.lower(): v for k, v in options.items()}
        starting = _offset_bound(
            opts, "startingoffsets", "startingOffsets", "latest" if streaming else "earliest"
        )
        ending = _offset_bound(opts, "endingoffsets", "endingOffsets", "latest")
        if streaming and "endingoffsets" in opts:
            raise SparkKafkaError("endingOffsets is for batch queries only")
        if not streaming:
            _check_batch_bounds(starting, ending)
        max_offsets = opts.get("maxoffsetspertrigger")
        return cls(
            client_config=_client_config(opts),
            subscription=_subscription(opts),
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=None
            if max_offsets is None
            else _positive_int(max_offsets, "maxOffsetsPerTrigger"),
            fail_on_data_loss=_boolean(opts, "failondataloss", "failOnDataLoss", default=True),
            include_headers=_boolean(opts, "includeheaders", "includeHeaders", default=False),
            poll_timeout_ms=_positive_int(
                opts.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS)),
                "kafkaConsumer.pollTimeoutMs",
            ),
        )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """A Kafka sink's options, checked: the client settings, the default topic, and
    ``exactlyOnce`` (tickwheel's own; see ``_exactly_once``)."""

    client_config: tuple[tuple[str, str], ...]
    topic: str | None
    exactly_once: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Check and parse a sink's options; raises ``SparkKafkaError`` naming the option."""
        opts = {k.lower(): v for k, v in options.items()}
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise SparkKafkaError("option topic is empty")
        exactly_once = _boolean(opts, "exactlyonce", "exactlyOnce", default=False)
        client_config = _client_config(opts)
        if exactly_once:
            if topic is None:
                raise SparkKafkaError("exactlyOnce=true needs the option topic")
            if any(name == _TRANSACTIONAL_ID for name, _ in client_config):
                raise SparkKafkaError(
                    f"option {CLIENT_PREFIX}{_TRANSACTIONAL_ID} is not supported with"
                    " exactlyOnce=true: the sink derives it from the query and partition"
                )
        return cls(client_config=client_config, topic=topic, exactly_once=exactly_once)


def _client_config(opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    servers = opts.get(BOOTSTRAP_SERVERS, "").strip()
    if not servers:
        raise SparkKafkaError(f"option {BOOTSTRAP_SERVERS} is required")
    config: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith(CLIENT_PREFIX):
            continue
        name = key[len(CLIENT_PREFIX) :]
        if name in _OWNED_CLIENT_SETTINGS:
            raise SparkKafkaError(f"option {key} is not supported: the source manages it")
        config[name] = value
    return tuple(sorted(config.items()))


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in _SUBSCRIPTION_OPTIONS if name in opts]
    if len(given) != 1:
        raise SparkKafkaError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            f" (got {len(given)})"
        )
    kind, text = given[0], opts[given[0]]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise SparkKafkaError("option subscribe names no topic")
        return Subscription(topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise SparkKafkaError(f"option subscribePattern: {exc}") from None
        return Subscription(pattern=text)
    return Subscription(assigned=_assignment(text))


def _assignment(text: str) -> tuple[TopicPartitionId, ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SparkKafkaError(f"option assign: not JSON ({exc.msg})") from None
    if not isinstance(value, dict) or not value:
        raise SparkKafkaError('option assign: expected {"topic": [partition, ...]}')
    assigned: list[TopicPartitionId] = []
    for topic, partitions in value.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise SparkKafkaError(f"option assign: topic {topic!r} needs a list of partitions")
        assigned += [(topic, p) for p in partitions]
    return tuple(sorted(set(assigned)))


def _offset_bound(opts: Mapping[str, str], key: str, name: str, default: str) -> OffsetBound:
    text = opts.get(key, default).strip()
    if text.lower() == "earliest":
        return OffsetBound(EARLIEST)
    if text.lower() == "latest":
        return OffsetBound(LATEST)
    specific = parse_offsets_option(text, what=f"option {name}")
    if not specific:
        raise SparkKafkaError(f"option {name} names no partition")
    return OffsetBound(EARLIEST if key == "startingoffsets" else LATEST, tuple(specific.items()))


def _check_batch_bounds(starting: OffsetBound, ending: OffsetBound) -> None:
    # A batch query reads a fixed range: it cannot start at "latest" (nothing to read)
    # nor end at "earliest"; Spark's connector refuses both the same way.
    if starting.default == LATEST or LATEST in starting.per_partition().values():
        raise SparkKafkaError("startingOffsets latest (or -1) is not allowed in a batch query")
    if ending.default == EARLIEST or EARLIEST in ending.per_partition().values():
        raise SparkKafkaError("endingOffsets earliest (or -2) is not allowed in a batch query")


def _boolean(opts: Mapping[str, str], key: str, name: str, *, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    value = _TRUE_FALSE.get(text.strip().lower())
    if value is None:
        raise SparkKafkaError(f"option {name} must be true or false, got {text!r}")
    return value


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SparkKafkaError(f"option {name} must be a whole number, got {text!r}") from None
    if value <= 0:
        raise SparkKafkaError(f"option {name} must be positive, got {value}")
    return value
