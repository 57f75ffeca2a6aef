"""What security adds to the cluster metadata: broker endpoints per listener (readable by
older Strata) and SCRAM credentials in a real SQLite metadata store."""

from __future__ import annotations

import json
from pathlib import Path

from strata.broker.cluster.image import BrokerRegistration
from strata.broker.security.credentials import MetadataCredentialStore, credential_key
from strata.broker.security.scram import make_credential
from strata.metadata.factory import open_store


def test_registration_keeps_host_and_port_of_the_first_listener() -> None:
    registration = BrokerRegistration(
        1, "10.0.0.1", 9092, "r1", endpoints=(("PLAINTEXT", "10.0.0.1", 9092),
                                               ("SASL_SSL", "b1.example", 9094)))
    doc = json.loads(registration.encode())
    assert (doc["host"], doc["port"]) == ("10.0.0.1", 9092)
    decoded = BrokerRegistration.decode(registration.encode(), epoch=5)
    assert decoded.endpoints == registration.endpoints and decoded.epoch == 5
    assert decoded.endpoint("SASL_SSL") == ("b1.example", 9094)
    assert decoded.endpoint("SSL") is None


def test_a_registration_without_endpoints_serves_every_listener() -> None:
    old = BrokerRegistration.decode(
        b'{"v": 1, "node_id": 2, "host": "h", "port": 1, "rack": null}', epoch=1)
    assert old.endpoints == () and old.endpoint("ANY") == ("h", 1)
    assert "endpoints" not in json.loads(old.encode())


async def test_credentials_in_the_metadata_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/meta.db")
    try:
        credentials = MetadataCredentialStore(store)
        credential = make_credential("SCRAM-SHA-256", "pw")
        await credentials.put("team/alice", credential)
        assert await credentials.get("SCRAM-SHA-256", "team/alice") == credential
        entry = await store.get(credential_key("SCRAM-SHA-256", "team/alice"))
        assert entry is not None
        assert entry.key == "/strata/credentials/SCRAM-SHA-256/team%2Falice"
        assert set(json.loads(entry.value)) == {  # salted keys only, no password
            "v", "mechanism", "salt", "iterations", "stored_key", "server_key"}
        assert await credentials.users() == {"team/alice": ["SCRAM-SHA-256"]}
        assert await credentials.delete("team/alice")
        assert await credentials.users() == {}
    finally:
        await store.close()
