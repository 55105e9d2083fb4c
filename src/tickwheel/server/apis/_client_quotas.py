"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): the client quotas.

Kafka's semantics (``ClientQuotaControlManager``, ``ZkAdminManager``):

- DescribeClientQuotas filters entities by components, one per entity type: match type
  0 (exact: ``match`` names the entity), 1 (default: ``match`` null) or 2 (any named
  entity, not the default; ``match`` null). An entity matches when each component
  matches its name of that type; with ``strict`` it may have no other type. Every
  matching entity with a quota is answered with its values. An unknown entity type, a
  type given twice, or a ``match`` that contradicts its match type is refused whole
  with INVALID_REQUEST.
- AlterClientQuotas sets or removes quota keys of each entry's entity; each entry is
  answered on its own: INVALID_REQUEST for an unknown or repeated entity type, an empty
  name, an unknown key or an invalid value (byte rates are whole numbers, every quota
  positive), naming what. ``validate_only`` checks without changing anything. Entity
  type ``ip`` (connection-rate quotas) is refused too: the broker does not serve it.
- Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS; otherwise
  CLUSTER_AUTHORIZATION_FAILED.

The quotas are kept in the topics registry file (``TopicRegistry.client_quotas``) and
enforced by ``context.quotas`` (``tickwheel.server.quotas``). For the other handlers:
``quota_client`` names the (user, client id) a request's use counts against (the
session's principal name and the header's client id), ``mutation_quota`` gives a topic
request its controller-mutation quota, ``throttle_time`` the answer's field.

Written against v1's classes (v0 is the same with non-flexible encoding).

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import datetime
import logging
from typing import Final

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.alter_client_quotas.v1.request import EntryData as AlterEntry
from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse
from kio.schema.alter_client_quotas.v1.response import EntityData as AlteredEntity
from kio.schema.alter_client_quotas.v1.response import EntryData as AlteredEntry
from kio.schema.describe_client_quotas.v1.request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from kio.schema.describe_client_quotas.v1.response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i32Timedelta

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation, current_session
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.quotas import (
    CLIENT_ID,
    QUOTA_KEYS,
    USER,
    MutationQuota,
    QuotaEntity,
    QuotaEntityError,
    entity_path,
    make_entity,
    validate_quota,
)

_log = logging.getLogger(__name__)

_MATCH_EXACT: Final = 0
_MATCH_DEFAULT: Final = 1
_MATCH_ANY: Final = 2
_FILTER_TYPES: Final = frozenset({USER, CLIENT_ID})


THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."


def quota_client(request: DecodedRequest) -> tuple[str, str]:
    """The (user, client id) the request's use counts against."""
    return current_session().principal.name, request.header.client_id or ""


def throttle_time(throttle_ms: int) -> i32Timedelta:
    """A response's ``throttle_time`` field for ``throttle_ms``."""
    return i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms))


def mutation_quota(
    context: BrokerContext, request: DecodedRequest, *, strict_from_version: int
) -> MutationQuota:
    """The request's use of its client's controller mutation quota, strict from
    ``strict_from_version`` on."""
    return context.quotas.mutation(
        *quota_client(request), strict=request.api_version >= strict_from_version
    )


def _filter(components: tuple[ComponentData, ...]) -> dict[str, tuple[int, str | None]]:
    """The components by entity type; ``QuotaEntityError`` for an invalid one."""
    found: dict[str, tuple[int, str | None]] = {}
    for component in components:
        if component.entity_type not in _FILTER_TYPES:
            raise QuotaEntityError(f"unknown quota entity type {component.entity_type!r}")
        if component.entity_type in found:
            raise QuotaEntityError(f"duplicate quota entity type {component.entity_type!r}")
        match_type = int(component.match_type)
        if match_type == _MATCH_EXACT and component.match is None:
            raise QuotaEntityError(f"an exact match on {component.entity_type} needs a name")
        if match_type in (_MATCH_DEFAULT, _MATCH_ANY) and component.match is not None:
            raise QuotaEntityError(
                f"match type {match_type} on {component.entity_type} takes no name"
            )
        if match_type not in (_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_ANY):
            raise QuotaEntityError(f"unknown match type {match_type}")
        found[component.entity_type] = (match_type, component.match)
    return found


def _matches(
    entity: QuotaEntity, components: dict[str, tuple[int, str | None]], *, strict: bool
) -> bool:
    names = dict(entity)
    if strict and set(names) - set(components):
        return False
    for entity_type, (match_type, match) in components.items():
        if entity_type not in names:
            return False
        name = names[entity_type]
        if match_type == _MATCH_EXACT and name != match:
            return False
        if match_type == _MATCH_DEFAULT and name is not None:
            return False
        if match_type == _MATCH_ANY and name is None:
            return False
    return True


async def handle_describe_client_quotas(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """The quotas of every entity the filter matches."""
    body = request.body_as(DescribeClientQuotasRequest)
    error_code, message, entries = ErrorCode.none, None, None
    if not authorize_cluster(context, request, AclOperation.DESCRIBE_CONFIGS):
        error_code = ErrorCode.cluster_authorization_failed
        message = "DESCRIBE_CONFIGS on the cluster is needed to describe client quotas"
    else:
        try:
            components = _filter(body.components)
        except QuotaEntityError as exc:
            error_code, message = ErrorCode.invalid_request, str(exc)
        else:
            entries = tuple(
                EntryData(
                    entity=tuple(
                        EntityData(entity_type=entity_type, entity_name=name)
                        for entity_type, name in entity
                    ),
                    values=tuple(
                        ValueData(key=key, value=f64(value))
                        for key, value in sorted(quotas.items())
                    ),
                )
                for entity, quotas in sorted(context.quotas.configs.items(), key=_entity_order)
                if _matches(entity, components, strict=body.strict)
            )
    return reply(
        request,
        DescribeClientQuotasResponse(
            throttle_time=NO_THROTTLE,
            error_code=error_code,
            error_message=message,
            entries=entries,
        ),
    )


def _entity_order(item: tuple[QuotaEntity, object]) -> tuple[tuple[str, str], ...]:
    return tuple((entity_type, name or "") for entity_type, name in item[0])


def _validated(entry: AlterEntry) -> QuotaEntity:
    """The entry's entity, its operations checked; ``QuotaEntityError`` for an invalid one."""
    entity = make_entity((e.entity_type, e.entity_name) for e in entry.entity)
    seen: set[str] = set()
    for op in entry.ops:
        if op.key in seen:
            raise QuotaEntityError(f"quota key {op.key!r} given twice")
        seen.add(op.key)
        if op.remove and op.key not in QUOTA_KEYS:
            raise QuotaEntityError(f"unknown quota key {op.key!r}")
        if not op.remove:
            validate_quota(op.key, float(op.value))
    return entity


async def _alter(
    context: BrokerContext, entry: AlterEntry, *, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Check one entry and, unless ``validate_only``, apply it; its error and message."""
    try:
        entity = _validated(entry)
    except QuotaEntityError as exc:
        return ErrorCode.invalid_request, str(exc)
    if validate_only:
        return ErrorCode.none, None
    quotas = dict(context.quotas.configs.get(entity, {}))
    for op in entry.ops:
        if op.remove:
            quotas.pop(op.key, None)
        else:
            quotas[op.key] = float(op.value)
    try:
        await context.alter_client_quotas(entity, quotas)
    except Exception as exc:  # any failure to store (file, ZooKeeper) is this entry's error
        _log.error("could not store the client quotas of %s: %s", entity_path(entity), exc)
        return ErrorCode.unknown_server_error, f"cannot keep the quotas: {exc}"
    return ErrorCode.none, None


async def handle_alter_client_quotas(context: BrokerContext, request: DecodedRequest) -> Response:
    """Set or remove each entry's quotas; one answer per entry."""
    body = request.body_as(AlterClientQuotasRequest)
    allowed = authorize_cluster(context, request, AclOperation.ALTER_CONFIGS)
    answers: list[AlteredEntry] = []
    for entry in body.entries:
        if allowed:
            error_code, message = await _alter(context, entry, validate_only=body.validate_only)
        else:
            error_code = ErrorCode.cluster_authorization_failed
            message = "ALTER_CONFIGS on the cluster is needed to alter client quotas"
        answers.append(
            AlteredEntry(
                error_code=error_code,
                error_message=message,
                entity=tuple(
                    AlteredEntity(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ),
            )
        )
    return reply(
        request, AlterClientQuotasResponse(throttle_time=NO_THROTTLE, entries=tuple(answers))
    )


CLIENT_QUOTA_SPECS: Final = (
    ApiSpec(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        "DescribeClientQuotas",
        VersionRange(0, 1),
        handle_describe_client_quotas,
    ),
    ApiSpec(
        ApiKey.ALTER_CLIENT_QUOTAS,
        "AlterClientQuotas",
        VersionRange(0, 1),
        handle_alter_client_quotas,
    ),
)
