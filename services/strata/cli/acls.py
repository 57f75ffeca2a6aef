"""``strata acls add|list|remove``: the ACLs of a cluster or of a single broker.

Like ``strata users`` (and Kafka's ``kafka-acls.sh --authorizer-properties``), it writes straight
to where brokers read ACLs (``strata.security.acl_store``), so the first ACLs can be
created before any principal is allowed to call CreateAcls:

* ``--metadata-store URL``: a cluster's store (``/strata/acls/...``): every broker applies a
  change within one metadata watch event;
* ``--log-dir DIR``: a single broker's ``acls.json`` (replaced atomically; a running broker
  re-reads it within a second).

A resource is one of ``--topic NAME``, ``--group NAME``, ``--transactional-id NAME`` or
``--cluster``; ``--pattern-type`` is literal (default for ``add``; ``*`` is every resource of the
type) or prefixed (and, to select, any or match: Kafka's filter semantics). ``add`` takes
``--principal User:NAME`` and ``--operation`` (repeatable; Kafka's names: Read, Write, Create,
Delete, Alter, Describe, DescribeConfigs, AlterConfigs, ClusterAction, IdempotentWrite, All),
``--host`` (default ``*``) and ``--deny`` (default: allow). ``list`` and ``remove`` select with
the same options, each one narrowing the selection; ``remove`` needs at least one of them.

Exit codes: 0 done, 1 the store refused (or ``remove`` matched nothing), 2 usage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from strata.cli.errors import CliError, reported_errors, usage_error
from strata.cli.output import OutputFormat, print_json_line, print_table
from strata.cli.shared_options import with_options
from strata.cli.store_access import LogDirOption, StoreOption, run_on_store
from strata.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from strata.security.acl_store import AclStore, FileAclStore, MetadataAclStore

app = typer.Typer(name="acls", help="Kafka ACLs (authorization).", no_args_is_help=True)

T = TypeVar("T")

TopicOption = Annotated[str | None, typer.Option("--topic", help="A topic (or prefix, or *).")]
GroupOption = Annotated[str | None, typer.Option("--group", help="A consumer group.")]
TxnOption = Annotated[str | None, typer.Option("--transactional-id",
                                               help="A transactional id.")]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="The Cluster resource.")]
PrincipalOption = Annotated[str | None, typer.Option(
    "--principal", help="User:NAME (User:* is everyone).")]
HostOption = Annotated[str | None, typer.Option("--host", help="A client address, or *.")]
OperationOption = Annotated[list[str] | None, typer.Option(
    "--operation", "-o", help="Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, "
    "AlterConfigs, ClusterAction, IdempotentWrite or All. Repeatable.")]
PatternOption = Annotated[str | None, typer.Option(
    "--pattern-type", help="literal or prefixed (to select also: any, match).")]


@dataclass(frozen=True, slots=True)
class Selection:
    """The options every ``acls`` command takes: which ACLs, and which store holds them."""

    principal: str | None = None
    operation: list[str] | None = None
    topic: str | None = None
    group: str | None = None
    transactional_id: str | None = None
    cluster: bool = False
    pattern_type: str | None = None
    host: str | None = None
    metadata_store: str | None = None
    log_dir: Path | None = None


def _selection_options(
    principal: PrincipalOption = None,
    operation: OperationOption = None,
    topic: TopicOption = None,
    group: GroupOption = None,
    transactional_id: TxnOption = None,
    cluster: ClusterOption = False,
    pattern_type: PatternOption = None,
    host: HostOption = None,
    metadata_store: StoreOption = None,
    log_dir: LogDirOption = None,
) -> None:
    """The command-line options of ``Selection`` (only its signature is used)."""


_acl_command = with_options(_selection_options, Selection)


def _run(selection: Selection, work: Callable[[AclStore], Awaitable[T]]) -> T:
    in_log_dir: Callable[[Path], AclStore] = FileAclStore
    return run_on_store(selection.metadata_store, selection.log_dir, in_log_dir,
                        MetadataAclStore, work)


def _resource(selection: Selection) -> tuple[ResourceType, str | None]:
    given = [(ResourceType.TOPIC, selection.topic), (ResourceType.GROUP, selection.group),
             (ResourceType.TRANSACTIONAL_ID, selection.transactional_id)]
    chosen = [(t, n) for t, n in given if n is not None]
    if selection.cluster:
        chosen.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if len(chosen) > 1:
        raise usage_error("give at most one of --topic, --group, --transactional-id, --cluster")
    return chosen[0] if chosen else (ResourceType.ANY, None)


def _parse(parse: Callable[[str], T], text: str, option: str) -> T:
    try:
        return parse(text)
    except ValueError as exc:
        raise usage_error(f"{option}: {exc}") from None


@app.command()
@_acl_command
def add(
    ctx: typer.Context,
    selection: Selection,
    deny: Annotated[bool, typer.Option("--deny", help="A DENY ACL (default ALLOW).")] = False,
) -> None:
    """Add ACLs: PRINCIPAL may (or, with --deny, may not) do OPERATIONs on a resource."""
    with reported_errors(ctx):
        resource_type, name = _resource(selection)
        if name is None:
            raise usage_error("name a resource: --topic, --group, --transactional-id or "
                              "--cluster")
        principal, operation = selection.principal, selection.operation
        if principal is None or not operation:
            raise usage_error("--principal and at least one --operation are required")
        pattern = _parse(PatternType.parse, selection.pattern_type or "literal",
                         "--pattern-type")
        permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
        bindings = []
        for op in operation:
            binding = AclBinding(ResourcePattern(resource_type, name, pattern),
                                 AccessControlEntry(principal, selection.host or "*",
                                                    _parse(AclOperation.parse, op, "--operation"),
                                                    permission))
            try:
                binding.validate()
            except ValueError as exc:
                raise usage_error(str(exc)) from None
            bindings.append(binding)
        _run(selection, lambda store: store.create(bindings))
        for binding in bindings:
            typer.echo(f"added {_describe(binding)}")


def _filter(selection: Selection) -> tuple[list[AclBindingFilter], bool]:
    """The filters (one per operation) and whether any option narrowed them."""
    resource_type, name = _resource(selection)
    principal, host, operation = selection.principal, selection.host, selection.operation
    pattern = _parse(PatternType.parse, selection.pattern_type or "any", "--pattern-type")
    ops = [_parse(AclOperation.parse, op, "--operation") for op in operation or ["any"]]
    filters = [AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern),
                                AccessControlEntryFilter(principal, host, op)) for op in ops]
    narrowed = (resource_type is not ResourceType.ANY or principal is not None
                or host is not None or bool(operation) or selection.pattern_type is not None)
    return filters, narrowed


def _describe(binding: AclBinding) -> str:
    p, e = binding.pattern, binding.entry
    return (f"{e.permission_type.kafka_name} {e.principal} {e.operation.kafka_name} from host "
            f"{e.host} on {p.resource_type.kafka_name}:{p.pattern_type.name}:{p.name}")


@app.command("list")
@_acl_command
def list_acls(
    ctx: typer.Context,
    selection: Selection,
    output: Annotated[OutputFormat, typer.Option(
        "--format", help="text or json.")] = OutputFormat.TEXT,
) -> None:
    """List the ACLs the options select (all without options)."""
    with reported_errors(ctx):
        filters, _ = _filter(selection)
        stored, _ = _run(selection, lambda store: store.bindings())
        selected = sorted({b for b in stored if any(f.matches(b) for f in filters)})
        if output is OutputFormat.JSON:
            for b in selected:
                print_json_line({
                    "resource_type": b.pattern.resource_type.kafka_name,
                    "pattern_type": b.pattern.pattern_type.name, "name": b.pattern.name,
                    "principal": b.entry.principal, "host": b.entry.host,
                    "operation": b.entry.operation.kafka_name,
                    "permission_type": b.entry.permission_type.kafka_name})
        else:
            print_table(["RESOURCE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION",
                         "PERMISSION"],
                        [[b.pattern.resource_type.kafka_name, b.pattern.pattern_type.name,
                          b.pattern.name, b.entry.principal, b.entry.host,
                          b.entry.operation.kafka_name, b.entry.permission_type.kafka_name]
                         for b in selected])


@app.command()
@_acl_command
def remove(ctx: typer.Context, selection: Selection) -> None:
    """Remove the ACLs the options select."""
    with reported_errors(ctx):
        filters, narrowed = _filter(selection)
        if not narrowed:
            raise usage_error("select what to remove: --principal, --operation, --host, "
                              "--pattern-type or a resource")
        matched, _ = _run(selection, lambda store: store.delete(filters))
        removed = sorted({b for found in matched for b in found})
        if not removed:
            raise CliError("no ACL matched")
        for binding in removed:
            typer.echo(f"removed {_describe(binding)}")
