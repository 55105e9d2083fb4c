"""``AclAuthorizer``: Kafka's ACL authorizer, deciding who may do what.

The decision for one action (an operation on a named resource) by a principal from a
host, as Kafka's ``AclAuthorizer`` makes it:

1. a principal named in ``super.users`` may do anything;
2. the ACLs that apply to the resource are the LITERAL ones on its name, the LITERAL
   ones on ``*`` and the PREFIXED ones on any prefix of its name; if there are none
   (for anyone), ``allow.everyone.if.no.acl.found`` decides;
3. a DENY entry for the principal (or ``User:*``), the host (or ``*``) and the
   operation (or ALL) refuses -- DENY wins;
4. otherwise an ALLOW entry for the principal and host allows the operation, ALL, or
   an operation that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE, and
   ALTER_CONFIGS implies DESCRIBE_CONFIGS (implications never widen a DENY);
5. nothing else is allowed.

``authorize_by_resource_type`` answers Kafka's "may the principal do this on *some*
resource of this type" (an idempotent producer without IDEMPOTENT_WRITE on the cluster
may still write if it may write some topic): super users and an allowed literal
probe first; then a DENY on the ``*`` literal refuses, an ALLOW on ``*`` allows, and any
other ALLOW allows unless a DENY on the same literal name, or a PREFIXED DENY on a
prefix of it, covers it.

The ACLs live in per-resource-type maps of name -> entries (one for LITERAL, one for
PREFIXED), so a decision costs a few dict lookups per character of the resource name
at most. Storage is the caller's: the broker persists a change (a file, or ZooKeeper)
and then calls ``set_acls`` with the resource's new entries, on every broker.

Every decision is audited (``_audit``). Kafka's names for this class are accepted in
``authorizer.class.name`` (``authorizer_for``).

Concurrency: event-loop thread only; decisions and changes never interleave.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tickwheel.security._acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
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
from tickwheel.security._audit import log_decision
from tickwheel.security._session import Session

ACL_AUTHORIZER_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
    }
)
"""The values of ``authorizer.class.name`` that select this authorizer."""

_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
_PROBE_NAME = "hardcode"
"""The literal name ``authorize_by_resource_type`` probes first, as Kafka does."""

Entries = frozenset[AccessControlEntry]


@dataclass(frozen=True, slots=True)
class Action:
    """One operation on one LITERAL-named resource, as a request asks for it.

    ``ref_count`` is how many times the request names the resource (audited);
    ``log_if_denied`` False for decisions that only filter what a client sees.
    """

    operation: AclOperation
    resource_type: ResourceType
    name: str
    ref_count: int = 1
    log_if_denied: bool = True


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:a;User:b``)."""
    return frozenset(part.strip() for part in text.split(";") if part.strip())


def authorizer_for(
    class_name: str, super_users: str, allow_everyone_if_no_acl_found: bool
) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` names; None when it is empty (every
    request allowed, as Kafka without an authorizer). ``AclError`` for another class."""
    name = class_name.strip()
    if not name:
        return None
    if name not in ACL_AUTHORIZER_NAMES:
        raise AclError(
            f"authorizer.class.name={name!r}: only Kafka's ACL authorizer is available "
            f"({', '.join(sorted(ACL_AUTHORIZER_NAMES))})"
        )
    return AclAuthorizer(parse_super_users(super_users), allow_everyone_if_no_acl_found)


def _entry_matches(
    entry: AccessControlEntry,
    principal: str,
    host: str,
    operations: frozenset[AclOperation],
    permission: AclPermissionType,
) -> bool:
    return (
        entry.permission == permission
        and entry.principal in (principal, WILDCARD_PRINCIPAL)
        and entry.host in (host, WILDCARD_HOST)
        and (entry.operation in operations or entry.operation == AclOperation.ALL)
    )


class AclAuthorizer:
    """Decides actions from the ACLs it holds; see the module docstring."""

    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[ResourceType, dict[str, Entries]] = {}
        self._prefixed: dict[ResourceType, dict[str, Entries]] = {}

    # -- decisions ------------------------------------------------------------------------

    def authorize(self, session: Session, request_name: str, action: Action) -> bool:
        """Whether the session's principal may perform ``action`` from its host; audited."""
        allowed = self._decide(str(session.principal), session.client_host, action)
        log_decision(
            session,
            request_name,
            action.operation,
            ResourcePattern(action.resource_type, action.name, PatternType.LITERAL),
            allowed=allowed,
            ref_count=action.ref_count,
            log_if_denied=action.log_if_denied,
        )
        return allowed

    def _decide(self, principal: str, host: str, action: Action) -> bool:
        if principal in self.super_users:
            return True
        entries = list(self._applicable(action.resource_type, action.name))
        if not entries:
            return self.allow_everyone_if_no_acl_found
        operation = action.operation
        exact = frozenset({operation})
        if any(_entry_matches(e, principal, host, exact, AclPermissionType.DENY) for e in entries):
            return False
        allowing = _IMPLIED_BY.get(operation, exact)
        return any(
            _entry_matches(e, principal, host, allowing, AclPermissionType.ALLOW) for e in entries
        )

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterator[AccessControlEntry]:
        """Every entry of every pattern that applies to the resource ``name``."""
        literal = self._literal.get(resource_type)
        if literal:
            yield from literal.get(name, ())
            if name != WILDCARD_RESOURCE:
                yield from literal.get(WILDCARD_RESOURCE, ())
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for end in range(1, len(name) + 1):
                yield from prefixed.get(name[:end], ())

    def authorize_by_resource_type(
        self,
        session: Session,
        request_name: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether the principal may perform ``operation`` on some resource of
        ``resource_type`` (Kafka's ``authorizeByResourceType``)."""
        probe = Action(operation, resource_type, _PROBE_NAME, ref_count=0, log_if_denied=False)
        if self.authorize(session, request_name, probe):
            return True
        principal, host = str(session.principal), session.client_host
        exact = frozenset({operation})
        denied: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        allowed: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        for pattern_type, by_name in (
            (PatternType.LITERAL, self._literal.get(resource_type, {})),
            (PatternType.PREFIXED, self._prefixed.get(resource_type, {})),
        ):
            for name, entries in by_name.items():
                for entry in entries:
                    if _entry_matches(entry, principal, host, exact, AclPermissionType.DENY):
                        if pattern_type == PatternType.LITERAL and name == WILDCARD_RESOURCE:
                            return False
                        denied[pattern_type].add(name)
                    elif _entry_matches(entry, principal, host, exact, AclPermissionType.ALLOW):
                        allowed[pattern_type].add(name)
        if WILDCARD_RESOURCE in allowed[PatternType.LITERAL]:
            return True
        for pattern_type, names in allowed.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                if not any(
                    name[:end] in denied[PatternType.PREFIXED] for end in range(1, len(name) + 1)
                ):
                    return True
        return False

    # -- the ACLs ---------------------------------------------------------------------------

    def _table(self, pattern_type: PatternType) -> dict[ResourceType, dict[str, Entries]]:
        return self._literal if pattern_type == PatternType.LITERAL else self._prefixed

    def acls_of(self, pattern: ResourcePattern) -> Entries:
        """The entries bound to exactly ``pattern``."""
        return (
            self._table(pattern.pattern_type)
            .get(pattern.resource_type, {})
            .get(pattern.name, frozenset())
        )

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Make ``entries`` the ACLs of ``pattern`` (none: the pattern has no ACL)."""
        frozen = frozenset(entries)
        by_name = self._table(pattern.pattern_type).setdefault(pattern.resource_type, {})
        if frozen:
            by_name[pattern.name] = frozen
        else:
            by_name.pop(pattern.name, None)

    def replace_all(self, bindings: Iterable[AclBinding]) -> None:
        """Hold exactly ``bindings`` (a store's contents at start-up)."""
        self._literal.clear()
        self._prefixed.clear()
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            grouped.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in grouped.items():
            self.set_acls(pattern, entries)

    def bindings(self) -> Iterator[AclBinding]:
        """Every binding held."""
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for resource_type, by_name in self._table(pattern_type).items():
                for name, entries in by_name.items():
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    for entry in entries:
                        yield AclBinding(pattern, entry)

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``binding_filter`` selects, sorted."""
        return sorted(b for b in self.bindings() if binding_filter.matches(b))
