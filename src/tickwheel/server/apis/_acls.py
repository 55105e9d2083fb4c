"""DescribeAcls (key 29), CreateAcls (30), DeleteAcls (31): managing the ACLs.

Kafka's ``AclApis``, at the versions Kafka 4 serves (1-3; v1 brought PREFIXED patterns
and the MATCH/ANY filters, v2 the flexible encoding):

- without an authorizer every answer is SECURITY_DISABLED ("No Authorizer is
  configured"), as Kafka's;
- listing needs DESCRIBE on the cluster, creating and deleting ALTER, else
  CLUSTER_AUTHORIZATION_FAILED (for the whole answer, each creation, each filter);
- a creation Kafka refuses (an unknown or filter-only code, an empty name, a CLUSTER
  resource not named ``kafka-cluster``, a principal that is not ``Type:name``) gets
  INVALID_REQUEST with the reason, the others are stored; a filter holding an unknown
  code gets INVALID_REQUEST;
- DeleteAcls reports every binding it removed under the first filter that matched it;
- when the store fails (a full disk, ZooKeeper gone), the items not yet answered with
  an error get UNKNOWN_SERVER_ERROR, as Kafka's.

Changes go through ``AclStore.update``, one per resource pattern, so they are durable
(the log directory's file, or ZooKeeper) before the answer and seen at once by every
broker's authorizer.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.security import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tickwheel.server._acl_store import AclStore
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_log = logging.getLogger(__name__)
_VERSIONS = VersionRange(1, 3)
_NO_AUTHORIZER = "No Authorizer is configured."


def _filter(item: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(item.resource_type_filter),
        item.resource_name_filter,
        PatternType.from_code(item.pattern_type_filter),
        item.principal_filter,
        item.host_filter,
        AclOperation.from_code(item.operation),
        AclPermissionType.from_code(item.permission_type),
    )


def _binding(item: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(item.resource_type),
            item.resource_name,
            PatternType.from_code(item.resource_pattern_type),
        ),
        AccessControlEntry(
            item.principal,
            item.host,
            AclOperation.from_code(item.operation),
            AclPermissionType.from_code(item.permission_type),
        ),
    )


def _entry_fields(entry: AccessControlEntry) -> dict[str, Any]:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.value,
        "permission_type": entry.permission.value,
    }


async def handle_describe_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """The bindings the filter selects, grouped by resource pattern."""
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [],
    }
    authorizer = context.authorizer
    binding_filter = _filter(request.body)
    if authorizer is None:
        answer.update(error_code=ErrorCode.security_disabled, error_message=_NO_AUTHORIZER)
        return reply(request, answer)
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        answer.update(
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Cluster authorization failed.",
        )
        return reply(request, answer)
    try:
        binding_filter.validate()
    except AclError as exc:
        answer.update(error_code=ErrorCode.invalid_request, error_message=str(exc))
        return reply(request, answer)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.acls(binding_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    answer["resources"] = [
        {
            "resource_type": pattern.resource_type.value,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type.value,
            "acls": [_entry_fields(entry) for entry in entries],
        }
        for pattern, entries in grouped.items()
    ]
    return reply(request, answer)


def _refusal(context: BrokerContext, request: DecodedRequest) -> tuple[ErrorCode, str | None]:
    """The error every item of a CreateAcls/DeleteAcls gets, or none."""
    if context.acl_store is None:
        return ErrorCode.security_disabled, _NO_AUTHORIZER
    if not authorize_cluster(context, request, AclOperation.ALTER):
        return ErrorCode.cluster_authorization_failed, None
    return ErrorCode.none, None


async def handle_create_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """Store each valid binding; one result per creation, in order."""
    body: Any = request.body
    error_code, message = _refusal(context, request)
    store = context.acl_store
    if error_code != ErrorCode.none or store is None:
        refused = [{"error_code": error_code, "error_message": message} for _ in body.creations]
        return reply(request, {"throttle_time": 0, "results": refused})
    results: list[dict[str, Any]] = []
    additions: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for creation in body.creations:
        binding = _binding(creation)
        try:
            binding.validate()
        except AclError as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        additions.setdefault(binding.pattern, set()).add(binding.entry)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    failure = await _apply(store, additions, {})
    if failure is not None:
        for result in results:
            if result["error_code"] == ErrorCode.none:
                result.update(error_code=ErrorCode.unknown_server_error, error_message=failure)
    return reply(request, {"throttle_time": 0, "results": results})


async def handle_delete_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """Remove what each filter selects; each removed binding reported once."""
    body: Any = request.body
    error_code, message = _refusal(context, request)
    store = context.acl_store
    if error_code != ErrorCode.none or store is None:
        refused: list[dict[str, Any]] = [
            {"error_code": error_code, "error_message": message, "matching_acls": []}
            for _ in body.filters
        ]
        return reply(request, {"throttle_time": 0, "filter_results": refused})
    taken: set[AclBinding] = set()
    removals: dict[ResourcePattern, set[AccessControlEntry]] = {}
    results: list[dict[str, Any]] = []
    for item in body.filters:
        binding_filter = _filter(item)
        try:
            binding_filter.validate()
        except AclError as exc:
            results.append(
                {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": str(exc),
                    "matching_acls": [],
                }
            )
            continue
        matched = [b for b in store.authorizer.acls(binding_filter) if b not in taken]
        taken.update(matched)
        for binding in matched:
            removals.setdefault(binding.pattern, set()).add(binding.entry)
        results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [_matching(binding) for binding in matched],
            }
        )
    failure = await _apply(store, {}, removals)
    if failure is not None:
        for result in results:
            if result["error_code"] == ErrorCode.none:
                result.update(
                    error_code=ErrorCode.unknown_server_error,
                    error_message=failure,
                    matching_acls=[],
                )
    return reply(request, {"throttle_time": 0, "filter_results": results})


def _matching(binding: AclBinding) -> dict[str, Any]:
    pattern = binding.pattern
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": pattern.resource_type.value,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type.value,
        **_entry_fields(binding.entry),
    }


async def _apply(
    store: AclStore,
    additions: dict[ResourcePattern, set[AccessControlEntry]],
    removals: dict[ResourcePattern, set[AccessControlEntry]],
) -> str | None:
    """Store the changes, pattern by pattern; the failure that stopped them, if any
    (the file or ZooKeeper refused: the patterns changed before it stay changed)."""
    for pattern in sorted({*additions, *removals}):
        try:
            await store.update(pattern, additions.get(pattern, ()), removals.get(pattern, ()))
        except Exception as exc:
            _log.exception("storing the ACLs of %s failed", pattern)
            return f"storing the ACLs of {pattern} failed: {exc}"
    return None


DESCRIBE_ACLS = ApiSpec(ApiKey.DESCRIBE_ACLS, "DescribeAcls", _VERSIONS, handle_describe_acls)
CREATE_ACLS = ApiSpec(ApiKey.CREATE_ACLS, "CreateAcls", _VERSIONS, handle_create_acls)
DELETE_ACLS = ApiSpec(ApiKey.DELETE_ACLS, "DeleteAcls", _VERSIONS, handle_delete_acls)
ACL_SPECS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
