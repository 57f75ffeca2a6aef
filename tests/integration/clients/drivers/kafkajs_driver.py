"""kafkajs driver: ``node tests/integration/js/kafkajs_client.js``, one run per operation.

JSON in on stdin, one JSON line out on stdout (bytes as base64), kafkajs's log on stderr; every
run is bounded by a timeout and killed past it. The packages come from ``npm ci`` in
``tests/integration/js`` (``make node-deps``); if they are missing, every kafkajs test fails with
that instruction rather than skipping. kafkajs has no ``assign()``, so ``consume`` drives its
Fetch path directly (see the script's header).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..model import (
    CONSUME_TIMEOUT_S,
    DEFAULT_PRODUCE,
    REQUEST_TIMEOUT_S,
    ClientError,
    ConsumedRecord,
    Delivery,
    OutRecord,
    ProduceOptions,
)

JS_DIR: Final = Path(__file__).resolve().parents[2] / "js"
SCRIPT: Final = JS_DIR / "kafkajs_client.js"
STDERR_TAIL_CHARS: Final = 4000


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


class KafkajsDriver:
    name = "kafkajs"

    def __init__(self, bootstrap: str) -> None:
        self.brokers = bootstrap.split(",")
        node = shutil.which("node")
        if node is None:
            raise ClientError("node is not on PATH: kafkajs tests need Node.js (v20)")
        if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
            raise ClientError(
                f"kafkajs is not installed: run `make node-deps` (npm ci in {JS_DIR})"
            )
        self.node = node

    def _call(self, op: str, args: Mapping[str, Any], timeout: float) -> Any:
        request = json.dumps({"brokers": self.brokers, "op": op, "args": args})
        try:
            done = subprocess.run(
                [self.node, str(SCRIPT)],
                input=request.encode(),
                capture_output=True,
                cwd=JS_DIR,
                timeout=timeout,
                check=False,
                env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
            )
        except subprocess.TimeoutExpired as exc:
            stderr = (exc.stderr or b"").decode(errors="replace")[-STDERR_TAIL_CHARS:]
            raise ClientError(f"kafkajs {op} timed out after {timeout:.0f}s\n{stderr}") from exc
        stderr = done.stderr.decode(errors="replace")[-STDERR_TAIL_CHARS:]
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            raise ClientError(
                f"kafkajs {op} exited {done.returncode} without an answer\n"
                f"stdout: {done.stdout[-2000:]!r}\n{stderr}"
            ) from None
        if not answer["ok"]:
            raise ClientError(f"kafkajs {op}: {answer['error']}\n{answer['stack']}\n{stderr}")
        return answer["result"]

    def create_topic(self, topic: str, partitions: int) -> None:
        self._call(
            "createTopic", {"topic": topic, "partitions": partitions}, REQUEST_TIMEOUT_S + 10
        )

    def partition_count(self, topic: str) -> int | None:
        count = self._call("partitionCount", {"topic": topic}, REQUEST_TIMEOUT_S + 10)
        return None if count is None else int(count)

    def delete_topic(self, topic: str) -> None:
        self._call("deleteTopic", {"topic": topic}, REQUEST_TIMEOUT_S + 10)

    def produce(self, topic: str, records: Sequence[OutRecord],
                options: ProduceOptions = DEFAULT_PRODUCE) -> list[Delivery]:
        result = self._call(
            "produce",
            {
                "topic": topic,
                "compression": options.compression,
                "idempotent": options.idempotent,
                "rounds": options.rounds,
                "records": [
                    {
                        "key": _b64(r.key),
                        "value": _b64(r.value),
                        "headers": [[k, _b64(v)] for k, v in r.headers],
                        "timestamp": r.timestamp,
                    }
                    for r in records
                ],
            },
            REQUEST_TIMEOUT_S + 10,
        )
        return [Delivery(int(d["partition"]), int(d["offset"])) for d in result]

    def consume(self, topic: str, end_offsets: Mapping[int, int]) -> list[ConsumedRecord]:
        result = self._call(
            "consume",
            {"topic": topic, "endOffsets": {str(p): end for p, end in end_offsets.items()}},
            CONSUME_TIMEOUT_S + 10,
        )
        return [
            ConsumedRecord(
                partition=int(m["partition"]),
                offset=int(m["offset"]),
                key=_unb64(m["key"]),
                value=_unb64(m["value"]),
                headers=tuple((k, _unb64(v)) for k, v in m["headers"]),
                timestamp=int(m["timestamp"]),
            )
            for m in result
        ]

    def offsets_for_times(
        self, topic: str, timestamps: Mapping[int, int]
    ) -> dict[int, int | None]:
        result = self._call(
            "offsetsForTimes",
            {"topic": topic, "timestamps": {str(p): ts for p, ts in timestamps.items()}},
            REQUEST_TIMEOUT_S + 10,
        )
        return {int(p): (None if off is None else int(off)) for p, off in result.items()}
