"""The BROKER_LOGGER config resource: the broker's Python loggers and levels, by Kafka's rules.

Kafka answers DescribeConfigs of a BROKER_LOGGER resource with every log4j logger and its
effective level, and lets IncrementalAlterConfigs change one logger's level until the broker
restarts (``Log4jController``; nothing is persisted). Strata's loggers are Python's
``logging`` loggers, named by module (``strata.broker.server``); the root logger is ``root``,
as in log4j. Levels are spoken in log4j's names both ways (``LEVELS``): Python's WARNING is
WARN, CRITICAL is FATAL, and TRACE (which Python lacks) is DEBUG.

Rules of ``alter_logger_levels`` (Kafka's ``ConfigAdminManager.validateLogLevelConfigs``):

* SET a level of ``LEVELS`` on an existing logger; another level is INVALID_CONFIG;
* DELETE resets a logger to inherit its parent's level (log4j: the root's); deleting the root
  logger's level is INVALID_CONFIG ("Removing the log level of the root logger is not allowed");
* a logger that does not exist is INVALID_CONFIG ("Logger x does not exist!");
* APPEND / SUBTRACT are INVALID_REQUEST (a level is not a list).

Every change is checked first and applied only if all pass, and not at all with
``validate_only``. Mutated on the event loop only (the handler's task); ``logging`` itself is
thread-safe for readers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Final

ROOT_LOGGER: Final = "root"

LEVELS: Final = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                 "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
"""Kafka's (log4j's) level names -> Python's levels."""

_KAFKA_NAMES: Final = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
                       logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"}

SET: Final = 0
DELETE: Final = 1


class LoggerConfigError(ValueError):
    """A refused logger change: ``error_name`` is INVALID_CONFIG or INVALID_REQUEST."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def level_name(level: int) -> str:
    """log4j's name of a Python level (the nearest named level at or below it)."""
    named = [known for known in sorted(_KAFKA_NAMES) if known <= level]
    return _KAFKA_NAMES[named[-1]] if named else "TRACE"


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    existing = logging.Logger.manager.loggerDict.get(name)
    return existing if isinstance(existing, logging.Logger) else None


def logger_levels() -> Iterator[tuple[str, str]]:
    """(logger name, effective level in log4j's name) for the root and every logger, by name."""
    yield ROOT_LOGGER, level_name(logging.getLogger().getEffectiveLevel())
    for name in sorted(logging.Logger.manager.loggerDict):
        found = _logger(name)
        if found is not None:
            yield name, level_name(found.getEffectiveLevel())


def alter_logger_levels(changes: Sequence[tuple[str, int, str | None]], *,
                        validate_only: bool) -> None:
    """Apply (logger name, operation, level) changes; ``LoggerConfigError`` if any is refused
    (then none is applied)."""
    planned: list[tuple[logging.Logger, int]] = []
    for name, operation, value in changes:
        found = _logger(name)
        if found is None:
            raise LoggerConfigError("INVALID_CONFIG", f"Logger {name} does not exist!")
        if operation == DELETE:
            if name == ROOT_LOGGER:
                raise LoggerConfigError("INVALID_CONFIG", "Removing the log level of the root "
                                        "logger is not allowed")
            planned.append((found, logging.NOTSET))
        elif operation == SET:
            level = LEVELS.get((value or "").strip().upper())
            if level is None:
                raise LoggerConfigError(
                    "INVALID_CONFIG", f"Cannot set the log level of {name} to {value} as it is "
                    f"not a supported log level. Valid log levels are {', '.join(LEVELS)}")
            planned.append((found, level))
        else:
            raise LoggerConfigError("INVALID_REQUEST",
                                    f"Operation {operation} is not allowed for the "
                                    "BROKER_LOGGER resource")
    if validate_only:
        return
    for found, level in planned:
        found.setLevel(level)
