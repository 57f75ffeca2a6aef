"""``tune_garbage_collector``: the broker's collector thresholds and the frozen start-up objects,
checked in a fresh interpreter (the test process's own collector is left alone)."""

from __future__ import annotations

import json
import subprocess
import sys

from strata.broker.garbage_collection import GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD

PROBE = """
import gc, json
from strata.broker.garbage_collection import tune_garbage_collector
before = gc.get_freeze_count()
tune_garbage_collector()
print(json.dumps({"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count() - before}))
"""


def test_thresholds_are_set_and_start_up_objects_frozen() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60, check=True)
    result = json.loads(out.stdout)
    assert result["threshold"] == [GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD]
    assert result["frozen"] > 1000  # the modules and classes imported by then
