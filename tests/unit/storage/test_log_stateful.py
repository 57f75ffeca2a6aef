"""Hypothesis stateful test: the Log against a plain in-memory model.

Operations: appends of random batches, reads from random offsets, rolls, truncations, retention
by DeleteRecords, clean and unclean restarts, time passing. Invariant after each step: the
log's start/end offsets and every readable record equal the model's.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from strata.storage import record_batch as rb
from strata.storage.clock import ManualClock
from strata.storage.log import Log
from strata.storage.log_config import LogConfig
from strata.storage.log_loader import load_log
from strata.storage.records import RecordSpec, build_batch, iter_records

CONFIG = LogConfig.from_props({"segment.bytes": "400", "index.interval.bytes": "50",
                               "file.delete.delay.ms": "0"})

values_st = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=5)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="strata-stateful-"))
        self.clock = ManualClock()
        self.log: Log = load_log(self.tmp / "t-0", CONFIG, self.clock)
        self.model: dict[int, bytes] = {}  # offset -> value
        self.start = 0
        self.end = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(vals=values_st, epoch=st.integers(0, 3))
    def append(self, vals: list[bytes], epoch: int) -> None:
        epoch = max(epoch, self.log.latest_epoch or 0)
        data = build_batch([RecordSpec(key=b"k", value=v, timestamp=self.clock.milliseconds())
                            for v in vals])
        info = self.log.append_as_leader(data, leader_epoch=epoch)
        assert info.first_offset == self.end
        for i, v in enumerate(vals):
            self.model[self.end + i] = v
        self.end += len(vals)
        self.log.update_high_watermark(self.end)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    @precondition(lambda self: self.end > self.start)
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end - 1))
        raw = self.log.read(offset, data.draw(st.integers(1, 500))).read_bytes()
        pos, seen = 0, []
        while (size := rb.peek_size(raw, pos)) is not None and pos + size <= len(raw):
            seen.extend(r for r in iter_records(raw, pos) if r.offset >= offset)
            pos += size
        assert seen, "min_one_message returns at least the batch holding the offset"
        assert seen[0].offset == offset
        for r in seen:
            assert self.model[r.offset] == r.value

    @rule(data=st.data())
    @precondition(lambda self: self.end > self.start)
    def truncate(self, data: st.DataObject) -> None:
        # Followers truncate at batch boundaries: pick the base offset of a stored batch.
        bases = [h.base_offset for seg in self.log.segments for _, h in seg.batches()
                 if h.base_offset >= self.start]
        if not bases:
            return
        target = data.draw(st.sampled_from(bases))
        self.log.truncate_to(target)
        self.end = target
        self.model = {o: v for o, v in self.model.items() if o < target}

    @rule(data=st.data())
    @precondition(lambda self: self.end > self.start)
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.start, self.end))
        self.log.delete_records_before(target)
        self.start = target
        self.model = {o: v for o, v in self.model.items() if o >= target}

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        rp = self.log.recovery_point
        if clean:
            self.log.flush()
            rp = self.log.recovery_point
            self.log.close()
        start = self.log.log_start_offset
        self.log = load_log(self.tmp / "t-0", CONFIG, self.clock, recovery_point=rp,
                            log_start_offset=start, had_clean_shutdown=clean)
        self.log.update_high_watermark(self.end)

    @rule(ms=st.integers(0, 10_000))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)

    @invariant()
    def offsets_match(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert [s.base_offset for s in self.log.segments] == sorted(
            s.base_offset for s in self.log.segments)


LogMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogStateful = LogMachine.TestCase
