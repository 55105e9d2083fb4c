"""Authorization as the handlers ask for it: one call per check, Kafka's ``AuthHelper``.

A handler names the operation and the resource its request touches (the rules are
Kafka's ``KafkaApis``, told in each handler's docstring) and answers the failure with
the code of the resource type (``AUTHORIZATION_FAILED``)::

    if not authorize(context, request, AclOperation.WRITE, ResourceType.TOPIC, topic):
        ...  # TOPIC_AUTHORIZATION_FAILED for that topic

The principal and client host come from the connection's ``Session``
(``current_session``); the request's name, audited with each decision, from its kio
class (``ProduceRequest`` -> ``Produce``). Without ``authorizer.class.name`` every
check is one attribute test and allows, as Kafka without an authorizer.

Every handler uses the same calls: the SCRAM credential APIs, for instance,
check ``authorize_cluster(context, request, AclOperation.ALTER)`` (or DESCRIBE) and
answer CLUSTER_AUTHORIZATION_FAILED.

``start_authorizer`` builds the authorizer from the config at start-up and loads its
ACLs (``AclStore``).

Concurrency: event-loop thread only, like the handlers.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kio.schema.errors import ErrorCode

from tickwheel.protocol import DecodedRequest
from tickwheel.security import (
    CLUSTER_NAME,
    AclError,
    AclOperation,
    Action,
    ResourceType,
    authorizer_for,
    current_session,
)
from tickwheel.server._acl_store import AclStore
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server.config._broker import ConfigError

AUTHORIZATION_FAILED: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}
"""The error a request gets when it may not touch a resource of the type."""
OPERATIONS_NOT_ASKED = -(2**31)
"""An authorized-operations field the request did not ask for (Kafka's Int.MinValue)."""
_REQUEST_SUFFIX = "Request"
_TOPIC_CONFIG_RESOURCE = 2
_BROKER_CONFIG_RESOURCE = 4
_BROKER_LOGGER_CONFIG_RESOURCE = 8
_CLIENT_METRICS_CONFIG_RESOURCE = 16
_GROUP_CONFIG_RESOURCE = 32


def request_name(request: DecodedRequest) -> str:
    """Kafka's name of the request's API (``Produce``), as the audit line writes it."""
    return type(request.body).__name__.removesuffix(_REQUEST_SUFFIX)


def authorize(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    ref_count: int = 1,
    log_if_denied: bool = True,
) -> bool:
    """Whether the request's principal may perform ``operation`` on the resource."""
    authorizer = context.authorizer
    if authorizer is None:
        return True
    action = Action(operation, resource_type, name, ref_count, log_if_denied)
    return authorizer.authorize(current_session(), request_name(request), action)


def authorize_cluster(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    *,
    log_if_denied: bool = True,
) -> bool:
    """Whether the request's principal may perform ``operation`` on the cluster."""
    return authorize(
        context,
        request,
        operation,
        ResourceType.CLUSTER,
        CLUSTER_NAME,
        log_if_denied=log_if_denied,
    )


def authorized_names(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    *,
    log_if_denied: bool = True,
) -> set[str]:
    """Those of ``names`` the principal may perform ``operation`` on (one decision per
    distinct name, audited with how often the request names it)."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    if context.authorizer is None:
        return set(counts)
    return {
        name
        for name, count in counts.items()
        if authorize(
            context,
            request,
            operation,
            resource_type,
            name,
            ref_count=count,
            log_if_denied=log_if_denied,
        )
    }


def authorize_by_resource_type(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """Whether the principal may perform ``operation`` on some resource of the type."""
    authorizer = context.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(
        current_session(), request_name(request), operation, resource_type
    )


_CONFIG_RESOURCES: dict[int, ResourceType] = {
    _TOPIC_CONFIG_RESOURCE: ResourceType.TOPIC,
    _BROKER_CONFIG_RESOURCE: ResourceType.CLUSTER,
    _BROKER_LOGGER_CONFIG_RESOURCE: ResourceType.CLUSTER,
    _CLIENT_METRICS_CONFIG_RESOURCE: ResourceType.CLUSTER,
    _GROUP_CONFIG_RESOURCE: ResourceType.GROUP,
}


_SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
}
"""The operations each resource type supports (Kafka's ``AclEntry.supportedOperations``)."""


def authorized_operations(
    context: BrokerContext, request: DecodedRequest, resource_type: ResourceType, name: str
) -> int:
    """The bit set (1 << operation code) of the supported operations the principal may
    perform on the resource, as Metadata and DescribeCluster answer when asked."""
    return sum(
        1 << operation.value
        for operation in _SUPPORTED_OPERATIONS[resource_type]
        if authorize(context, request, operation, resource_type, name, log_if_denied=False)
    )


def cluster_authorized_operations(
    context: BrokerContext, request: DecodedRequest, *, asked: bool
) -> int:
    """The cluster operations the principal may perform, as DescribeCluster and Metadata
    v8-10 answer them: ``OPERATIONS_NOT_ASKED`` unless ``asked``, 0 when the principal
    may not DESCRIBE the cluster (Kafka's ``KafkaApis``)."""
    if not asked:
        return OPERATIONS_NOT_ASKED
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(context, request, ResourceType.CLUSTER, CLUSTER_NAME)


def config_refusal(
    context: BrokerContext,
    request: DecodedRequest,
    operation: AclOperation,
    config_resource_type: int,
    name: str,
) -> ErrorCode | None:
    """The error a DescribeConfigs/AlterConfigs resource (a config resource type code:
    topic 2, broker 4, broker logger 8, client metrics 16, group 32) gets for
    ``operation``, or None: a topic's and a group's configs are authorized on them, the
    others on the cluster, as Kafka; any other type is INVALID_REQUEST (Kafka refuses
    the request), never let through."""
    if context.authorizer is None:
        return None
    resource_type = _CONFIG_RESOURCES.get(config_resource_type)
    if resource_type is None:
        return ErrorCode.invalid_request
    resource_name = CLUSTER_NAME if resource_type == ResourceType.CLUSTER else name
    if authorize(context, request, operation, resource_type, resource_name):
        return None
    return AUTHORIZATION_FAILED[resource_type]


def refusal_message(error_code: ErrorCode) -> str:
    """The message of a ``config_refusal`` error."""
    if error_code == ErrorCode.invalid_request:
        return "Unexpected config resource type."
    return "Authorization failed."


def start_authorizer(context: BrokerState, log_dir: Path) -> None:
    """Build the authorizer ``authorizer.class.name`` names and load its ACLs (before
    the cluster node starts: in a cluster it hooks the node's ACL watch)."""
    config = context.config
    try:
        authorizer = authorizer_for(
            config.authorizer_class_name,
            config.super_users,
            config.allow_everyone_if_no_acl_found,
        )
    except AclError as exc:
        raise ConfigError(str(exc)) from exc
    if authorizer is None:
        return
    store = AclStore(authorizer, log_dir, context.cluster)
    try:
        store.load()
    except AclError as exc:
        raise ConfigError(str(exc)) from exc
    context.authorizer = authorizer
    context.acl_store = store
