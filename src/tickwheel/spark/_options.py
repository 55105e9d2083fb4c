"""The options of Spark's Kafka connector, parsed once into frozen, picklable values.

A ``DataSource`` receives its options as case-insensitive strings. ``SourceOptions`` and
``SinkOptions`` turn them into typed values the driver checks before any query starts,
so a typo fails at ``load()``/``start()`` with the option's name in the message rather
than in an executor. The same values are pickled into every executor task.

Names and defaults follow Spark's Kafka connector: ``kafka.bootstrap.servers``; one of
``subscribe`` / ``subscribePattern`` / ``assign``; where a query starts and (batch only)
ends; ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay``
(default ``15m``, Spark's time syntax); ``minPartitions`` and
``maxRecordsPerPartition``; ``failOnDataLoss`` (default
true); ``includeHeaders`` (default false); ``kafkaConsumer.pollTimeoutMs`` (default
120 s, Spark's network timeout); for the sink ``topic`` and tickwheel's own
``exactlyOnce`` (default false). Every ``kafka.*`` option goes to the librdkafka client
without its prefix, except the few this layer must own (offset reset and auto-commit,
below; ``transactional.id`` with ``exactlyOnce``) and Java client classes librdkafka has
no use for.

A start or end is, in Spark's order of precedence: ``startingTimestamp`` /
``endingTimestamp`` (one time in ms for every partition), then
``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON, per partition),
then ``startingOffsets`` / ``endingOffsets`` (``earliest``, ``latest`` or JSON; streaming
default ``latest``, batch ``earliest`` and ``latest``). A time resolves to the first
offset whose record's timestamp is at or after it; when a partition has none, a start
fails (``startingOffsetsByTimestampStrategy=error``, the default) or takes the latest
offset (``latest``), and an end takes the latest offset. Per-partition JSON need not
name every partition: those it leaves out start at ``earliest`` and end at ``latest``
(Spark's connector requires them all).

The options of Spark's connector this source does not implement (``SPARK_ONLY``) are
refused with their name, never ignored; other unknown options are ignored, as Spark does.

Keys and values are bytes unless ``keyFormat`` / ``valueFormat`` is ``avro`` (default
``binary``): then they are Confluent-framed Avro whose schemas live in the schema
registry at ``schema.registry.url`` (comma-separated URLs are tried in order), reached
with ``schema.registry.basic.auth.user.info`` and ``schema.registry.ssl.ca.location``
when set -- confluent-kafka's client settings under the prefix Confluent's Java
serdes use. The subject is the topic's (``<topic>-key``, ``<topic>-value``:
TopicNameStrategy), so a source with an Avro column reads one topic and a sink with one
needs the option ``topic``. A sink registers its schema (derived from the column's type,
or ``key.schema`` / ``value.schema``) unless ``auto.register.schemas=false``.

Concurrency: immutable values; safe from any thread and process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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
TRANSACTIONAL_ID = "transactional.id"
# Java client classes, with why they are refused: Spark's connector refuses the
# (de)serializers and interceptors, and librdkafka could not load them anyway.
_BYTES_ONLY = "keys and values are bytes; convert them with DataFrame operations"
_JAVA_CLIENT_SETTINGS = {
    "key.deserializer": _BYTES_ONLY,
    "value.deserializer": _BYTES_ONLY,
    "key.serializer": _BYTES_ONLY,
    "value.serializer": _BYTES_ONLY,
    "interceptor.classes": "interceptors could change the records read or written",
}
_SUBSCRIPTION_OPTIONS = ("subscribe", "subscribepattern", "assign")
_TRUE_FALSE = {"true": True, "false": False}
# Options of Spark's Kafka connector that this source does not implement, by lower-case
# key, with why: passing them silently would change what a moved job reads.
SPARK_ONLY = {
    "groupidprefix": (
        "groupIdPrefix is not supported: the source joins no consumer group"
        " (set kafka.group.id to name the one its consumers report)"
    ),
    "fetchoffset.numretries": (
        "fetchOffset.numRetries is not supported: librdkafka retries offset requests"
        " (kafka.retries, kafka.retry.backoff.ms)"
    ),
    "fetchoffset.retryintervalms": (
        "fetchOffset.retryIntervalMs is not supported: librdkafka retries offset requests"
        " (kafka.retries, kafka.retry.backoff.ms)"
    ),
}
DEFAULT_MAX_TRIGGER_DELAY = "15m"
# Spark's time strings (JavaUtils.timeStringAsMs): a whole number and a unit, ms if none.
_TIME_STRING = re.compile(r"(-?[0-9]+)([a-z]+)?")
_US_PER_MS = 1000
_TIME_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_NO_MATCH_STRATEGIES = {"error": None, "latest": LATEST}
BINARY_FORMAT = "binary"
AVRO_FORMAT = "avro"
_RECORD_FORMATS = (BINARY_FORMAT, AVRO_FORMAT)
REGISTRY_URL = "schema.registry.url"
_REGISTRY_USER_INFO = "schema.registry.basic.auth.user.info"
_REGISTRY_CA_LOCATION = "schema.registry.ssl.ca.location"
_REGISTRY_PREFIX = "schema.registry."
_REGISTRY_SETTINGS = (REGISTRY_URL, _REGISTRY_USER_INFO, _REGISTRY_CA_LOCATION)
_REGISTRY_SCHEMES = ("http://", "https://")


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

    def only_topic(self) -> str | None:
        """The one topic a topic list or assignment names, or None (several, a pattern)."""
        topics = set(self.topics) | {topic for topic, _ in self.assigned}
        return topics.pop() if self.pattern is None and len(topics) == 1 else None


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    """How to reach the schema registry: its URLs, tried in order, and Confluent's
    client settings for basic authentication and a CA file."""

    urls: tuple[str, ...]
    user_info: str | None = field(default=None, repr=False)
    ca_location: str | None = None


@dataclass(frozen=True, slots=True)
class RecordFormats:
    """How keys and values are encoded: ``binary`` (Kafka's bytes as they are) or
    ``avro`` (Confluent-framed, their schemas in ``registry``), and the topic whose
    subjects hold the schemas (set when a column is ``avro``)."""

    key: str = BINARY_FORMAT
    value: str = BINARY_FORMAT
    registry: RegistryOptions | None = None
    topic: str | None = None

    def avro_columns(self) -> tuple[str, ...]:
        """The names of the columns encoded as Avro: ``key``, ``value``, both or none."""
        formats = (("key", self.key), ("value", self.value))
        return tuple(column for column, encoding in formats if encoding == AVRO_FORMAT)

    def registry_and_topic(self) -> tuple[RegistryOptions, str]:
        """The registry and the topic of formats with an Avro column."""
        if self.registry is None or self.topic is None:
            raise SparkKafkaError("no Avro column: keyFormat and valueFormat are binary")
        return self.registry, self.topic

    @classmethod
    def parse(cls, opts: Mapping[str, str], topic: str | None, topic_option: str) -> RecordFormats:
        """``opts`` (lower-case keys) checked; ``topic`` is the one topic the query reads
        or writes, if one, and ``topic_option`` how to name one in an error."""
        key = _record_format(opts, "keyformat", "keyFormat")
        value = _record_format(opts, "valueformat", "valueFormat")
        formats = cls(key=key, value=value)
        if not formats.avro_columns():
            return formats
        if topic is None:
            raise SparkKafkaError(
                f"keyFormat/valueFormat avro reads the schemas of one topic's subjects:"
                f" {topic_option}"
            )
        return cls(key=key, value=value, registry=_registry_options(opts), topic=topic)


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Where a read starts or ends: ``EARLIEST``/``LATEST`` for all, offsets per
    partition, one timestamp for all, or timestamps per partition.

    ``default`` is the marker for partitions given nothing else. ``no_match`` is what a
    timestamp with no record at or after it becomes: ``LATEST``, or ``None`` to fail.
    """

    default: int
    specific: tuple[tuple[TopicPartitionId, int], ...] = ()
    timestamp_ms: int | None = None
    timestamps_ms: tuple[tuple[TopicPartitionId, int], ...] = ()
    no_match: int | None = LATEST

    def per_partition(self) -> OffsetMap:
        """The per-partition offsets given as JSON (empty for ``earliest``/``latest``)."""
        return dict(self.specific)

    def timestamps_for(self, partitions: Sequence[TopicPartitionId]) -> OffsetMap:
        """The time in ms each of ``partitions`` starts or ends at, if given one."""
        if self.timestamp_ms is not None:
            return dict.fromkeys(partitions, self.timestamp_ms)
        given = dict(self.timestamps_ms)
        return {tp: given[tp] for tp in partitions if tp in given}

    def named_partitions(self) -> set[TopicPartitionId]:
        """The partitions the option's JSON names."""
        return set(dict(self.specific)) | set(dict(self.timestamps_ms))


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """A Kafka source's options, checked."""

    client_config: tuple[tuple[str, str], ...]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    formats: RecordFormats = RecordFormats()

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        """Check and parse a source's options; raises ``SparkKafkaError`` naming the option."""
        opts = {k.lower(): v for k, v in options.items()}
        for key, reason in SPARK_ONLY.items():
            if key in opts:
                raise SparkKafkaError(f"option {reason}")
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in _NO_MATCH_STRATEGIES:
            raise SparkKafkaError(
                "option startingOffsetsByTimestampStrategy must be error or latest,"
                f" got {strategy!r}"
            )
        starting = _offset_bound(
            opts,
            "starting",
            "latest" if streaming else "earliest",
            no_match=_NO_MATCH_STRATEGIES[strategy],
        )
        ending = _offset_bound(opts, "ending", "latest", no_match=LATEST)
        if streaming:
            for key, name in _ENDING_OPTIONS.items():
                if key in opts:
                    raise SparkKafkaError(f"{name} is for batch queries only")
        else:
            _check_batch_bounds(starting, ending)
        max_offsets = _optional_positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        min_offsets = _optional_positive_int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise SparkKafkaError(
                f"option minOffsetsPerTrigger ({min_offsets}) is higher than"
                f" maxOffsetsPerTrigger ({max_offsets})"
            )
        client_config = _client_config(opts)
        subscription = _subscription(opts)
        return cls(
            client_config=client_config,
            subscription=subscription,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=max_offsets,
            min_offsets_per_trigger=min_offsets,
            max_trigger_delay_ms=_time_ms(
                opts.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY), "maxTriggerDelay"
            ),
            min_partitions=_optional_positive_int(opts, "minpartitions", "minPartitions"),
            max_records_per_partition=_optional_positive_int(
                opts, "maxrecordsperpartition", "maxRecordsPerPartition"
            ),
            fail_on_data_loss=_boolean(opts, "failondataloss", "failOnDataLoss", default=True),
            include_headers=_boolean(opts, "includeheaders", "includeHeaders", default=False),
            poll_timeout_ms=_positive_int(
                opts.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS)),
                "kafkaConsumer.pollTimeoutMs",
            ),
            formats=_source_formats(opts, subscription),
        )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """A Kafka sink's options, checked: the client settings, the topic every row goes
    to (the option ``topic``, which overrides a ``topic`` column, as in Spark), and
    ``exactlyOnce`` with the topic whose partition 0 carries its markers (tickwheel's
    own; see ``_exactly_once``), and for Avro columns their formats, the schemas given
    as options (``key.schema``, ``value.schema``) and ``auto.register.schemas``."""

    client_config: tuple[tuple[str, str], ...]
    topic: str | None
    exactly_once: bool = False
    marker_topic: str | None = None
    formats: RecordFormats = RecordFormats()
    key_schema: str | None = None
    value_schema: str | None = None
    auto_register: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Check and parse a sink's options; raises ``SparkKafkaError`` naming the option."""
        opts = {k.lower(): v for k, v in options.items()}
        topic = _topic_option(opts, "topic")
        exactly_once = _boolean(opts, "exactlyonce", "exactlyOnce", default=False)
        marker_topic = _topic_option(opts, "exactlyonce.markertopic", "exactlyOnce.markerTopic")
        client_config = _client_config(opts)
        if marker_topic is not None and not exactly_once:
            raise SparkKafkaError("option exactlyOnce.markerTopic needs exactlyOnce=true")
        if exactly_once:
            marker_topic = marker_topic or topic
            if marker_topic is None:
                raise SparkKafkaError(
                    "exactlyOnce=true needs the option topic or exactlyOnce.markerTopic"
                    " (a topic whose partition 0 carries the markers)"
                )
            if any(name == TRANSACTIONAL_ID for name, _ in client_config):
                raise SparkKafkaError(
                    f"option {CLIENT_PREFIX}{TRANSACTIONAL_ID} is not supported with"
                    " exactlyOnce=true: the sink derives it from the query and partition"
                )
        formats = RecordFormats.parse(opts, topic, "set the option topic")
        schemas: dict[str, str | None] = {}
        for column in ("key", "value"):
            text = opts.get(f"{column}.schema")
            if text is not None and column not in formats.avro_columns():
                raise SparkKafkaError(f"option {column}.schema needs {column}Format=avro")
            schemas[column] = text
        return cls(
            client_config=client_config,
            topic=topic,
            exactly_once=exactly_once,
            marker_topic=marker_topic,
            formats=formats,
            key_schema=schemas["key"],
            value_schema=schemas["value"],
            auto_register=_boolean(
                opts, "auto.register.schemas", "auto.register.schemas", default=True
            ),
        )


def source_formats(options: Mapping[str, str]) -> RecordFormats:
    """A source's key and value formats alone (what its schema depends on), checked."""
    opts = {k.lower(): v for k, v in options.items()}
    return _source_formats(opts, _subscription(opts))


def _source_formats(opts: Mapping[str, str], subscription: Subscription) -> RecordFormats:
    return RecordFormats.parse(
        opts,
        subscription.only_topic(),
        "subscribe or assign exactly one topic (no subscribePattern)",
    )


def _record_format(opts: Mapping[str, str], key: str, name: str) -> str:
    encoding = opts.get(key, BINARY_FORMAT).strip().lower()
    if encoding not in _RECORD_FORMATS:
        raise SparkKafkaError(
            f"option {name} must be binary or avro, got {opts[key]!r}"
            " (JSON Schema and Protobuf records are read as binary)"
        )
    return encoding


def _registry_options(opts: Mapping[str, str]) -> RegistryOptions:
    unknown = sorted(
        key for key in opts if key.startswith(_REGISTRY_PREFIX) and key not in _REGISTRY_SETTINGS
    )
    if unknown:
        raise SparkKafkaError(
            f"option {unknown[0]} is not supported; the schema registry settings are"
            f" {', '.join(_REGISTRY_SETTINGS)}"
        )
    urls = tuple(url.strip() for url in opts.get(REGISTRY_URL, "").split(",") if url.strip())
    if not urls:
        raise SparkKafkaError(f"keyFormat/valueFormat avro needs the option {REGISTRY_URL}")
    for url in urls:
        if not url.lower().startswith(_REGISTRY_SCHEMES):
            raise SparkKafkaError(f"option {REGISTRY_URL}: {url!r} is not an http(s) URL")
    return RegistryOptions(
        urls=urls,
        user_info=opts.get(_REGISTRY_USER_INFO),
        ca_location=opts.get(_REGISTRY_CA_LOCATION),
    )


def _topic_option(opts: Mapping[str, str], key: str, name: str | None = None) -> str | None:
    topic = opts.get(key)
    if topic is not None and not topic.strip():
        raise SparkKafkaError(f"option {name or key} is empty")
    return topic


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
        if name in _JAVA_CLIENT_SETTINGS:
            raise SparkKafkaError(f"option {key} is not supported: {_JAVA_CLIENT_SETTINGS[name]}")
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


_ENDING_OPTIONS = {
    "endingoffsets": "endingOffsets",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "endingtimestamp": "endingTimestamp",
}


def _offset_bound(
    opts: Mapping[str, str], side: str, default: str, *, no_match: int | None
) -> OffsetBound:
    """``side`` ("starting" or "ending")'s bound, from the option that takes precedence."""
    unnamed = EARLIEST if side == "starting" else LATEST
    timestamp_name = f"{side}Timestamp"
    by_timestamp_name = f"{side}OffsetsByTimestamp"
    offsets_name = f"{side}Offsets"
    if timestamp_name.lower() in opts:
        text = opts[timestamp_name.lower()].strip()
        try:
            timestamp_ms = int(text)
        except ValueError:
            raise SparkKafkaError(
                f"option {timestamp_name} must be a time in ms, got {text!r}"
            ) from None
        _check_timestamp(timestamp_ms, f"option {timestamp_name}")
        return OffsetBound(unnamed, timestamp_ms=timestamp_ms, no_match=no_match)
    if by_timestamp_name.lower() in opts:
        what = f"option {by_timestamp_name}"
        stamps = parse_offsets_option(opts[by_timestamp_name.lower()].strip(), what=what)
        if not stamps:
            raise SparkKafkaError(f"{what} names no partition")
        for (topic, partition), timestamp_ms in stamps.items():
            _check_timestamp(timestamp_ms, f"{what}: {topic}-{partition}")
        return OffsetBound(unnamed, timestamps_ms=tuple(stamps.items()), no_match=no_match)
    text = opts.get(offsets_name.lower(), default).strip()
    if text.lower() == "earliest":
        return OffsetBound(EARLIEST)
    if text.lower() == "latest":
        return OffsetBound(LATEST)
    specific = parse_offsets_option(text, what=f"option {offsets_name}")
    if not specific:
        raise SparkKafkaError(f"option {offsets_name} names no partition")
    return OffsetBound(unnamed, tuple(specific.items()))


def _check_timestamp(timestamp_ms: int, what: str) -> None:
    if timestamp_ms < 0:
        raise SparkKafkaError(f"{what}: a timestamp must be at least 0 ms, got {timestamp_ms}")


def _check_batch_bounds(starting: OffsetBound, ending: OffsetBound) -> None:
    # A batch query reads a fixed range: it cannot start at "latest" (nothing to read)
    # nor end at "earliest"; Spark's connector refuses both the same way.
    if starting.default == LATEST or LATEST in starting.per_partition().values():
        raise SparkKafkaError("startingOffsets latest (or -1) is not allowed in a batch query")
    if ending.default == EARLIEST or EARLIEST in ending.per_partition().values():
        raise SparkKafkaError("endingOffsets earliest (or -2) is not allowed in a batch query")
    if starting.timestamp_ms is not None and ending.timestamp_ms is not None:
        if starting.timestamp_ms > ending.timestamp_ms:
            raise SparkKafkaError(
                f"startingTimestamp {starting.timestamp_ms} is after"
                f" endingTimestamp {ending.timestamp_ms}"
            )
        return
    named = sorted(starting.named_partitions() | ending.named_partitions())
    starts, ends = starting.timestamps_for(named), ending.timestamps_for(named)
    for tp in starts.keys() & ends.keys():
        if starts[tp] > ends[tp]:
            raise SparkKafkaError(
                f"{tp[0]}-{tp[1]} starts at timestamp {starts[tp]}, after its end {ends[tp]}"
            )


def _boolean(opts: Mapping[str, str], key: str, name: str, *, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    value = _TRUE_FALSE.get(text.strip().lower())
    if value is None:
        raise SparkKafkaError(f"option {name} must be true or false, got {text!r}")
    return value


def _optional_positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    text = opts.get(key)
    return None if text is None else _positive_int(text, name)


def _time_ms(text: str, name: str) -> int:
    """Spark's time string (``15m``, ``30s``, ``500ms``, ``1000``) in milliseconds."""
    match = _TIME_STRING.fullmatch(text.strip().lower())
    unit = "ms" if match is None or match.group(2) is None else match.group(2)
    if match is None or (unit != "us" and unit not in _TIME_UNITS_MS):
        raise SparkKafkaError(
            f"option {name} must be a time such as 15m, 30s or 500ms, got {text!r}"
        )
    value = int(match.group(1))
    if value < 0:
        raise SparkKafkaError(f"option {name} must not be negative, got {text!r}")
    return value // _US_PER_MS if unit == "us" else value * _TIME_UNITS_MS[unit]


def _positive_int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SparkKafkaError(f"option {name} must be a whole number, got {text!r}") from None
    if value <= 0:
        raise SparkKafkaError(f"option {name} must be positive, got {value}")
    return value
