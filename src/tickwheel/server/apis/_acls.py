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

The handlers are written against v3's classes; ``body_as`` and ``reply`` carry the
versions before it.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import logging

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
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


def _filter(item: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(item.resource_type_filter),
        item.resource_name_filter,
        PatternType.from_code(item.pattern_type_filter),
        item.principal_filter,
        item.host_filter,
        AclOperation.from_code(item.operation),
        AclPermissionType.from_code(item.permission_type),
    )


def _binding(item: AclCreation) -> AclBinding:
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


def _description(entry: AccessControlEntry) -> AclDescription:
    return AclDescription(
        principal=entry.principal,
        host=entry.host,
        operation=i8(entry.operation.value),
        permission_type=i8(entry.permission.value),
    )


def _described(error_code: ErrorCode, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time=NO_THROTTLE, error_code=error_code, error_message=message, resources=()
    )


async def handle_describe_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """The bindings the filter selects, grouped by resource pattern."""
    authorizer = context.authorizer
    binding_filter = _filter(request.body_as(DescribeAclsRequest))
    if authorizer is None:
        return reply(request, _described(ErrorCode.security_disabled, _NO_AUTHORIZER))
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return reply(
            request,
            _described(ErrorCode.cluster_authorization_failed, "Cluster authorization failed."),
        )
    try:
        binding_filter.validate()
    except AclError as exc:
        return reply(request, _described(ErrorCode.invalid_request, str(exc)))
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.acls(binding_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    resources = tuple(
        DescribeAclsResource(
            resource_type=i8(pattern.resource_type.value),
            resource_name=pattern.name,
            pattern_type=i8(pattern.pattern_type.value),
            acls=tuple(_description(entry) for entry in entries),
        )
        for pattern, entries in grouped.items()
    )
    return reply(
        request,
        DescribeAclsResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            resources=resources,
        ),
    )


def _refusal(context: BrokerContext, request: DecodedRequest) -> tuple[ErrorCode, str | None]:
    """The error every item of a CreateAcls/DeleteAcls gets, or none."""
    if context.acl_store is None:
        return ErrorCode.security_disabled, _NO_AUTHORIZER
    if not authorize_cluster(context, request, AclOperation.ALTER):
        return ErrorCode.cluster_authorization_failed, None
    return ErrorCode.none, None


async def handle_create_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """Store each valid binding; one result per creation, in order."""
    body = request.body_as(CreateAclsRequest)
    error_code, message = _refusal(context, request)
    store = context.acl_store
    if error_code != ErrorCode.none or store is None:
        refused = AclCreationResult(error_code=error_code, error_message=message)
        return reply(
            request,
            CreateAclsResponse(
                throttle_time=NO_THROTTLE, results=tuple(refused for _ in body.creations)
            ),
        )
    results: list[AclCreationResult] = []
    additions: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for creation in body.creations:
        binding = _binding(creation)
        try:
            binding.validate()
        except AclError as exc:
            results.append(
                AclCreationResult(error_code=ErrorCode.invalid_request, error_message=str(exc))
            )
            continue
        additions.setdefault(binding.pattern, set()).add(binding.entry)
        results.append(AclCreationResult(error_code=ErrorCode.none, error_message=None))
    failure = await _apply(store, additions, {})
    if failure is not None:
        failed = AclCreationResult(error_code=ErrorCode.unknown_server_error, error_message=failure)
        results = [failed if r.error_code == ErrorCode.none else r for r in results]
    return reply(request, CreateAclsResponse(throttle_time=NO_THROTTLE, results=tuple(results)))


async def handle_delete_acls(context: BrokerContext, request: DecodedRequest) -> Response:
    """Remove what each filter selects; each removed binding reported once."""
    body = request.body_as(DeleteAclsRequest)
    error_code, message = _refusal(context, request)
    store = context.acl_store
    if error_code != ErrorCode.none or store is None:
        refused = DeleteAclsFilterResult(
            error_code=error_code, error_message=message, matching_acls=()
        )
        return reply(
            request,
            DeleteAclsResponse(
                throttle_time=NO_THROTTLE, filter_results=tuple(refused for _ in body.filters)
            ),
        )
    taken: set[AclBinding] = set()
    removals: dict[ResourcePattern, set[AccessControlEntry]] = {}
    results: list[DeleteAclsFilterResult] = []
    for item in body.filters:
        binding_filter = _filter(item)
        try:
            binding_filter.validate()
        except AclError as exc:
            results.append(
                DeleteAclsFilterResult(
                    error_code=ErrorCode.invalid_request, error_message=str(exc), matching_acls=()
                )
            )
            continue
        matched = [b for b in store.authorizer.acls(binding_filter) if b not in taken]
        taken.update(matched)
        for binding in matched:
            removals.setdefault(binding.pattern, set()).add(binding.entry)
        results.append(
            DeleteAclsFilterResult(
                error_code=ErrorCode.none,
                error_message=None,
                matching_acls=tuple(_matching(binding) for binding in matched),
            )
        )
    failure = await _apply(store, {}, removals)
    if failure is not None:
        failed = DeleteAclsFilterResult(
            error_code=ErrorCode.unknown_server_error, error_message=failure, matching_acls=()
        )
        results = [failed if r.error_code == ErrorCode.none else r for r in results]
    return reply(
        request, DeleteAclsResponse(throttle_time=NO_THROTTLE, filter_results=tuple(results))
    )


def _matching(binding: AclBinding) -> DeleteAclsMatchingAcl:
    pattern, entry = binding.pattern, binding.entry
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=i8(pattern.resource_type.value),
        resource_name=pattern.name,
        pattern_type=i8(pattern.pattern_type.value),
        principal=entry.principal,
        host=entry.host,
        operation=i8(entry.operation.value),
        permission_type=i8(entry.permission.value),
    )


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
