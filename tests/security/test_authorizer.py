"""``AclAuthorizer`` against Kafka's rules, examples first, then hypothesis against a
brute-force reference model of the same rules over a plain list of bindings."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.security import (
    ACL_AUTHORIZER_NAMES,
    AUTHORIZER_LOGGER,
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    Action,
    KafkaPrincipal,
    PatternType,
    ResourcePattern,
    ResourceType,
    Session,
    authorizer_for,
    parse_super_users,
)

ALICE = Session(KafkaPrincipal("User", "alice"), "10.0.0.1")
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def binding(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    pattern_type: PatternType = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer(*bindings: AclBinding, allow_everyone: bool = False, **kwargs: str) -> AclAuthorizer:
    result = AclAuthorizer(parse_super_users(kwargs.get("super_users", "")), allow_everyone)
    result.replace_all(bindings)
    return result


def allowed(
    auth: AclAuthorizer, operation: AclOperation, name: str, session: Session = ALICE
) -> bool:
    return auth.authorize(session, "Produce", Action(operation, ResourceType.TOPIC, name))


# -- examples ----------------------------------------------------------------------------


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not allowed(authorizer(), Op.READ, "orders")
    assert allowed(authorizer(allow_everyone=True), Op.READ, "orders")
    # An ACL for someone else on the resource: the resource has ACLs, so no default.
    other = binding("orders", Op.READ, principal="User:bob")
    assert not allowed(authorizer(other, allow_everyone=True), Op.READ, "orders")


def test_super_users_may_do_anything_even_when_denied() -> None:
    auth = authorizer(binding("orders", Op.ALL, DENY), super_users="User:bob; User:alice")
    assert allowed(auth, Op.WRITE, "orders")


def test_deny_wins_over_allow() -> None:
    auth = authorizer(
        binding("orders", Op.WRITE), binding("ord", Op.WRITE, DENY, pattern_type=PREFIXED)
    )
    assert not allowed(auth, Op.WRITE, "orders")


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    auth = authorizer(binding("*", Op.READ), binding("pay", Op.WRITE, pattern_type=PREFIXED))
    assert allowed(auth, Op.READ, "anything")
    assert allowed(auth, Op.WRITE, "payments")
    assert not allowed(auth, Op.WRITE, "orders")


def test_operation_implications() -> None:
    auth = authorizer(binding("t", Op.WRITE), binding("c", Op.ALTER_CONFIGS), binding("x", Op.ALL))
    assert allowed(auth, Op.DESCRIBE, "t")
    assert not allowed(auth, Op.READ, "t")
    assert allowed(auth, Op.DESCRIBE_CONFIGS, "c")
    assert not allowed(auth, Op.DESCRIBE, "c")
    assert allowed(auth, Op.DELETE, "x")
    # A DENY of READ does not deny DESCRIBE.
    denied_read = authorizer(binding("t", Op.READ, DENY), binding("t", Op.DESCRIBE))
    assert allowed(denied_read, Op.DESCRIBE, "t")


def test_wildcard_principal_and_host() -> None:
    auth = authorizer(
        binding("t", Op.READ, principal="User:*", host="10.0.0.1"),
        binding("t", Op.READ, DENY, host="10.0.0.2"),
    )
    assert allowed(auth, Op.READ, "t")
    assert not allowed(auth, Op.READ, "t", Session(KafkaPrincipal("User", "alice"), "10.0.0.2"))
    assert not allowed(auth, Op.READ, "t", Session(KafkaPrincipal("User", "bob"), "10.0.0.9"))


def test_authorize_by_resource_type_examples() -> None:
    def by_type(auth: AclAuthorizer) -> bool:
        return auth.authorize_by_resource_type(
            ALICE, "InitProducerId", Op.WRITE, ResourceType.TOPIC
        )

    assert not by_type(authorizer())
    assert by_type(authorizer(binding("t", Op.WRITE)))
    assert not by_type(authorizer(binding("t", Op.WRITE), binding("t", Op.WRITE, DENY)))
    assert not by_type(
        authorizer(binding("ab", Op.WRITE), binding("a", Op.WRITE, DENY, pattern_type=PREFIXED))
    )
    assert not by_type(authorizer(binding("t", Op.WRITE), binding("*", Op.ALL, DENY)))


def test_authorizer_class_names() -> None:
    assert authorizer_for("", "", allow_everyone_if_no_acl_found=False) is None
    for name in ACL_AUTHORIZER_NAMES:
        assert isinstance(
            authorizer_for(name, "User:a", allow_everyone_if_no_acl_found=True), AclAuthorizer
        )
    with pytest.raises(AclError):
        authorizer_for("com.example.MyAuthorizer", "", allow_everyone_if_no_acl_found=False)


def test_audit_lines(caplog: pytest.LogCaptureFixture) -> None:
    auth = authorizer(binding("orders", Op.READ))
    with caplog.at_level(logging.DEBUG, logger=AUTHORIZER_LOGGER):
        allowed(auth, Op.WRITE, "orders")
        allowed(auth, Op.READ, "orders")
    denied, allowed_line = caplog.records
    assert denied.name == AUTHORIZER_LOGGER
    assert denied.levelno == logging.INFO
    assert denied.getMessage() == (
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.1 on resource "
        "= Topic:LITERAL:orders for request = Produce with resourceRefCount = 1"
    )
    assert allowed_line.levelno == logging.DEBUG
    assert "is Allowed operation = READ" in allowed_line.getMessage()


def test_set_acls_replaces_and_removes() -> None:
    auth = authorizer(binding("t", Op.READ))
    pattern = ResourcePattern(ResourceType.TOPIC, "t", LITERAL)
    auth.set_acls(pattern, [])
    assert list(auth.bindings()) == []
    assert auth.acls_of(pattern) == frozenset()


# -- the reference model -----------------------------------------------------------------

_IMPLIES = {
    Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS},
}


def reference_allows(
    bindings: list[AclBinding],
    super_users: set[str],
    allow_everyone: bool,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Kafka's rules evaluated by brute force over every binding."""
    if principal in super_users:
        return True

    def applies(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type != resource_type:
            return False
        if p.pattern_type == LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    applicable = [b for b in bindings if applies(b)]
    if not applicable:
        return allow_everyone

    def matches(
        b: AclBinding, operations: set[AclOperation], permission: AclPermissionType
    ) -> bool:
        e = b.entry
        return (
            e.permission == permission
            and e.principal in (principal, "User:*")
            and e.host in (host, "*")
            and (e.operation in operations or e.operation == Op.ALL)
        )

    if any(matches(b, {operation}, DENY) for b in applicable):
        return False
    implied = {operation} | _IMPLIES.get(operation, set())
    return any(matches(b, implied, ALLOW) for b in applicable)


NAMES = st.sampled_from(["a", "ab", "abc", "b", "ba", "*"])
PRINCIPALS = st.sampled_from(["User:alice", "User:bob", "User:*"])
HOSTS = st.sampled_from(["10.0.0.1", "10.0.0.2", "*"])
OPERATIONS = st.sampled_from([op for op in Op if op not in (Op.UNKNOWN, Op.ANY)])
TYPES = st.sampled_from([ResourceType.TOPIC, ResourceType.GROUP])
BINDINGS = st.builds(
    lambda name, pattern_type, principal, host, operation, permission, resource_type: AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    ),
    NAMES,
    st.sampled_from([LITERAL, PREFIXED]),
    PRINCIPALS,
    HOSTS,
    OPERATIONS,
    st.sampled_from([ALLOW, DENY]),
    TYPES,
)
SESSIONS = st.builds(
    lambda name, host: Session(KafkaPrincipal("User", name), host),
    st.sampled_from(["alice", "bob", "carol"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
)


@settings(max_examples=400, deadline=None)
@given(
    bindings=st.lists(BINDINGS, max_size=12),
    super_users=st.sets(st.sampled_from(["User:bob", "User:carol"]), max_size=1),
    allow_everyone=st.booleans(),
    session=SESSIONS,
    operation=OPERATIONS,
    resource_type=TYPES,
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "c", "*"]),
)
def test_authorize_agrees_with_the_reference_model(
    bindings: list[AclBinding],
    super_users: set[str],
    allow_everyone: bool,
    session: Session,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> None:
    auth = AclAuthorizer(super_users, allow_everyone)
    auth.replace_all(bindings)
    action = Action(operation, resource_type, name)
    expected = reference_allows(
        bindings,
        super_users,
        allow_everyone,
        str(session.principal),
        session.client_host,
        operation,
        resource_type,
        name,
    )
    assert auth.authorize(session, "Metadata", action) == expected


@settings(max_examples=300, deadline=None)
@given(
    bindings=st.lists(BINDINGS, max_size=12),
    allow_everyone=st.booleans(),
    session=SESSIONS,
    operation=st.sampled_from([Op.READ, Op.WRITE, Op.CREATE, Op.DELETE]),
)
def test_authorize_by_resource_type_is_some_resource_allowed(
    bindings: list[AclBinding], allow_everyone: bool, session: Session, operation: AclOperation
) -> None:
    """For operations nothing implies, "allowed on some resource of the type" is the
    same as some name (those the ACLs name, one past each, and fresh ones) allowed."""
    auth = AclAuthorizer((), allow_everyone)
    auth.replace_all(bindings)
    names = {b.pattern.name for b in bindings}
    candidates = names | {n + "z" for n in names} | {"fresh", "hardcode"}
    some = any(
        reference_allows(
            bindings,
            set(),
            allow_everyone,
            str(session.principal),
            session.client_host,
            operation,
            ResourceType.TOPIC,
            name,
        )
        for name in candidates
    )
    assert (
        auth.authorize_by_resource_type(session, "InitProducerId", operation, ResourceType.TOPIC)
        == some
    )


@settings(max_examples=200, deadline=None)
@given(
    bindings=st.lists(BINDINGS, max_size=12),
    removed=st.lists(BINDINGS, max_size=6),
    resource_type=st.sampled_from([ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP]),
    name=st.one_of(st.none(), NAMES),
    pattern_type=st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    principal=st.one_of(st.none(), PRINCIPALS),
    operation=st.one_of(st.just(Op.ANY), OPERATIONS),
)
def test_the_acls_held_are_the_bindings_given_and_filters_select_as_kafka(
    bindings: list[AclBinding],
    removed: list[AclBinding],
    resource_type: ResourceType,
    name: str | None,
    pattern_type: PatternType,
    principal: str | None,
    operation: AclOperation,
) -> None:
    auth = AclAuthorizer()
    auth.replace_all(bindings)
    for b in removed:
        auth.set_acls(b.pattern, auth.acls_of(b.pattern) - {b.entry})
    held = set(bindings) - set(removed)
    assert set(auth.bindings()) == held
    binding_filter = AclBindingFilter(
        resource_type, name, pattern_type, principal, None, operation, AclPermissionType.ANY
    )
    assert set(auth.acls(binding_filter)) == {b for b in held if binding_filter.matches(b)}
