"""Listener security: which protocol each listener speaks, what it advertises, how brokers log in.

Pure (reads a ``BrokerConfig``, builds values). Owns Kafka's listener rules:

* ``listener.security.protocol.map`` maps each listener *name* to a security protocol
  (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); default
  ``PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL``. A listener name
  missing from the map is a startup error, as in Kafka.
* per-listener settings: ``listener.name.<name>.<key>`` (name lower case) wins over ``<key>``
  (``ssl.keystore.location``, ``sasl.enabled.mechanisms``, ``<mechanism>.sasl.jaas.config``...);
* ``advertised.listeners`` by name; a listener without an entry advertises itself; port 0 follows
  the bound port; an empty or wildcard host becomes this host's name;
* the inter-broker listener: ``inter.broker.listener.name``, else the first listener whose
  protocol is ``security.inter.broker.protocol`` (default PLAINTEXT), else the first listener.
  A follower connects to the leader's endpoint of that name with ``ClientSecurity``: TLS from the
  same ``ssl.*`` settings (the truststore checks the leader; the keystore is our client
  certificate when the leader asks for one) and SASL ``sasl.mechanism.inter.broker.protocol``
  with the username and password of ``listener.name.<name>.<mechanism>.sasl.jaas.config`` (or
  ``sasl.jaas.config``): ``org.apache.kafka...ScramLoginModule required username="u"
  password="p";``.
"""

from __future__ import annotations

import enum
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from strata.broker.config import BrokerConfig, ConfigError, Listener

if TYPE_CHECKING:
    from strata.broker.security.credentials import CredentialStore

DEFAULT_PROTOCOL_MAP: Final = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
SUPPORTED_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


def protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    out: dict[str, SecurityProtocol] = {}
    for item in (config.get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP).split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.strip().partition(":")
        try:
            out[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            known = [p.value for p in SecurityProtocol]
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not "
                              f"NAME:PROTOCOL with a protocol of {known}") from None
        if not sep:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
    return out


def listener_value(config: BrokerConfig, listener: str, key: str) -> str | None:
    """``listener.name.<listener>.<key>`` if set, else ``<key>`` (Kafka's override rule)."""
    specific = config.get(f"listener.name.{listener.lower()}.{key}")
    return specific if specific is not None else config.get(key)


def security_protocol(config: BrokerConfig, listener: str) -> SecurityProtocol:
    protocols = protocol_map(config)
    if listener not in protocols:
        raise ConfigError(f"listener {listener} is not in listener.security.protocol.map")
    return protocols[listener]


def enabled_mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    raw = listener_value(config, listener, "sasl.enabled.mechanisms") or ""
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"sasl.enabled.mechanisms: {mechanism} is not supported "
                              f"(Strata serves {', '.join(SUPPORTED_MECHANISMS)})")
    return mechanisms


@dataclass(eq=False)
class ListenerSecurity:
    """How one listener authenticates; built at startup, shared by its connections."""

    name: str
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    failed_authentication_delay_s: float = 0.1
    credentials: CredentialStore | None = field(default=None, repr=False)


def listener_security(config: BrokerConfig, listener: str,
                      credentials: CredentialStore | None) -> ListenerSecurity:
    from strata.broker.network.tls import server_context

    protocol = security_protocol(config, listener)
    return ListenerSecurity(
        name=listener, protocol=protocol,
        ssl_context=server_context(config, listener) if protocol.uses_tls else None,
        mechanisms=enabled_mechanisms(config, listener) if protocol.uses_sasl else (),
        failed_authentication_delay_s=config.get_int(
            "connection.failed.authentication.delay.ms") / 1000.0,
        credentials=credentials)


def advertised_endpoints(config: BrokerConfig,
                         bound_ports: Mapping[str, int]) -> list[tuple[str, str, int]]:
    """``(listener name, host, port)`` per listener, in ``listeners`` order."""
    advertised = {entry.name: entry for entry in
                  (Listener.parse(item, "advertised.listeners")
                   for item in config.get_list("advertised.listeners"))}
    out = []
    for listener in config.listeners:
        entry = advertised.get(listener.name, listener)
        host = entry.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        out.append((listener.name, host, entry.port or bound_ports.get(listener.name, 0)))
    return out


def inter_broker_listener_name(config: BrokerConfig) -> str:
    name = config.get("inter.broker.listener.name")
    names = [listener.name for listener in config.listeners]
    if name:
        name = name.strip().upper()
        if name not in names:
            raise ConfigError(f"inter.broker.listener.name {name} is not one of listeners")
        return name
    wanted = SecurityProtocol((config.get("security.inter.broker.protocol")
                               or "PLAINTEXT").strip().upper())
    protocols = protocol_map(config)
    return next((n for n in names if protocols.get(n) is wanted), names[0])


_JAAS_OPTION: Final = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_jaas(text: str) -> dict[str, str]:
    """The ``key="value"`` options of a ``sasl.jaas.config`` login module line."""
    return {key: re.sub(r"\\(.)", r"\1", value) for key, value in _JAAS_OPTION.findall(text)}


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How this broker connects to another's inter-broker listener."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


def inter_broker_client_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for a PLAINTEXT inter-broker listener."""
    from strata.broker.network.tls import client_context

    name = inter_broker_listener_name(config)
    protocol = security_protocol(config, name)
    if protocol is SecurityProtocol.PLAINTEXT:
        return None
    context = client_context(config, name) if protocol.uses_tls else None
    if not protocol.uses_sasl:
        return ClientSecurity(ssl_context=context)
    mechanism = (config.get("sasl.mechanism.inter.broker.protocol") or "").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism!r}: set one of "
                          f"{', '.join(SUPPORTED_MECHANISMS)} for the {name} listener")
    jaas = (config.get(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config")
            or listener_value(config, name, "sasl.jaas.config") or "")
    options = parse_jaas(jaas)
    if "username" not in options or "password" not in options:
        raise ConfigError(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config "
                          "must give username=\"...\" password=\"...\" for inter-broker SASL")
    return ClientSecurity(context, mechanism, options["username"], options["password"])
