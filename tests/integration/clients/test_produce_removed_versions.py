"""Produce listed from v0 (KIP-896 / KAFKA-18659) keeps older librdkafka compressing.

Debian's kcat links Debian's librdkafka (2.0.x, older than the one in the venv). Such a
librdkafka reads a broker that lists Produce only from v3 as one that takes no compressed
batches, and sends them uncompressed whatever ``compression.codec`` says (with Produce listed
from v3 this test sees codec 0). Strata lists Produce from v0, like
Kafka 4, while refusing v0-v2 on the wire (tests/unit/broker/test_produce_removed_versions.py):
the batches kcat sends with ``compression.codec=lz4`` must arrive lz4-compressed, read back as
the broker stores them (Fetch, batch attributes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strata.storage.compression import CompressionType

from ..broker_process import BrokerProcess
from .wire import api_versions, stored_batches

pytestmark = pytest.mark.integration

KCAT = shutil.which("kcat")
TIMEOUT_S = 60.0


def test_debian_librdkafka_sends_lz4_batches(broker: BrokerProcess) -> None:
    assert KCAT is not None, "kcat is missing: `make kcat` installs Debian's"
    produce = next(k for k in api_versions(broker.bootstrap).api_keys if k.api_key == 0)
    assert (produce.min_version, produce.max_version) == (0, 13)
    topic = f"kcat.lz4.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT_S)
    records = b"".join(b"key-%d:%s\n" % (i, b"compressible value " * 20) for i in range(50))
    done = subprocess.run(
        [KCAT, "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-K:",
         "-X", "compression.codec=lz4", "-X", "linger.ms=100", "-X", "debug=feature,protocol"],
        input=records, capture_output=True, timeout=TIMEOUT_S, check=False)
    log = done.stderr.decode(errors="replace")
    assert done.returncode == 0, log[-3000:]
    version = re.search(r"librdkafka (\d+\.\d+\.\d+)",
                        subprocess.run([KCAT, "-V"], capture_output=True, text=True,
                                       timeout=TIMEOUT_S, check=True).stdout)
    sent = sorted({int(v) for v in re.findall(r"Sent ProduceRequest \(v(\d+),", log)})
    print(f"kcat (librdkafka {version and version.group(1)}) Produce v{sent}")
    assert "ApiKey Produce (0) Versions 0..13" in log  # what librdkafka read from ApiVersions
    headers = stored_batches(broker.bootstrap, topic, 1)
    assert sum(h.records_count for h in headers) == 50
    assert {h.compression for h in headers} == {CompressionType.LZ4}
