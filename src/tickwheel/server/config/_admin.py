"""Altering configs: what AlterConfigs (key 33) and IncrementalAlterConfigs (key 44)
share, as Kafka's ``ConfigAdminManager`` and ``ZkAdminManager`` do it.

Each resource of a request is handled alone and answered alone; nothing of a
resource is applied unless all of it is valid:

1. The resource is checked: a topic must exist (UNKNOWN_TOPIC_OR_PARTITION); a broker
   resource names this broker's id or ``""``, the cluster-wide default (anything
   else, and other resource types, INVALID_REQUEST); a group (resource type 32) needs
   a non-empty id but need not exist yet, as in Kafka; a resource named twice in one
   request is refused each time (INVALID_REQUEST), and so is a key named twice.
2. The new override set is computed from the current one: AlterConfigs replaces it
   whole; IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT, the last
   two on list configs only (``cleanup.policy``; INVALID_CONFIG otherwise), starting
   from the current value, override or default.
3. The whole resulting config is validated: for a topic, each override on its own
   and then all of them over the broker's defaults through ``LogConfig`` (an unknown
   name or bad value → INVALID_CONFIG naming the key), the schema validation configs
   (``_schema_validation``) all together, since Redpanda's names alias Confluent's;
   for a broker, in Kafka's order and with Kafka's answers
   (``DynamicBrokerConfig.validateConfigs``): a name Kafka does not define →
   INVALID_CONFIG; one that cannot change while the broker runs (read-only) →
   INVALID_REQUEST "Cannot update these configs dynamically"; a keystore or truststore
   setting without a listener prefix → INVALID_REQUEST; a value not of the config's
   type, or one this broker cannot apply → INVALID_REQUEST naming the key; a
   per-broker config (``sasl.kerberos.min.time.before.relogin``) set as the
   cluster-wide default → INVALID_REQUEST. Every other config Kafka defines as
   dynamic is accepted and stored, used by this broker or not; for a group, unknown
   names or values outside the broker's bounds → INVALID_CONFIG (``_group_configs``).
4. Unless ``validate_only``, the ``BrokerContext`` applies it (live logs, the registry
   or ZooKeeper).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.alter_configs.v2.response import AlterConfigsResourceResponse
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse as IncrementalResourceResponse,
)
from kio.static.primitive import i8

from tickwheel.cluster import DEFAULT_BROKER_ENTITY
from tickwheel.log import LogConfig
from tickwheel.server._authorization import refusal_message
from tickwheel.server._context import BrokerContext
from tickwheel.server.config._broker import BrokerConfig, ConfigError
from tickwheel.server.config._dynamic import is_dynamic_broker_config
from tickwheel.server.config._groups import (
    GROUP_RESOURCE,
    GroupConfigError,
    validate_group_overrides,
)
from tickwheel.server.config._kafka_broker_configs import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    KAFKA_BROKER_CONFIGS,
    TOPIC_CONFIG_TYPES,
    ConfigType,
    UpdateMode,
    broker_config_key,
    check_value,
    listener_base_name,
)
from tickwheel.server.config._schema_validation import SCHEMA_VALIDATION_CONFIG_TYPES

_log = logging.getLogger(__name__)
R = TypeVar("R", AlterConfigsResourceResponse, IncrementalResourceResponse)

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
LIST_CONFIGS = frozenset(
    name
    for name, config_type in (
        *TOPIC_CONFIG_TYPES.items(),
        *((name, key.type) for name, key in KAFKA_BROKER_CONFIGS.items()),
    )
    if config_type is ConfigType.LIST
)
"""Configs whose value is a comma-separated list (Kafka's LIST type): APPEND and
SUBTRACT apply to these only."""
_BROKER_CONFIG_NAMES = frozenset(BrokerConfig().as_properties())
_NUMERIC_TOPIC_CONFIGS = frozenset(
    f.name.replace("_", ".") for f in dataclasses.fields(LogConfig) if f.type == "int"
)
"""Topic configs whose value must be a whole number (Kafka's LONG and INT types)."""


class OpType(enum.IntEnum):
    """IncrementalAlterConfigs operations (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigAlterError(Exception):
    """A resource that cannot be altered as asked: the Kafka error to answer."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource of a request: its type and name."""

    resource_type: int
    name: str


NewOverrides = Callable[[Mapping[str, str], Mapping[str, str]], dict[str, str]]
"""The new override set from the current overrides and the effective values."""


def duplicates(resources: Iterable[Resource]) -> set[Resource]:
    """The resources named more than once."""
    counts = Counter(resources)
    return {resource for resource, count in counts.items() if count > 1}


def check_unique_keys(names: Iterable[str]) -> None:
    """Raise INVALID_REQUEST if a config key is named twice."""
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ConfigAlterError(
            ErrorCode.invalid_request, f"Error due to duplicate config keys: {repeated}"
        )


def replace_all(values: Iterable[tuple[str, str | None]]) -> NewOverrides:
    """AlterConfigs: the given configs become the whole override set."""
    pairs = list(values)
    check_unique_keys(name for name, _ in pairs)
    for name, value in pairs:
        if value is None:
            raise ConfigAlterError(
                ErrorCode.invalid_request, f"Null value not supported for {name}"
            )
    replaced = {name: value for name, value in pairs if value is not None}

    def new_overrides(_current: Mapping[str, str], _effective: Mapping[str, str]) -> dict[str, str]:
        return dict(replaced)

    return new_overrides


def incremental(operations: Iterable[tuple[str, int, str | None]]) -> NewOverrides:
    """IncrementalAlterConfigs: each ``(name, operation, value)`` applied in turn."""
    ops = list(operations)
    check_unique_keys(name for name, _, _ in ops)
    for name, op, value in ops:
        if op not in OpType.__members__.values():
            raise ConfigAlterError(
                ErrorCode.invalid_request, f"Unknown operation {op} for config {name}"
            )
        if op != OpType.DELETE and value is None:
            raise ConfigAlterError(
                ErrorCode.invalid_request, f"Null value not supported for {name}"
            )
        if op in {OpType.APPEND, OpType.SUBTRACT} and name not in LIST_CONFIGS:
            verb = "append" if op == OpType.APPEND else "subtract"
            raise ConfigAlterError(
                ErrorCode.invalid_config,
                f"Config value {verb} is not allowed for config key: {name}",
            )

    def new_overrides(current: Mapping[str, str], effective: Mapping[str, str]) -> dict[str, str]:
        result = dict(current)
        for name, op, value in ops:
            if op == OpType.DELETE:
                result.pop(name, None)
                continue
            assert value is not None
            if op == OpType.SET:
                result[name] = value
                continue
            items = _split(result.get(name, effective.get(name, "")))
            given = _split(value)
            if op == OpType.APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            result[name] = ",".join(items)
        return result

    return new_overrides


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def broker_entity(context: BrokerContext, name: str) -> str:
    """The dynamic-config entity a broker resource names; INVALID_REQUEST for another broker."""
    if name == "":
        return DEFAULT_BROKER_ENTITY
    if name != str(context.broker_id):
        raise ConfigAlterError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {context.broker_id} or empty string, "
            f"but received {name}",
        )
    return name


def _is_integer(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def validate_topic_overrides(context: BrokerContext, overrides: Mapping[str, str]) -> None:
    """Raise INVALID_CONFIG naming the key unless ``overrides`` make a valid topic config."""
    for name, value in overrides.items():
        if name in SCHEMA_VALIDATION_CONFIG_TYPES:
            continue  # Checked together below: they are not the log's.
        if name in _NUMERIC_TOPIC_CONFIGS and not _is_integer(value):
            raise ConfigAlterError(
                ErrorCode.invalid_config,
                f"Invalid value {value} for configuration {name}: Not a number of type LONG",
            )
        try:
            LogConfig.from_properties({name: value})
        except ValueError as exc:
            raise ConfigAlterError(
                ErrorCode.invalid_config, f"Invalid value {value} for configuration {name}: {exc}"
            ) from None
    try:
        context.log_config(overrides)
        context.check_schema_validation(overrides)
    except ValueError as exc:
        raise ConfigAlterError(ErrorCode.invalid_config, f"Invalid topic config: {exc}") from None


def validate_broker_overrides(
    context: BrokerContext, entity: str, overrides: Mapping[str, str]
) -> None:
    """Raise unless ``overrides`` are dynamic broker configs with valid values."""
    unknown = sorted(
        name
        for name in overrides
        if name not in _BROKER_CONFIG_NAMES and broker_config_key(name) is None
    )
    if unknown:
        raise ConfigAlterError(ErrorCode.invalid_config, f"Unknown broker configs: {unknown}")
    _refuse_broker_configs(
        [name for name in overrides if not is_dynamic_broker_config(name)],
        "Cannot update these configs dynamically",
    )
    _refuse_broker_configs(
        [
            name
            for name in overrides
            if (key := KAFKA_BROKER_CONFIGS.get(name)) and key.mode is UpdateMode.PER_LISTENER
        ],
        "These security configs can be dynamically updated only per-listener using "
        "the listener prefix",
    )
    for name, value in overrides.items():
        key = broker_config_key(name)
        problem = None if key is None else check_value(name, key.type, value)
        if problem is not None:
            raise ConfigAlterError(ErrorCode.invalid_request, problem)
    if entity == DEFAULT_BROKER_ENTITY:
        _refuse_broker_configs(
            [name for name in overrides if _per_broker_only(name)],
            "Cannot update these configs at default cluster level, broker id must be specified",
        )
    try:
        preview = context.dynamic.preview(entity, overrides)
        LogConfig.from_properties(preview.topic_defaults())
    except (ConfigError, ValueError) as exc:
        raise ConfigAlterError(
            ErrorCode.invalid_request, f"Invalid dynamic broker config: {exc}"
        ) from None


def _refuse_broker_configs(names: list[str], message: str) -> None:
    if names:
        raise ConfigAlterError(ErrorCode.invalid_request, f"{message}: {sorted(names)}")


def _per_broker_only(name: str) -> bool:
    """Whether ``name`` may be set for one broker only, never as the cluster default."""
    base = listener_base_name(name)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    key = KAFKA_BROKER_CONFIGS.get(name)
    return key is not None and key.mode in {UpdateMode.PER_BROKER, UpdateMode.PER_LISTENER}


async def alter_resource(
    context: BrokerContext,
    resource: Resource,
    new_overrides: NewOverrides,
    *,
    validate_only: bool,
) -> None:
    """Compute, validate and (unless ``validate_only``) apply one resource's change."""
    if resource.resource_type == TOPIC_RESOURCE:
        info = context.topics.topics.get(resource.name)
        if info is None:
            raise ConfigAlterError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {resource.name!r} does not exist",
            )
        effective = context.topic_properties(info.configs)
        overrides = new_overrides(info.configs, effective)
        validate_topic_overrides(context, overrides)
        if not validate_only:
            await context.alter_topic_configs(resource.name, overrides)
    elif resource.resource_type == BROKER_RESOURCE:
        entity = broker_entity(context, resource.name)
        current = context.dynamic.entity_configs(entity)
        overrides = new_overrides(current, context.config.as_properties())
        validate_broker_overrides(context, entity, overrides)
        if not validate_only:
            await context.alter_broker_configs(entity, overrides)
    elif resource.resource_type == GROUP_RESOURCE:
        if not resource.name:
            raise ConfigAlterError(ErrorCode.invalid_request, "a group resource needs a group id")
        broker = context.config.as_properties()
        current = context.group_configs.overrides.get(resource.name, {})
        overrides = new_overrides(current, context.group_configs.effective(resource.name))
        try:
            validate_group_overrides(overrides, broker)
        except GroupConfigError as exc:
            raise ConfigAlterError(ErrorCode.invalid_config, str(exc)) from None
        if not validate_only:
            await context.alter_group_configs(resource.name, overrides)
    else:
        raise ConfigAlterError(
            ErrorCode.invalid_request,
            f"resource type {resource.resource_type} cannot be altered here",
        )


async def alter_each(
    context: BrokerContext,
    requested: Iterable[tuple[Resource, Callable[[], NewOverrides]]],
    answer: type[R],
    *,
    validate_only: bool,
    refusal: Callable[[Resource], ErrorCode | None] = lambda _resource: None,
) -> tuple[R, ...]:
    """Alter each resource; the ``answer`` (the AlterConfigs v2 or IncrementalAlterConfigs
    v1 response entry) of each, in request order. ``refusal`` tells the authorization
    error of a resource the principal may not alter."""
    pairs = list(requested)
    repeated = duplicates(resource for resource, _ in pairs)
    answers = []
    for resource, plan in pairs:
        error_code = ErrorCode.none
        message: str | None = None
        try:
            if resource in repeated:
                raise ConfigAlterError(
                    ErrorCode.invalid_request, "Each resource must appear at most once"
                )
            refused = refusal(resource)
            if refused is not None:
                raise ConfigAlterError(refused, refusal_message(refused))
            await alter_resource(context, resource, plan(), validate_only=validate_only)
        except ConfigAlterError as exc:
            error_code, message = exc.error_code, str(exc)
        except Exception as exc:
            # As Kafka's handler: an unexpected failure (the metadata file cannot be
            # written, ZooKeeper refuses) is this resource's UNKNOWN_SERVER_ERROR, and
            # the other resources are still answered.
            _log.exception("altering the configs of %s failed", resource.name)
            error_code, message = ErrorCode.unknown_server_error, str(exc)
        answers.append(
            answer(
                error_code=error_code,
                error_message=message,
                resource_type=i8(resource.resource_type),
                resource_name=resource.name,
            )
        )
    return tuple(answers)
