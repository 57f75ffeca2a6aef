"""Options several ``strata`` commands share, declared once.

Typer reads a command's options from its function's signature, so options every command of a
family takes would otherwise be repeated in each signature. ``with_options(template, build)``
declares them once: ``template`` is a function whose parameters are the shared options (only
its signature is used); a command decorated with it takes ``ctx`` first and, second, the value
``build(**shared options)`` — a ``Connection`` for the commands that talk to brokers
(``strata.cli.kafka_client.kafka_command``), a ``Selection`` for ``strata acls``. Its other
parameters stay its own options, listed before the shared ones in ``--help``.

A ``CliError`` from ``build`` (a bad ``--command-config``) is reported like the command's own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from strata.cli.errors import reported_errors

R = TypeVar("R")


def with_options(template: Callable[..., object], build: Callable[..., Any]
                 ) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A decorator giving a command ``template``'s options, passed to it as ``build(...)``."""
    shared = list(inspect.signature(template, eval_str=True).parameters.values())

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        ctx, _, *own = inspect.signature(fn, eval_str=True).parameters.values()

        @functools.wraps(fn)
        def command(ctx: typer.Context, **options: Any) -> R:
            with reported_errors(ctx):
                built = build(**{p.name: options.pop(p.name) for p in shared})
            return fn(ctx, built, **options)

        command.__signature__ = inspect.Signature([ctx, *own, *shared])  # type: ignore[attr-defined]
        command.__annotations__ = {}
        return command

    return decorate
