"""DescribeConfigs (key 32): a topic's or the broker's configuration.

Topics (resource type 2) list every topic config with its value: an override set at
creation (source DYNAMIC_TOPIC_CONFIG) or the broker's default (DEFAULT_CONFIG).
The broker (resource type 4, named by its id) lists every setting: one set by the
properties file, a ``KAFKA_*`` variable or ``--override`` is STATIC_BROKER_CONFIG,
one left at its default DEFAULT_CONFIG (``BrokerConfig.source``).
``configuration_keys`` narrows the list; null means all. Synonyms and documentation
are not kept: those lists are empty and null. Unknown topic →
UNKNOWN_TOPIC_OR_PARTITION; another broker or resource type → INVALID_REQUEST.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.protocol import DecodedRequest, VersionRange
from tickwheel.server._config import ConfigSource
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
_DYNAMIC_TOPIC_CONFIG = 1
_STATIC_BROKER_CONFIG = 4
_DEFAULT_CONFIG = 5
_STRING_TYPE = 2


def _entries(values: dict[str, str], sources: dict[str, int], keys: Any) -> list[dict[str, Any]]:
    wanted = sorted(values) if keys is None else [k for k in keys if k in values]
    return [
        {
            "name": name,
            "value": values[name],
            "read_only": False,
            "config_source": sources[name],
            "is_sensitive": False,
            "synonyms": [],
            "config_type": _STRING_TYPE,
            "documentation": None,
        }
        for name in wanted
    ]


def _describe(context: BrokerContext, resource: Any) -> dict[str, Any]:
    head = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
    if resource.resource_type == TOPIC_RESOURCE:
        info = context.topics.topics.get(resource.resource_name)
        if info is None:
            return {
                **head,
                "error_code": ErrorCode.unknown_topic_or_partition,
                "error_message": f"topic {resource.resource_name!r} does not exist",
                "configs": [],
            }
        values = context.topic_properties(info.configs)
        sources = {
            name: _DYNAMIC_TOPIC_CONFIG if name in info.configs else _DEFAULT_CONFIG
            for name in values
        }
    elif resource.resource_type == BROKER_RESOURCE and resource.resource_name in {
        "",
        str(context.broker_id),
    }:
        config = context.config
        values = config.as_properties()
        sources = {
            name: _DEFAULT_CONFIG
            if config.source(name) is ConfigSource.DEFAULT
            else _STATIC_BROKER_CONFIG
            for name in values
        }
    else:
        return {
            **head,
            "error_code": ErrorCode.invalid_request,
            "error_message": "only topics and this broker can be described",
            "configs": [],
        }
    return {
        **head,
        "error_code": ErrorCode.none,
        "error_message": None,
        "configs": _entries(values, sources, resource.configuration_keys),
    }


async def handle_describe_configs(context: BrokerContext, request: DecodedRequest) -> Response:
    """Describe each requested resource."""
    body: Any = request.body
    return reply(
        request,
        {"throttle_time": 0, "results": [_describe(context, r) for r in body.resources]},
    )


DESCRIBE_CONFIGS = ApiSpec(32, "DescribeConfigs", VersionRange(1, 4), handle_describe_configs)
