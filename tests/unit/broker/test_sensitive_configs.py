"""DescribeConfigs never sends a PASSWORD-typed broker setting (``sasl.jaas.config``,
``ssl.keystore.key``...): value null and ``is_sensitive`` true, synonyms too (Kafka's rule)."""

from __future__ import annotations

from pathlib import Path

from strata.broker.broker_settings import ConfigType

from .helpers import broker_state
from .test_config_handlers import BROKER, by_name, describe

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";'


async def test_passwords_are_not_described(tmp_path: Path) -> None:
    state = broker_state(tmp_path, sasl_jaas_config=JAAS)
    configs = by_name(await describe(state, BROKER, "1", synonyms=True))
    jaas = configs["sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert jaas.config_type == ConfigType.PASSWORD
    assert all(s.value is None for s in jaas.synonyms)
    client_auth = configs["ssl.client.auth"]
    assert client_auth.value == "none" and not client_auth.is_sensitive
    assert not any("s3cret" in str(c.value) for c in configs.values())
