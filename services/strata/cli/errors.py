"""How every ``strata`` command fails: exit codes and one-line error messages.

Scripts rely on the exit code alone:

* ``EXIT_OK`` (0): the command did what it was asked;
* ``EXIT_KAFKA`` (1): a broker answered with an error, or no broker answered in time;
* ``EXIT_USAGE`` (2): the arguments were wrong (unknown option, bad value, missing argument);
* 130 after Ctrl-C (the shell's convention for SIGINT).

Every error is one line on stderr, prefixed by the command that failed and naming the problem,
never a traceback: ``strata topic create: TOPIC_ALREADY_EXISTS: topic 'x' already exists``.
``OneLineErrorsGroup`` (the root group's class) formats usage errors that way instead of Typer's
usage-plus-panel block; commands raise ``CliError`` inside ``reported_errors``, which prints it
and exits with its code. A failed Kafka call raises ``strata.client.kafka_errors.KafkaClientError``
instead; ``kafka_line`` is the one place it becomes a line: ``NAME: message`` with Kafka's error
name (librdkafka's for its local, negative codes), the subject named when librdkafka's generic
text names nothing, ``cannot reach a broker at HOST:PORT within Ns: <librdkafka's last
reason>`` when no broker answered, and ``no answer about <subject> within Ns`` when the wait
ran out. ``strata`` with no arguments (or ``--help``) still prints the help.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from strata.client.kafka_errors import KafkaClientError

EXIT_OK: Final = 0
EXIT_KAFKA: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130


class CliError(Exception):
    """A failure to report as one line; ``exit_code`` is ``EXIT_KAFKA`` unless it is misuse."""

    def __init__(self, message: str, exit_code: int = EXIT_KAFKA) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def usage_error(message: str) -> CliError:
    """Misuse that only shows once the command runs (e.g. ``alter`` with nothing to change)."""
    return CliError(message, EXIT_USAGE)


def one_line(text: str) -> str:
    """``text`` with its line breaks folded, so an error is always exactly one line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _sentence(text: str) -> str:
    """A message as the tail of our line: no trailing period, lower-case first word."""
    text = text.strip().rstrip(".")
    first = text.split(" ", 1)[0]
    if first[:1].isupper() and not first.isupper() and first[1:].islower():
        text = text[0].lower() + text[1:]
    return text


def kafka_line(exc: KafkaClientError) -> CliError:
    """The ``CliError`` of a failed Kafka call (exit 1)."""
    if exc.unreachable:
        detail = exc.reason if exc.reason is not None else exc.text
        return CliError(f"cannot reach a broker at {exc.bootstrap} within {exc.timeout_s:g}s: "
                        f"{detail}")
    if exc.timed_out or not exc.name:
        return CliError(exc.message)
    message = _sentence(exc.message)
    if exc.generic and exc.subject:
        message = f"{exc.subject}: {message}"
    return CliError(f"{exc.name}: {message}")


@contextmanager
def reported_errors(ctx: typer.Context) -> Iterator[None]:
    """Turn ``CliError``, ``KafkaClientError`` (and Ctrl-C) raised in a command body into a
    line and an exit code."""
    try:
        yield
    except (CliError, KafkaClientError) as raised:
        exc = kafka_line(raised) if isinstance(raised, KafkaClientError) else raised
        typer.echo(f"{ctx.command_path}: {one_line(exc.message)}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo(f"{ctx.command_path}: interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


class OneLineErrorsGroup(TyperGroup):
    """The root group: usage errors become ``<command path>: <problem>`` and exit 2."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode,
                                windows_expand_args, **extra)
        try:
            # Not standalone: Typer returns the code of a ``typer.Exit`` and lets click's
            # exceptions out, so they can be printed here on one line.
            code = super().main(args, prog_name, complete_var, False, windows_expand_args,
                                **extra)
        except NoArgsIsHelpError as exc:
            # With Rich the help was printed while the error was built; without, it is the text.
            if exc.format_message().strip():
                exc.show()
            sys.exit(EXIT_USAGE)
        except UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "strata"
            typer.echo(f"{where}: {one_line(exc.format_message())}", err=True)
            sys.exit(EXIT_USAGE)
        except ClickException as exc:
            typer.echo(f"strata: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("strata: aborted", err=True)
            sys.exit(EXIT_KAFKA)
        sys.exit(code if isinstance(code, int) else EXIT_OK)
