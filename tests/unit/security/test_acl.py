"""Kafka's ACL rule: patterns, implication, deny wins, super users, filters, authorized ops."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strata.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_super_users,
    select,
)

ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
Op = AclOperation
TOPIC = ResourceType.TOPIC


def acl(name: str, op: AclOperation, permission: AclPermissionType = ALLOW, *,
        principal: str = "User:alice", host: str = "*",
        pattern: PatternType = PatternType.LITERAL,
        rtype: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern),
                      AccessControlEntry(principal, host, op, permission))


def test_kafka_wire_codes() -> None:
    assert (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
            ResourceType.TRANSACTIONAL_ID) == (2, 3, 4, 5)
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == \
        (1, 2, 3, 4)
    assert (Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE) == \
        (2, 3, 4, 8, 9, 12)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)


def test_parse_kafka_spellings() -> None:
    assert Op.parse("DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert Op.parse("describe_configs") is Op.DESCRIBE_CONFIGS
    assert ResourceType.parse("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert PatternType.parse("3") is PatternType.LITERAL
    assert Op.IDEMPOTENT_WRITE.kafka_name == "IdempotentWrite"
    with pytest.raises(ValueError, match="unknown AclOperation 'Fly'"):
        Op.parse("Fly")


def test_literal_wildcard_and_prefixed_patterns() -> None:
    auth = Authorizer([acl("orders-", Op.WRITE, pattern=PatternType.PREFIXED),
                       acl("audit", Op.READ), acl("*", Op.DESCRIBE)])
    assert auth.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, "orders-eu")
    assert auth.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, "orders-")
    assert not auth.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, "order")
    assert not auth.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, "audit")
    assert auth.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "audit")
    assert auth.authorize("User:alice", "10.0.0.1", Op.DESCRIBE, TOPIC, "anything")
    assert not auth.authorize("User:bob", "10.0.0.1", Op.DESCRIBE, TOPIC, "anything")
    assert not auth.authorize("User:alice", "10.0.0.1", Op.READ, ResourceType.GROUP, "audit")


def test_implications() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        auth = Authorizer([acl("t", op)])
        assert auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
        assert not auth.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    auth = Authorizer([acl("t", Op.ALTER_CONFIGS)])
    assert auth.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")
    auth = Authorizer([acl("t", Op.DESCRIBE)])
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    auth = Authorizer([acl("t", Op.ALL)])
    assert all(auth.authorize("User:alice", "h", op, TOPIC, "t")
               for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE_CONFIGS))


def test_deny_wins_and_deny_all() -> None:
    auth = Authorizer([acl("t", Op.READ), acl("t", Op.READ, DENY, host="10.0.0.9")])
    assert auth.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not auth.authorize("User:alice", "10.0.0.9", Op.READ, TOPIC, "t")
    auth = Authorizer([acl("t", Op.ALL), acl("t", Op.ALL, DENY, principal="User:*")])
    assert not auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    # a deny of Read does not deny Describe, which Read would imply
    auth = Authorizer([acl("t", Op.DESCRIBE), acl("t", Op.READ, DENY)])
    assert auth.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "t")


def test_super_users_and_no_acl_found() -> None:
    supers = parse_super_users(" User:admin ; User:broker;")
    assert supers == {"User:admin", "User:broker"}
    auth = Authorizer([acl("t", Op.READ, DENY, principal="User:*")], super_users=supers)
    assert auth.authorize("User:admin", "h", Op.READ, TOPIC, "t")
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "other")
    open_auth = Authorizer([acl("t", Op.READ, principal="User:bob")],
                           allow_everyone_if_no_acl_found=True)
    assert open_auth.authorize("User:alice", "h", Op.WRITE, TOPIC, "other")
    # an ACL on the resource, even for someone else, closes it
    assert not open_auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    with pytest.raises(ValueError, match="could not parse principal"):
        parse_super_users("admin")


def test_update_replaces_bindings_and_forgets_decisions() -> None:
    auth = Authorizer()
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    auth.update([acl("t", Op.READ)])
    assert auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")
    auth.update([])
    assert not auth.authorize("User:alice", "h", Op.READ, TOPIC, "t")


def test_authorize_any_for_idempotent_producers() -> None:
    auth = Authorizer([acl("orders-", Op.WRITE, pattern=PatternType.PREFIXED)])
    assert auth.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    assert not auth.authorize_any("User:bob", "h", Op.WRITE, TOPIC)
    auth = Authorizer([acl("orders-eu", Op.WRITE),
                       acl("orders-", Op.WRITE, DENY, pattern=PatternType.PREFIXED)])
    assert not auth.authorize_any("User:alice", "h", Op.WRITE, TOPIC)
    auth = Authorizer([acl("t", Op.WRITE), acl("*", Op.ALL, DENY)])
    assert not auth.authorize_any("User:alice", "h", Op.WRITE, TOPIC)


def test_authorized_operations_bits() -> None:
    auth = Authorizer([acl("g", Op.READ, rtype=ResourceType.GROUP)])
    bits = auth.authorized_operations("User:alice", "h", ResourceType.GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_validation() -> None:
    acl("orders-", Op.WRITE, pattern=PatternType.PREFIXED).validate()
    bad = [
        acl("t", Op.ANY),
        acl("t", Op.READ, AclPermissionType.ANY),
        acl("t", Op.READ, principal="alice"),
        acl("t", Op.READ, pattern=PatternType.MATCH),
        acl("t", Op.READ, rtype=ResourceType.ANY),
        acl("other", Op.ALTER, rtype=ResourceType.CLUSTER),
        acl("", Op.READ),
    ]
    for binding in bad:
        with pytest.raises(ValueError):
            binding.validate()
    acl("kafka-cluster", Op.ALTER, rtype=ResourceType.CLUSTER).validate()


def test_filters_any_and_match() -> None:
    lit = acl("orders-eu", Op.WRITE)
    pre = acl("orders-", Op.WRITE, pattern=PatternType.PREFIXED)
    star = acl("*", Op.READ, principal="User:bob")
    grp = acl("orders-eu", Op.READ, rtype=ResourceType.GROUP)
    everything = [lit, pre, star, grp]
    assert select(everything, AclBindingFilter()) == sorted(everything)
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders-eu", PatternType.MATCH))
    assert set(select(everything, match)) == {lit, pre, star}
    exact_any = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, "orders-eu"))
    assert set(select(everything, exact_any)) == {lit, grp}
    prefixed = AclBindingFilter(ResourcePatternFilter(TOPIC, None, PatternType.PREFIXED))
    assert select(everything, prefixed) == [pre]
    by_principal = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:bob"))
    assert select(everything, by_principal) == [star]
    by_op = AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.READ,
                                                            permission_type=ALLOW))
    assert set(select(everything, by_op)) == {star, grp}
    with pytest.raises(ValueError, match="unknown operation"):
        AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN)).validate()


# -- properties ---------------------------------------------------------------------------------

_names = st.text(alphabet="ab-", min_size=1, max_size=5)
_ops = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALL])
_bindings = st.builds(
    lambda name, op, perm, pattern, principal: acl(name, op, perm, pattern=pattern,
                                                   principal=principal),
    st.one_of(_names, st.just("*")), _ops, st.sampled_from([ALLOW, DENY]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]))


def _naive(bindings: list[AclBinding], principal: str, op: AclOperation, name: str) -> bool:
    on = [b for b in bindings if b.pattern.matches(TOPIC, name)]
    if not on:
        return False
    applying = [b.entry for b in on if b.entry.principal in (principal, "User:*")]
    if any(e.permission_type is DENY and e.operation in (op, Op.ALL) for e in applying):
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}}.get(op, set())
    return any(e.permission_type is ALLOW and e.operation in {op, Op.ALL, *implied}
               for e in applying)


@settings(max_examples=300, deadline=None)
@given(st.lists(_bindings, max_size=8), _names, _ops)
def test_index_agrees_with_the_naive_rule(bindings: list[AclBinding], name: str,
                                          op: AclOperation) -> None:
    auth = Authorizer(bindings)
    assert auth.authorize("User:alice", "h", op, TOPIC, name) == \
        _naive(bindings, "User:alice", op, name)


@settings(max_examples=200, deadline=None)
@given(st.lists(_bindings, max_size=8), _names, _ops, _names)
def test_deny_always_wins(bindings: list[AclBinding], name: str, op: AclOperation,
                          deny_prefix: str) -> None:
    if not name.startswith(deny_prefix):
        name = deny_prefix + name
    deny = acl(deny_prefix, op, DENY, pattern=PatternType.PREFIXED)
    auth = Authorizer([*bindings, deny, acl(name, Op.ALL)])
    assert not auth.authorize("User:alice", "h", op, TOPIC, name)


@settings(max_examples=200, deadline=None)
@given(_names, _names)
def test_prefix_matches_exactly_names_starting_with_it(prefix: str, name: str) -> None:
    auth = Authorizer([acl(prefix, Op.WRITE, pattern=PatternType.PREFIXED)])
    assert auth.authorize("User:alice", "h", Op.WRITE, TOPIC, name) == name.startswith(prefix)
