"""Client-quota entities, their configs, and which one a client's request answers to.

A quota entity is a user, a client id, or a user and a client id, each either named or
the default (``QuotaEntity``: sorted ``(entity type, name)`` pairs, name None for the
default). Its configs are Kafka's quota keys: ``producer_byte_rate`` and
``consumer_byte_rate`` (bytes per second, whole numbers), ``request_percentage``
(percent of one request handler's time per second) and ``controller_mutation_rate``
(partitions created or deleted per second). An entity is kept under its path as
Kafka keeps it in ZooKeeper (``entity_path``): ``users/<user>``,
``users/<user>/clients/<client-id>``, ``clients/<client-id>``, names sanitized as
Kafka's ``Sanitizer`` does and ``<default>`` for a default.

Which quota applies (Kafka's ``DefaultQuotaCallback``): for each key, the first entity
of this order that sets it, for user ``u`` and client id ``c``:

1. ``users/u/clients/c``       2. ``users/u/clients/<default>``   3. ``users/u``
4. ``users/<default>/clients/c``  5. ``users/<default>/clients/<default>``
6. ``users/<default>``          7. ``clients/c``                   8. ``clients/<default>``

The answer carries the metric tags the client's use is counted under, as Kafka's: a
quota of a user alone (3, 6) is shared by every client id of that user (client-id tag
empty), one of a client id alone (7, 8) by every user of it (user tag empty), and
otherwise each (user, client id) pair has its own.

Pure data and functions; safe from any thread.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Final

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
WHOLE_NUMBER_KEYS: Final = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})
QUOTA_KEYS: Final = frozenset(
    {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE}
)

DEFAULT_NAME: Final = "<default>"
"""A default entity's name in its path (a named one is sanitized, so never this)."""

_PATH_PARTS: Final = {USER: "users", CLIENT_ID: "clients"}
_TYPES_BY_PART: Final = {part: entity_type for entity_type, part in _PATH_PARTS.items()}

QuotaEntity = tuple[tuple[str, str | None], ...]
"""An entity: its (type, name) pairs sorted by type; name None: the type's default."""

MetricTags = tuple[str, str]
"""(user, client id) a client's use is counted under; "" for a tag that is shared."""


class QuotaEntityError(ValueError):
    """An entity or a quota config Kafka would refuse; the message names what."""


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of ``pairs``; ``QuotaEntityError`` for an unknown or repeated type, an
    empty name, or an IP mixed with a user or client id."""
    entity: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type not in ENTITY_TYPES:
            raise QuotaEntityError(f"unknown quota entity type {entity_type!r}")
        if entity_type in entity:
            raise QuotaEntityError(f"duplicate quota entity type {entity_type!r}")
        if name == "":
            raise QuotaEntityError(f"empty {entity_type} name (null names the default)")
        entity[entity_type] = name
    if not entity:
        raise QuotaEntityError("a quota entity needs at least one entity type")
    if IP in entity and len(entity) > 1:
        raise QuotaEntityError("an ip quota entity cannot be combined with user or client-id")
    if IP in entity:
        raise QuotaEntityError("ip quotas (connection_creation_rate) are not served")
    return tuple(sorted(entity.items()))


def validate_quota(key: str, value: float) -> None:
    """``QuotaEntityError`` unless ``value`` is a valid ``key`` quota."""
    if key not in QUOTA_KEYS:
        raise QuotaEntityError(f"unknown quota key {key!r}; known: {', '.join(sorted(QUOTA_KEYS))}")
    if not math.isfinite(value) or value <= 0:
        raise QuotaEntityError(f"{key} must be a positive number, not {value}")
    if key in WHOLE_NUMBER_KEYS and value != int(value):
        raise QuotaEntityError(f"{key} must be a whole number of bytes per second, not {value}")


def quota_text(key: str, value: float) -> str:
    """A quota as Kafka writes it in a config: byte rates as whole numbers."""
    return str(int(value)) if key in WHOLE_NUMBER_KEYS else repr(float(value))


def sanitize(name: str) -> str:
    """A name as its path holds it (Kafka's ``Sanitizer``, as ``cluster`` spells users)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def entity_path(entity: QuotaEntity) -> str:
    """Where Kafka keeps ``entity``'s configs, below ``/config``."""
    names = dict(entity)
    parts = []
    for entity_type in (USER, CLIENT_ID):
        if entity_type in names:
            name = names[entity_type]
            parts.append(
                f"{_PATH_PARTS[entity_type]}/{DEFAULT_NAME if name is None else sanitize(name)}"
            )
    return "/".join(parts)


def parse_entity_path(path: str) -> QuotaEntity:
    """The entity kept at ``path`` (``entity_path``'s inverse); ``QuotaEntityError`` if
    it names none."""
    pieces = path.split("/")
    if len(pieces) not in (2, 4):
        raise QuotaEntityError(f"{path!r} is not a quota entity path")
    pairs: list[tuple[str, str | None]] = []
    for part, name in zip(pieces[::2], pieces[1::2], strict=True):
        entity_type = _TYPES_BY_PART.get(part)
        if entity_type is None:
            raise QuotaEntityError(f"{path!r} is not a quota entity path")
        pairs.append((entity_type, None if name == DEFAULT_NAME else urllib.parse.unquote(name)))
    if len(pairs) == 2 and pairs[0][0] != USER:
        raise QuotaEntityError(f"{path!r} is not a quota entity path")
    return make_entity(pairs)


def _candidates(user: str, client_id: str) -> tuple[tuple[QuotaEntity, MetricTags], ...]:
    """The entities a (user, client id) may answer to, in Kafka's order, with the tags
    each counts its use under."""
    return (
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )


def find_quota(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[MetricTags, float] | None:
    """The ``key`` quota that applies to ``user``'s client ``client_id`` and the tags its
    use is counted under, or None when no entity sets it."""
    for entity, tags in _candidates(user, client_id):
        configs = quotas.get(entity)
        if configs is not None and key in configs:
            return tags, configs[key]
    return None
