"""CreateTopics (key 19): validate, then create topics (or only validate).

Kafka's checks, each answered per topic: an illegal name → INVALID_TOPIC_EXCEPTION;
an existing topic → TOPIC_ALREADY_EXISTS; a topic named twice in one request →
INVALID_REQUEST; partitions < 1 (other than -1, the default) → INVALID_PARTITIONS;
replication factor < 1 (other than -1), or more replicas than this one broker →
INVALID_REPLICATION_FACTOR; a manual assignment naming another broker →
INVALID_REPLICA_ASSIGNMENT; an unknown or invalid config → INVALID_CONFIG.
On a single node, partitions beyond what the process's file-descriptor budget can
hold (each log keeps a file open) → POLICY_VIOLATION before anything is created: the
count itself is legal in Kafka, it is this broker's resources that refuse it, and the
error is not retriable. If creating still fails with an ``OSError`` (a full disk, the
descriptors taken meanwhile), the partitions made so far are removed and the topic
gets KAFKA_STORAGE_ERROR, Kafka's answer when a log directory fails, which clients
may retry. ``validate_only`` runs every check and creates nothing.

Cost on one broker: linear in the partitions asked for. The descriptor budget is
counted once per request, the topics file (``tickwheel-metadata.json``) is written
once per request rather than once per topic, and each log directory is fsynced once
per request, making every new partition directory durable together. In a cluster, replicas are
assigned over the live brokers (or checked against them, for a manual assignment)
and the topic is written to ZooKeeper; the answer waits until this broker knows the
new partitions' leaders, as Kafka's does.

Authorization (Kafka's ``handleCreateTopicsRequest``): CREATE on the cluster allows
every topic, else CREATE on each topic; a refused topic is answered
TOPIC_AUTHORIZATION_FAILED (after the duplicate check, before any other); a created
topic's configs are answered only with DESCRIBE_CONFIGS on it (else none, and
``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED, v5+).

Controller mutation quota (KIP-599, ``controller_mutation_rate``): the partitions
created are recorded against the client's quota and the answer carries the throttle
time they earn (its connection muted for it); from v6 a topic met while the client is
already over its quota is refused with THROTTLING_QUOTA_EXCEEDED.

From v7 a created topic's answer carries its topic id (the zero id for ``validate_only``,
which creates none, as Kafka's ZooKeeper-mode broker answers), so a client can describe
it by id straight away.

Written against v7's classes; ``body_as`` and ``reply`` carry v2-v6 (v2-v4 answers have
no configs).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections import Counter

from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v7.response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorize_cluster, authorized_names
from tickwheel.server._cluster import create_cluster_topic
from tickwheel.server._context import STORAGE_ERRORS, BrokerContext
from tickwheel.server._descriptors import partitions_that_fit
from tickwheel.server._topics import topic_name_error
from tickwheel.server.apis._client_quotas import (
    THROTTLING_QUOTA_EXCEEDED_MESSAGE,
    mutation_quota,
    throttle_time,
)
from tickwheel.server.apis._common import ApiSpec, Response, reply, to_ms

USE_DEFAULT = -1
MAX_PARTITIONS_PER_TOPIC = 100_000
"""More partitions than this are refused: each one is a directory and open files on
this one broker (Kafka has no such limit, but spreads partitions over brokers)."""
_DYNAMIC_TOPIC_CONFIG = i8(1)
_DEFAULT_CONFIG = i8(5)
_STRICT_QUOTA_VERSION = 6
"""From this version a client over its controller mutation quota is refused (KIP-599)."""
_NO_CONFIGS = i16(ErrorCode.topic_authorization_failed.value)
"""``topic_config_error_code`` (an int16 in the schema) when configs may not be described."""


class TopicValidationError(Exception):
    """A topic that cannot be created as asked: carries the Kafka error to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def validate_partition_count(count: int) -> None:
    """Raise unless ``count`` partitions is acceptable."""
    if not 1 <= count <= MAX_PARTITIONS_PER_TOPIC:
        raise TopicValidationError(
            ErrorCode.invalid_partitions,
            f"number of partitions must be in [1, {MAX_PARTITIONS_PER_TOPIC}], got {count}",
        )


class DescriptorBudget:
    """The partitions one request may still add under ``RLIMIT_NOFILE``.

    Counted once per request and drawn down topic by topic: counting the open
    descriptors lists ``/proc/self/fd``, which costs per descriptor, so counting per
    topic made a request creating many topics quadratic.
    """

    def __init__(self, context: BrokerContext) -> None:
        # In a cluster partitions spread over brokers; each one checks what it hosts.
        self._spare = None if context.cluster is not None else partitions_that_fit()

    def take(self, new_partitions: int) -> None:
        """Reserve descriptors for ``new_partitions`` more logs, or raise
        ``TopicValidationError`` (POLICY_VIOLATION) if they do not fit."""
        if self._spare is None:
            return
        if new_partitions > self._spare:
            raise TopicValidationError(
                ErrorCode.policy_violation,
                f"{new_partitions} new partitions exceed this broker's file-descriptor "
                f"budget ({self._spare} more fit under RLIMIT_NOFILE)",
            )
        self._spare -= new_partitions


def validate_descriptor_budget(context: BrokerContext, new_partitions: int) -> None:
    """Raise unless this broker has file descriptors for ``new_partitions`` more logs."""
    DescriptorBudget(context).take(new_partitions)


def _failed(name: TopicName, error: TopicValidationError) -> CreatableTopicResult:
    # ``configs`` is null on an error, as Kafka sends it.
    return CreatableTopicResult(
        name=name,
        topic_id=None,
        error_code=error.error_code,
        error_message=str(error),
        configs=None,
    )


def storage_error(exc: Exception) -> TopicValidationError:
    """The error of a topic whose partitions could not be created."""
    return TopicValidationError(
        ErrorCode.kafka_storage_error, f"could not create the partitions' logs: {exc}"
    )


def _validate(
    context: BrokerContext, topic: CreatableTopic, budget: DescriptorBudget
) -> tuple[int, int, dict[str, str]]:
    """The partition count, replication factor and configs, or TopicValidationError."""
    name_error = topic_name_error(topic.name)
    if name_error is not None:
        raise TopicValidationError(ErrorCode.invalid_topic_exception, name_error)
    if topic.name in context.topics.topics:
        raise TopicValidationError(
            ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists"
        )
    if topic.assignments:
        if topic.num_partitions != USE_DEFAULT or topic.replication_factor != USE_DEFAULT:
            raise TopicValidationError(
                ErrorCode.invalid_request,
                "both a replica assignment and partitions/replication factor were given",
            )
        for assignment in topic.assignments:
            if context.cluster is None and list(assignment.broker_ids) != [context.broker_id]:
                raise TopicValidationError(
                    ErrorCode.invalid_replica_assignment,
                    f"partition {assignment.partition_index} must be on broker "
                    f"{context.broker_id} only",
                )
        num_partitions = len(topic.assignments)
        replication_factor = len(topic.assignments[0].broker_ids)
    else:
        num_partitions = (
            context.config.num_partitions
            if topic.num_partitions == USE_DEFAULT
            else topic.num_partitions
        )
        replication_factor = (
            context.config.default_replication_factor
            if topic.replication_factor == USE_DEFAULT
            else topic.replication_factor
        )
    validate_partition_count(num_partitions)
    if context.cluster is None and replication_factor != 1:
        raise TopicValidationError(
            ErrorCode.invalid_replication_factor,
            f"replication factor {replication_factor} is not possible with 1 broker",
        )
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        context.log_config(configs)
        context.check_schema_validation(configs)
    except ValueError as exc:
        raise TopicValidationError(ErrorCode.invalid_config, str(exc)) from None
    budget.take(num_partitions)
    return num_partitions, replication_factor, configs


def _config_entries(
    context: BrokerContext, configs: dict[str, str]
) -> tuple[CreatableTopicConfigs, ...]:
    """Every config of a new topic with ``configs`` as overrides, and its source."""
    return tuple(
        CreatableTopicConfigs(
            name=key,
            value=value,
            read_only=False,
            config_source=_DYNAMIC_TOPIC_CONFIG if key in configs else _DEFAULT_CONFIG,
            is_sensitive=False,
        )
        for key, value in sorted(context.topic_properties(configs).items())
    )


def _created(
    context: BrokerContext,
    name: TopicName,
    partitions: int,
    replication: int,
    configs: dict[str, str],
    *,
    describable: bool,
) -> CreatableTopicResult:
    """A created topic's result, its configs only if the principal may describe them."""
    return CreatableTopicResult(
        name=name,
        topic_id=context.topic_id(name),
        error_code=ErrorCode.none,
        error_message=None,
        topic_config_error_code=i16(0) if describable else _NO_CONFIGS,
        num_partitions=i32(partitions),
        replication_factor=i16(replication),
        configs=_config_entries(context, configs) if describable else (),
    )


async def handle_create_topics(context: BrokerContext, request: DecodedRequest) -> Response:
    """Validate each topic and create the valid ones unless ``validate_only``."""
    if context.cluster is not None:
        return await _create_topics(context, request)
    # One broker: the topics file is written once for the request, after one fsync of
    # each log directory has made every new partition directory durable.
    with context.topics.saves_deferred():
        answer = await _create_topics(context, request)
        context.replica_manager.log_manager.sync_dirs()
    return answer


async def _create_topics(context: BrokerContext, request: DecodedRequest) -> Response:
    body = request.body_as(CreateTopicsRequest)
    counts = Counter(topic.name for topic in body.topics)
    allowed: set[str] = set(counts)
    if context.authorizer is not None and not authorize_cluster(
        context, request, AclOperation.CREATE, log_if_denied=False
    ):
        allowed = authorized_names(
            context, request, AclOperation.CREATE, ResourceType.TOPIC, counts
        )
    budget = DescriptorBudget(context)
    mutations = mutation_quota(context, request, strict_from_version=_STRICT_QUOTA_VERSION)
    results: list[CreatableTopicResult] = []
    for topic in body.topics:
        try:
            if counts[topic.name] > 1:
                raise TopicValidationError(
                    ErrorCode.invalid_request, f"topic {topic.name!r} appears more than once"
                )
            if topic.name not in allowed:
                raise TopicValidationError(
                    ErrorCode.topic_authorization_failed, "Authorization failed."
                )
            partitions, replication, configs = _validate(context, topic, budget)
            if mutations.refused():
                raise TopicValidationError(
                    ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE
                )
        except TopicValidationError as exc:
            results.append(_failed(topic.name, exc))
            continue
        if not body.validate_only:
            mutations.record(partitions)
        if context.cluster is not None:
            error = await create_cluster_topic(
                context,
                topic,
                partitions,
                replication,
                configs,
                validate_only=body.validate_only,
                timeout_ms=to_ms(body.timeout),
            )
            if error is not None:
                refused = TopicValidationError(error.error_code, error.message)
                results.append(_failed(topic.name, refused))
                continue
        elif not body.validate_only:
            try:
                context.create_topic(topic.name, partitions, configs)
            except STORAGE_ERRORS as exc:
                results.append(_failed(topic.name, storage_error(exc)))
                continue
        describable = authorize(
            context,
            request,
            AclOperation.DESCRIBE_CONFIGS,
            ResourceType.TOPIC,
            topic.name,
            log_if_denied=False,
        )
        results.append(
            _created(context, topic.name, partitions, replication, configs, describable=describable)
        )
    return reply(
        request,
        CreateTopicsResponse(
            throttle_time=throttle_time(mutations.throttle_ms()), topics=tuple(results)
        ),
    )


CREATE_TOPICS = ApiSpec(
    ApiKey.CREATE_TOPICS, "CreateTopics", VersionRange(2, 7), handle_create_topics
)
