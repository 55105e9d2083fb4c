"""AlterConfigs (key 33): replace a topic's or broker's whole set of dynamic configs.

The configs given become the resource's overrides; any override not given is removed
(Kafka's legacy semantics; IncrementalAlterConfigs changes single keys). Checks,
errors and ``validate_only`` as ``_config_admin`` describes them, per resource.

Authorization (Kafka's): ALTER_CONFIGS on the topic, the group, or the cluster for a
broker's configs; else the resource is answered TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED.

Written against v2's classes; ``body_as`` and ``reply`` carry v0 and v1.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import functools

from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation
from tickwheel.server._authorization import config_refusal
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.config._admin import Resource, alter_each, replace_all


async def handle_alter_configs(context: BrokerContext, request: DecodedRequest) -> Response:
    """Replace each resource's configs."""
    body = request.body_as(AlterConfigsRequest)
    requested = [
        (
            Resource(r.resource_type, r.resource_name),
            functools.partial(replace_all, [(c.name, c.value) for c in r.configs]),
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
    return reply(request, AlterConfigsResponse(throttle_time=NO_THROTTLE, responses=responses))


ALTER_CONFIGS = ApiSpec(
    ApiKey.ALTER_CONFIGS, "AlterConfigs", VersionRange(0, 2), handle_alter_configs
)
