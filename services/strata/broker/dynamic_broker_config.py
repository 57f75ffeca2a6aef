"""Which broker configs AlterConfigs / IncrementalAlterConfigs may change, and at which level.

Owns Kafka's dynamic broker config rules (``DynamicBrokerConfig``): the set of keys that are
dynamic at all, which of them are *per-broker* (settable only on a broker id, never on the
cluster default ``""``), the listener-prefixed form ``listener.name.<listener>.<key>``, and the
check of a proposed set of dynamic configs (``check_dynamic_broker_configs``). Pure: no I/O; the
alter handlers persist what passes in the metadata store (``TopicStore.set_broker_configs``)
and push it to the logs.

``DYNAMIC_BROKER_CONFIGS`` is the union of Kafka's groups, named as Kafka names them:

* the broker defaults of topic configs (``DynamicLogConfig``: ``log.retention.ms``... — every
  ``broker_key`` of ``strata.storage.log_config.TOPIC_CONFIGS``, with Kafka's coarser-unit
  synonyms ``log.retention.hours``...);
* the log cleaner (``LogCleaner.ReconfigurableConfigs``), the thread pools
  (``DynamicThreadPool``), ``metric.reporters``, the socket server's connection limits, the
  producer-state settings, and the remote-log ones (``DynamicRemoteLogConfig``);
* the listener settings (``DynamicListenerConfig``: listeners, SSL and SASL settings).

``PER_BROKER_CONFIGS`` (Kafka's ``PerBrokerConfigs``): the listener settings and the keystore /
truststore settings, except the cluster-level connection limits and ``num.network.threads``.
Any ``listener.name.<l>.<key>`` is per-broker too unless ``<key>`` is one of those three.

Rules of ``check_dynamic_broker_configs`` (Kafka's ``validateConfigs``), each an
``InvalidDynamicConfig`` (answered INVALID_CONFIG with Kafka's message):

1. a key neither dynamic nor listener-prefixed: "Cannot update these configs dynamically";
2. a keystore / truststore key without a listener prefix: "These security configs can be
   dynamically updated only per-listener using the listener prefix";
3. a value that does not parse as the key's type (``CONFIG_TYPES``; others are strings);
4. on the cluster default, a per-broker key: "Cannot update these configs at default cluster
   level, broker id must be specified".

Which of these Strata applies while running: the topic-config defaults (re-resolved for every
topic at once) and, read where they are used, the keys ``BrokerState.broker_defaults()`` feeds
to their readers; the others are stored and described like Kafka's, and take effect at the
next start where Strata reads them only at start-up (the cleaner's threads and buffers, the
recovery threads, listeners).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from strata.broker.broker_settings import ConfigType
from strata.broker.config import LOG_DEFAULT_KEYS, UNIT_SYNONYM_KEYS


class InvalidDynamicConfig(ValueError):
    """A proposed dynamic broker config Kafka would refuse (INVALID_CONFIG)."""


DYNAMIC_SECURITY_CONFIGS: Final = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
"""Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``: dynamic only with a listener prefix."""

LOG_CLEANER_CONFIGS: Final = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "message.max.bytes",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
})
THREAD_POOL_CONFIGS: Final = frozenset({
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads",
})
SOCKET_SERVER_CONFIGS: Final = frozenset({
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
    "max.connection.creation.rate",
})
PRODUCER_STATE_CONFIGS: Final = frozenset({
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
})
REMOTE_LOG_CONFIGS: Final = frozenset({
    "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second", "remote.list.offsets.request.timeout.ms",
})
LISTENER_CONFIGS: Final = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})
"""Kafka's ``DynamicListenerConfig.ReconfigurableConfigs``."""

CLUSTER_LEVEL_LISTENER_CONFIGS: Final = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})

REPLICATION_QUOTA_CONFIGS: Final = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
})
"""Kafka's ``DynamicConfig.Broker``: the replication throttles (KIP-73), LONG, at least 0."""

DYNAMIC_BROKER_CONFIGS: Final = (
    LOG_DEFAULT_KEYS | UNIT_SYNONYM_KEYS | DYNAMIC_SECURITY_CONFIGS | LOG_CLEANER_CONFIGS
    | THREAD_POOL_CONFIGS | frozenset({"metric.reporters"}) | LISTENER_CONFIGS
    | SOCKET_SERVER_CONFIGS | PRODUCER_STATE_CONFIGS | REMOTE_LOG_CONFIGS
    | REPLICATION_QUOTA_CONFIGS
)
PER_BROKER_CONFIGS: Final = (
    (DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
)

LISTENER_MECHANISM_CONFIGS: Final = frozenset({
    "sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
    "sasl.server.callback.handler.class", "connections.max.reauth.ms",
})
"""Kafka's ``ListenerMechanismConfigs``: set as ``listener.name.<l>.<mechanism>.<key>``."""

_LISTENER_PREFIXED: Final = re.compile(r"listener\.name\.[^.]*\.(.+)")

CONFIG_TYPES: Final[Mapping[str, ConfigType]] = {
    **dict.fromkeys(("log.cleaner.threads", "log.cleaner.io.buffer.size", "num.io.threads",
                     "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                     "background.threads", "max.connections", "max.connections.per.ip",
                     "max.connection.creation.rate", "num.network.threads",
                     "producer.id.expiration.ms", "remote.fetch.max.wait.ms"), ConfigType.INT),
    **dict.fromkeys(("log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms",
                     "sasl.kerberos.min.time.before.relogin",
                     "remote.log.index.file.cache.total.size.bytes",
                     "remote.log.manager.copy.max.bytes.per.second",
                     "remote.log.manager.fetch.max.bytes.per.second",
                     "remote.list.offsets.request.timeout.ms", "connections.max.reauth.ms",
                     *REPLICATION_QUOTA_CONFIGS),
                    ConfigType.LONG),
    **dict.fromkeys(("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                     "sasl.kerberos.ticket.renew.window.factor",
                     "sasl.kerberos.ticket.renew.jitter", "sasl.login.refresh.window.factor",
                     "sasl.login.refresh.window.jitter"), ConfigType.DOUBLE),
    **dict.fromkeys(("sasl.login.refresh.min.period.seconds",
                     "sasl.login.refresh.buffer.seconds"), ConfigType.SHORT),
    "transaction.partition.verification.enable": ConfigType.BOOLEAN,
    **dict.fromkeys(("ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                     "ssl.keystore.certificate.chain", "ssl.keystore.key",
                     "ssl.truststore.certificates", "sasl.jaas.config"), ConfigType.PASSWORD),
    **dict.fromkeys(("listeners", "advertised.listeners", "listener.security.protocol.map",
                     "ssl.cipher.suites", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
                     "sasl.kerberos.principal.to.local.rules", "metric.reporters"),
                    ConfigType.LIST),
}
"""Kafka's type of the dynamic keys that are not topic-config defaults (STRING otherwise)."""

_SHORT_MAX: Final = 32767
_INT_MAX: Final = 2**31 - 1
_LONG_MAX: Final = 2**63 - 1


def base_name(key: str) -> str:
    """``listener.name.<l>.<key>`` -> ``<key>``; any other key unchanged."""
    match = _LISTENER_PREFIXED.fullmatch(key)
    return match.group(1) if match else key


def is_listener_prefixed(key: str) -> bool:
    return _LISTENER_PREFIXED.fullmatch(key) is not None


def is_per_broker(key: str) -> bool:
    """Settable on a broker id only (Kafka's ``perBrokerConfigs``)."""
    if is_listener_prefixed(key):
        return base_name(key) not in CLUSTER_LEVEL_LISTENER_CONFIGS
    return key in PER_BROKER_CONFIGS


def is_dynamic(key: str) -> bool:
    return key in DYNAMIC_BROKER_CONFIGS or is_listener_prefixed(key)


def config_type(key: str) -> ConfigType:
    """Kafka's type of a dynamic key that is not a topic-config default (listener-prefixed
    keys have their base key's type; ``<mechanism>.sasl.jaas.config`` that of the SASL key)."""
    base = base_name(key)
    mechanism_key = next((m for m in LISTENER_MECHANISM_CONFIGS if base.endswith("." + m)), None)
    return CONFIG_TYPES.get(mechanism_key or base, ConfigType.STRING)


def check_dynamic_broker_configs(configs: Mapping[str, str], *, per_broker: bool) -> None:
    """``InvalidDynamicConfig`` unless Kafka would store ``configs`` as dynamic broker configs
    of a broker id (``per_broker``) or of the cluster default (see the module rules)."""
    _refuse(sorted(k for k in configs if not is_dynamic(k)),
            "Cannot update these configs dynamically")
    _refuse(sorted(k for k in configs if k in DYNAMIC_SECURITY_CONFIGS),
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix")
    for key, value in configs.items():
        _check_type(key, value)
    if not per_broker:
        _refuse(sorted(k for k in configs if is_per_broker(k)),
                "Cannot update these configs at default cluster level, broker id must be "
                "specified")


def _refuse(keys: Iterable[str], message: str) -> None:
    names = list(keys)
    if names:
        raise InvalidDynamicConfig(f"{message}: {', '.join(names)}")


def _check_type(key: str, value: str) -> None:
    kind = config_type(key)
    text = value.strip()
    try:
        if kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
            limit = {ConfigType.SHORT: _SHORT_MAX, ConfigType.INT: _INT_MAX}.get(kind, _LONG_MAX)
            if not -limit - 1 <= int(text) <= limit:
                raise ValueError
        elif kind is ConfigType.DOUBLE:
            float(text)
        elif kind is ConfigType.BOOLEAN and text.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise InvalidDynamicConfig(
            f"Invalid value {value} for configuration {key}: Not a valid "
            f"{kind.name.lower()}") from None
    if key in REPLICATION_QUOTA_CONFIGS and int(text) < 0:
        raise InvalidDynamicConfig(
            f"Invalid value {value} for configuration {key}: Value must be at least 0")
