"""The ACL model: resource patterns, access control entries, bindings and their filters.

Kafka's ``org.apache.kafka.common.acl`` and ``.resource`` types with their wire codes:

- ``ResourceType`` (TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6,
  USER 7; ANY 1 in filters), ``PatternType`` (LITERAL 3, PREFIXED 4; ANY 1 and MATCH 2
  in filters), ``AclOperation`` (ALL 2 .. TWO_PHASE_COMMIT 15; ANY 1 in filters) and
  ``AclPermissionType`` (DENY 2, ALLOW 3; ANY 1 in filters). A code the enum does not
  know decodes as UNKNOWN (0), which no binding may hold and which makes a filter
  invalid, as in Kafka.
- ``ResourcePattern`` (a type, a name and LITERAL or PREFIXED: ``*`` literal is the
  wildcard resource, ``kafka-cluster`` the cluster's only name) and
  ``AccessControlEntry`` (principal, host, operation, permission; ``User:*`` and host
  ``*`` are wildcards) make an ``AclBinding``.
- ``AclBindingFilter`` selects bindings as DescribeAcls and DeleteAcls do: a null name,
  principal or host and ANY codes match everything; pattern type MATCH selects the
  patterns that would apply to the named resource (the same literal name, the ``*``
  literal, every prefix of it).

The names Kafka writes (``SecurityUtils``'s PascalCase: ``Topic``, ``ClusterAction``,
``Allow``) come with ``pascal_name`` and go back with ``from_name`` (which also takes
the upper-case spelling, as Kafka does).

Concurrency: immutable values, safe anywhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Self

from tickwheel.security._principal import KafkaPrincipal, PrincipalError

WILDCARD_RESOURCE = "*"
"""A literal resource name matching every resource of its type."""
WILDCARD_PRINCIPAL = "User:*"
"""An ACL principal matching every principal."""
WILDCARD_HOST = "*"
"""An ACL host matching every host."""
CLUSTER_NAME = "kafka-cluster"
"""The name of the only CLUSTER resource."""


class AclError(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST)."""


class _KafkaEnum(enum.IntEnum):
    """An enum with Kafka's wire codes and Kafka's PascalCase names."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with wire code ``code``; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def pascal_name(self) -> str:
        """Kafka's ``SecurityUtils`` spelling: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_name(cls, name: str) -> Self:
        """The member named ``name`` (PascalCase or upper case); ``AclError`` if none."""
        for member in cls:
            if name in (member.pascal_name, member.name):
                return member
        raise AclError(f"unknown {cls.__name__} {name!r}")


class ResourceType(_KafkaEnum):
    """What an ACL protects."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    """How an ACL's resource name matches resources."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    """What an ACL allows or denies."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_KafkaEnum):
    """Whether an ACL allows or denies."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_CONCRETE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
_CONCRETE_PATTERNS = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
_CONCRETE_PERMISSIONS = frozenset({AclPermissionType.DENY, AclPermissionType.ALLOW})


def _check_principal(text: str) -> None:
    try:
        KafkaPrincipal.parse(text)
    except PrincipalError as exc:
        raise AclError(str(exc)) from exc


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    """A resource type, a name and how the name matches (LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{self.resource_type.pascal_name}:{self.pattern_type.name}:{self.name}"

    def validate(self) -> None:
        """Raise ``AclError`` unless a binding may hold this pattern (Kafka's rules)."""
        if self.resource_type not in _CONCRETE_TYPES:
            raise AclError(f"resource type {self.resource_type.name} is not a concrete type")
        if self.pattern_type not in _CONCRETE_PATTERNS:
            raise AclError(f"pattern type {self.pattern_type.name} is only for filters")
        if not self.name:
            raise AclError("Invalid empty resource name")
        check_resource_name(self.name)
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")


def check_resource_name(name: str) -> None:
    """Raise ``AclError`` for a resource name with a ``/`` or equal to ``.``/``..``.

    A cluster keeps each pattern's ACLs in a znode named after it, which such a name
    cannot be; a single node refuses them too, so both accept the same ACLs.
    """
    if "/" in name or name in (".", ".."):
        raise AclError(f"Invalid resource name {name!r}: no '/', and not '.' or '..'")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    """Who (principal, host) is allowed or denied which operation."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Raise ``AclError`` unless a binding may hold this entry."""
        if self.operation not in _CONCRETE_OPERATIONS:
            raise AclError(f"operation {self.operation.name} is only for filters")
        if self.permission not in _CONCRETE_PERMISSIONS:
            raise AclError(f"permission type {self.permission.name} is only for filters")
        _check_principal(self.principal)
        if not self.host:
            raise AclError("Invalid empty host")


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Raise ``AclError`` unless CreateAcls may store this binding."""
        self.pattern.validate()
        self.entry.validate()

    def __str__(self) -> str:
        entry = self.entry
        return (
            f"(pattern={self.pattern}, principal={entry.principal}, host={entry.host}, "
            f"operation={entry.operation.name}, permission={entry.permission.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes (None/ANY: any)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Raise ``AclError`` if the filter holds an unknown element (Kafka's ``isUnknown``)."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value.value == 0:
                raise AclError("The filter contains unknown elements")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Whether ``pattern`` passes the resource half of the filter."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if wanted in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Whether ``entry`` passes the entry half of the filter (exact values, no
        wildcard expansion)."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        """Whether the filter selects ``binding``."""
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)
