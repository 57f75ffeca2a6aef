"""The request -> handler registry, the single source of the ApiVersions we advertise.

Owns ``HandlerRegistry``: api key -> (min_version, max_version, handler). The broker registers
one handler per Kafka API (one module per API, Tansu's routing-as-a-list); the connection looks
handlers up by the request header; the ApiVersions answer lists ``version_ranges()``. Because
the advertised ranges are *derived* from what is registered, an API cannot be advertised without
a handler, nor served without being advertised, and no range is typed twice.

Invariants, enforced by ``register``:

- an api key is registered at most once;
- ``0 <= min_version <= max_version`` and kio can decode every request version and encode every
  response version of the range (so ``decode_request`` never meets an advertised version it
  cannot read).

``differences(SUPPORTED_VERSIONS)`` compares the registry with the version table of
``strata.protocol.versions``; the broker's tests assert it is empty. The registry is built once
at start-up and only read afterwards; it has no locks. The handler type is the caller's (the
codec never calls handlers). No bytes are read or written here; ``version_ranges()`` is what
``api_versions`` encodes as ``api_keys => [api_key:INT16 min_version:INT16 max_version:INT16]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

from strata.protocol.api_keys import ApiKey
from strata.protocol.messages import UnknownMessageVersion, request_type, response_type
from strata.protocol.versions import VersionRange

H = TypeVar("H")


@dataclass(frozen=True, slots=True)
class Registration(Generic[H]):
    """One registered API: its advertised version range and its handler."""

    api_key: ApiKey
    versions: VersionRange
    handler: H


class HandlerRegistry(Generic[H]):
    """Handlers by api key, with the version range each one serves."""

    __slots__ = ("_by_key", "_ranges")

    def __init__(self) -> None:
        self._by_key: dict[ApiKey, Registration[H]] = {}
        self._ranges: Mapping[ApiKey, VersionRange] = MappingProxyType({})

    def register(self, api_key: int, min_version: int, max_version: int, handler: H) -> None:
        """Serve ``api_key`` versions ``min_version..max_version`` (inclusive) with ``handler``.

        Raises ``ValueError`` for an unknown api key, a key registered twice, a bad range, or a
        version kio has no request or response class for.
        """
        try:
            key = ApiKey(api_key)
        except ValueError:
            raise ValueError(f"unknown api key {api_key}") from None
        if key in self._by_key:
            raise ValueError(f"{key.name} is already registered ({self._by_key[key].versions})")
        versions = VersionRange(min_version, max_version)
        for version in versions.versions():
            try:
                request_type(key, version)
                response_type(key, version)
            except UnknownMessageVersion as exc:
                raise ValueError(f"{key.name} v{version} cannot be served: {exc}") from None
        self._by_key[key] = Registration(key, versions, handler)
        self._ranges = MappingProxyType(
            {k: self._by_key[k].versions for k in sorted(self._by_key)}
        )

    def handles(self, api_key: int, min_version: int, max_version: int) -> Callable[[H], H]:
        """Decorator form of ``register``; returns the handler unchanged."""

        def decorate(handler: H) -> H:
            self.register(api_key, min_version, max_version, handler)
            return handler

        return decorate

    def lookup(self, api_key: int, api_version: int) -> H | None:
        """The handler serving this version, or None if the key or version is not served."""
        try:
            registration = self._by_key[ApiKey(api_key)]
        except (ValueError, KeyError):
            return None
        return registration.handler if api_version in registration.versions else None

    def version_ranges(self) -> Mapping[ApiKey, VersionRange]:
        """Read-only api key -> served range, sorted by key: what ApiVersions advertises."""
        return self._ranges

    def differences(self, expected: Mapping[ApiKey, VersionRange]) -> list[str]:
        """Human-readable mismatches between the registry and a version table (empty if none)."""
        problems = []
        for key in sorted(set(expected) | set(self._by_key)):
            want = expected.get(key)
            have = self._by_key[key].versions if key in self._by_key else None
            if want == have:
                continue
            if have is None:
                problems.append(f"{key.name}: {want} in the table but no handler is registered")
            elif want is None:
                problems.append(f"{key.name}: handler registered for {have}, not in the table")
            else:
                problems.append(f"{key.name}: handler serves {have}, the table says {want}")
        return problems

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._by_key

    def __iter__(self) -> Iterator[Registration[H]]:
        return iter([self._by_key[key] for key in self._ranges])

    def __len__(self) -> int:
        return len(self._by_key)
