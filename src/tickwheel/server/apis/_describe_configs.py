"""DescribeConfigs (key 32): a topic's or the broker's configuration, and its sources.

Topics (resource type 2) list every topic config with its effective value. Its
source is the first layer that sets it (``DynamicBrokerConfig``): the topic's own
override (DYNAMIC_TOPIC_CONFIG), else its broker synonym (``retention.ms`` →
``log.retention.ms``) set dynamically for this broker (DYNAMIC_BROKER_CONFIG) or for
all (DYNAMIC_DEFAULT_BROKER_CONFIG), statically (STATIC_BROKER_CONFIG: the properties
file, a ``KAFKA_*`` variable or ``--override``), or left at its default
(DEFAULT_CONFIG). The broker (resource type 4, named by its id) lists every setting
the same way, read-only unless it may change while the broker runs; the name ``""``
lists the cluster-wide dynamic defaults, as Kafka does. A group (resource type 32)
lists every group config: its override (GROUP_CONFIG) or the broker setting that gives
its default (DEFAULT_CONFIG), whether or not the group exists. ``include_synonyms`` adds
the whole chain of layers to each entry, highest precedence first.
``configuration_keys`` narrows the list; null means all. Documentation is not kept
(null). The broker lists every config Kafka's broker defines (``KAFKA_BROKER_CONFIGS``)
besides those tickwheel holds, each with Kafka's type (``config_type``: BOOLEAN, INT,
LONG, LIST, ...; topics and groups too) and read-only unless Kafka may change it while
the broker runs. Passwords (Kafka's PASSWORD type, ``sasl.jaas.config``) are
sensitive: their value is null, as in Kafka. Unknown topic →
UNKNOWN_TOPIC_OR_PARTITION; another broker or resource type → INVALID_REQUEST.

Authorization (Kafka's ``handleDescribeConfigsRequest``): DESCRIBE_CONFIGS on the
topic, the group, or the cluster for a broker's configs; else the resource is answered
TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED.

Written against v4's classes; ``body_as`` and ``reply`` carry v1-v3.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from tickwheel.cluster import DEFAULT_BROKER_ENTITY
from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation
from tickwheel.server._authorization import config_refusal, refusal_message
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.config._admin import BROKER_RESOURCE, TOPIC_RESOURCE
from tickwheel.server.config._broker import SENSITIVE_PROPERTIES
from tickwheel.server.config._dynamic import (
    DescribeSource,
    Synonym,
    is_dynamic_broker_config,
)
from tickwheel.server.config._groups import GROUP_INT_CONFIGS, GROUP_RESOURCE
from tickwheel.server.config._kafka_broker_configs import (
    TOPIC_CONFIG_TYPES,
    ConfigType,
    broker_config_key,
)
from tickwheel.server.config._schema_validation import SCHEMA_VALIDATION_CONFIG_TYPES


def _broker_type(name: str) -> ConfigType:
    key = broker_config_key(name)
    return ConfigType.STRING if key is None else key.type


def _entry(
    name: str,
    value: str | None,
    chain: list[Synonym],
    config_type: ConfigType,
    *,
    read_only: bool,
    synonyms: bool,
) -> DescribeConfigsResourceResult:
    # A secret is described without its value, as Kafka does.
    sensitive = name in SENSITIVE_PROPERTIES or config_type is ConfigType.PASSWORD
    return DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else value,
        read_only=read_only,
        config_source=i8(chain[0].source),
        is_sensitive=sensitive,
        synonyms=tuple(
            DescribeConfigsSynonym(
                name=s.name, value=None if sensitive else s.value, source=i8(s.source)
            )
            for s in chain
            if synonyms
        ),
        config_type=i8(config_type),
        documentation=None,
    )


def _wanted(names: list[str], keys: tuple[str, ...] | None) -> list[str]:
    return sorted(names) if keys is None else [k for k in keys if k in names]


def _result(
    resource: DescribeConfigsResource,
    error_code: ErrorCode,
    message: str | None,
    configs: tuple[DescribeConfigsResourceResult, ...] = (),
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=error_code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )


def _describe(
    context: BrokerContext, resource: DescribeConfigsResource, synonyms: bool
) -> DescribeConfigsResult:
    keys = resource.configuration_keys
    dynamic = context.dynamic
    if resource.resource_type == TOPIC_RESOURCE:
        info = context.topics.topics.get(resource.resource_name)
        if info is None:
            return _result(
                resource,
                ErrorCode.unknown_topic_or_partition,
                f"topic {resource.resource_name!r} does not exist",
            )
        values = context.topic_properties(info.configs)
        entries = tuple(
            _entry(
                name,
                values[name],
                dynamic.topic_chain(name, info.configs, values[name]),
                TOPIC_CONFIG_TYPES.get(name)
                or SCHEMA_VALIDATION_CONFIG_TYPES.get(name, ConfigType.STRING),
                read_only=False,
                synonyms=synonyms,
            )
            for name in _wanted(list(values), keys)
        )
    elif resource.resource_type == BROKER_RESOURCE and resource.resource_name == "":
        defaults = dynamic.entity_configs(DEFAULT_BROKER_ENTITY)
        entries = tuple(
            _entry(
                name,
                defaults[name],
                [Synonym(name, defaults[name], DescribeSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
                _broker_type(name),
                read_only=False,
                synonyms=synonyms,
            )
            for name in _wanted(list(defaults), keys)
        )
    elif resource.resource_type == BROKER_RESOURCE and resource.resource_name == str(
        context.broker_id
    ):
        held = context.config.as_properties()
        entries = tuple(
            _entry(
                name,
                held[name] if name in held else dynamic.value(name),
                dynamic.broker_chain(name),
                _broker_type(name),
                read_only=not is_dynamic_broker_config(name),
                synonyms=synonyms,
            )
            for name in _wanted(dynamic.names(), keys)
        )
    elif resource.resource_type == GROUP_RESOURCE and resource.resource_name:
        overrides = context.group_configs.overrides.get(resource.resource_name, {})
        values = context.group_configs.effective(resource.resource_name)
        entries = tuple(
            _entry(
                name,
                values[name],
                [
                    Synonym(
                        name,
                        values[name],
                        DescribeSource.GROUP_CONFIG
                        if name in overrides
                        else DescribeSource.DEFAULT_CONFIG,
                    )
                ],
                ConfigType.INT if name in GROUP_INT_CONFIGS else ConfigType.STRING,
                read_only=False,
                synonyms=synonyms,
            )
            for name in _wanted(list(values), keys)
        )
    else:
        return _result(
            resource,
            ErrorCode.invalid_request,
            "only topics, groups and this broker can be described",
        )
    return _result(resource, ErrorCode.none, None, entries)


def _refusal(
    context: BrokerContext, request: DecodedRequest, resource: DescribeConfigsResource
) -> ErrorCode | None:
    return config_refusal(
        context,
        request,
        AclOperation.DESCRIBE_CONFIGS,
        resource.resource_type,
        resource.resource_name,
    )


async def handle_describe_configs(context: BrokerContext, request: DecodedRequest) -> Response:
    """Describe each requested resource."""
    body = request.body_as(DescribeConfigsRequest)
    results = tuple(
        _describe(context, r, body.include_synonyms)
        if (refused := _refusal(context, request, r)) is None
        else _result(r, refused, refusal_message(refused))
        for r in body.resources
    )
    return reply(request, DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=results))


DESCRIBE_CONFIGS = ApiSpec(
    ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", VersionRange(1, 4), handle_describe_configs
)
