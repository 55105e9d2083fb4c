"""IncrementalAlterConfigs (key 44, KIP-339): change single configs of a topic or broker.

Each config of a resource carries an operation: SET, DELETE, APPEND or SUBTRACT
(the last two for list configs such as ``cleanup.policy``). Checks, errors and
``validate_only`` as ``_config_admin`` describes them, per resource.

Authorization (Kafka's): ALTER_CONFIGS on the topic, the group, or the cluster for a
broker's configs; else the resource is answered TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED.

Written against v1's classes; ``body_as`` and ``reply`` carry v0.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import functools

from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation
from tickwheel.server._authorization import config_refusal
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.config._admin import Resource, alter_each, incremental


async def handle_incremental_alter_configs(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Apply each resource's operations."""
    body = request.body_as(IncrementalAlterConfigsRequest)
    requested = [
        (
            Resource(r.resource_type, r.resource_name),
            functools.partial(
                incremental, [(c.name, c.config_operation, c.value) for c in r.configs]
            ),
        )
        for r in body.resources
    ]
    responses = await alter_each(
        context,
        requested,
        AlterConfigsResourceResponse,
        validate_only=body.validate_only,
        refusal=lambda resource: config_refusal(
            context, request, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.name
        ),
    )
    return reply(
        request, IncrementalAlterConfigsResponse(throttle_time=NO_THROTTLE, responses=responses)
    )


INCREMENTAL_ALTER_CONFIGS = ApiSpec(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "IncrementalAlterConfigs",
    VersionRange(0, 1),
    handle_incremental_alter_configs,
)
