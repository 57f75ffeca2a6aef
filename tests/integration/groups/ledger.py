"""What the members of one test's consumer group reported, in arrival order, and the checks on it.

Every line a worker prints (``group_worker.py`` / ``group_worker.js``, one JSON event a line)
becomes an ``Event`` with a global sequence number, so "after the kill" or "after the fourth
member joined" is a position in one sequence. Waits block on a condition variable signalled on
every event, against a deadline: no test sleeps to let the group settle.

The delivery rule checked by ``check_processing``, for members that commit after processing:
every produced record is processed, nothing else is, and a record may be processed more than
once only where the commit points allow it. A partition's new owner starts at the offset
committed when the partition was handed to it, so a processing is *covered* when its batch's
commit succeeded before the partition was next assigned (to anyone, the same member included);
at most one processing of a record may be covered. A batch whose commit failed (the member was
fenced by a rebalance), never reported (the member was killed) or landed only after the
partition had been handed out again (a rebalance ran while the batch was being processed, as
aiokafka's background coordinator allows) may be processed again by the partition's next owner.
"Before" is the order in which the ledger received the two events.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]
Position = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    worker: str
    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.data["e"])


@dataclass(slots=True)
class WorkerView:
    """One member's state as its events tell it."""

    assignment: set[TP] = field(default_factory=set)
    assignments: int = 0  # assigned events seen
    revocations: int = 0
    closed: bool = False
    batches: dict[int, list[Position]] = field(default_factory=dict)
    batch_seq: dict[int, int] = field(default_factory=dict)
    commits: dict[int, bool] = field(default_factory=dict)
    commit_seq: dict[int, int] = field(default_factory=dict)
    last_committed: dict[TP, int] = field(default_factory=dict)


class Ledger:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[Event] = []
        self.views: dict[str, WorkerView] = defaultdict(WorkerView)
        self.unique: set[Position] = set()
        self.fatal: list[Event] = []
        self.assigned_at: dict[TP, list[int]] = defaultdict(list)  # seqs handing a partition out
        self.describe_workers: Callable[[], str] = lambda: ""

    # ------------------------------------------------------------------------------ input
    def add(self, worker: str, data: dict[str, Any]) -> None:
        with self._cond:
            event = Event(len(self.events), worker, data)
            self.events.append(event)
            self._apply(event)
            self._cond.notify_all()

    def _apply(self, event: Event) -> None:
        view = self.views[event.worker]
        data = event.data
        match event.kind:
            case "assigned":
                tps = {(t, p) for t, p in data["tps"]}
                for tp in tps:
                    self.assigned_at[tp].append(event.seq)
                view.assignment = view.assignment | tps if data["incremental"] else tps
                view.assignments += 1
            case "revoked":
                view.assignment -= {(t, p) for t, p in data["tps"]}
                view.revocations += 1
            case "batch":
                records = [(t, p, o) for t, p, o in data["records"]]
                view.batches[data["id"]] = records
                view.batch_seq[data["id"]] = event.seq
                self.unique.update(records)
            case "commit":
                view.commits[data["id"]] = bool(data["ok"])
                view.commit_seq[data["id"]] = event.seq
                if data["ok"]:
                    for t, p, o in data["offsets"]:
                        view.last_committed[(t, p)] = o
            case "closed":
                view.closed = True
            case "fatal":
                self.fatal.append(event)

    # ------------------------------------------------------------------------------ waiting
    @property
    def seq(self) -> int:
        """The sequence number the next event will get."""
        with self._cond:
            return len(self.events)

    def wait_until(self, predicate: Callable[[Ledger], bool], timeout: float, what: str) -> None:
        """Block until ``predicate(self)`` holds; fail naming ``what`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                if self.fatal:
                    raise AssertionError(f"a member failed while waiting for {what}: "
                                         f"{self.fatal[0]}\n{self.summary()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n"
                                         f"{self.summary()}")
                self._cond.wait(remaining)

    # ------------------------------------------------------------------------------ views
    def assignments(self, workers: list[str]) -> dict[str, set[TP]]:
        with self._cond:
            return {w: set(self.views[w].assignment) for w in workers}

    def covers(self, workers: list[str], partitions: set[TP]) -> bool:
        """The members' current assignments are disjoint, each non-empty, and cover exactly
        ``partitions`` (a settled generation with work for everyone)."""
        owned = [self.views[w].assignment for w in workers]
        flat = [tp for a in owned for tp in a]
        return all(owned) and len(flat) == len(set(flat)) and set(flat) == partitions

    def history(self, position: Position) -> str:
        """Every event about ``position``'s partition around each batch that held it."""
        tp = position[:2]
        lines = []
        for e in self.events:
            if e.kind == "batch" and position in {tuple(r) for r in e.data["records"]}:
                lines.append(f"  #{e.seq} {e.worker} batch {e.data['id']}")
            elif e.kind == "commit" and any(tuple(o[:2]) == tp for o in e.data["offsets"]):
                lines.append(f"  #{e.seq} {e.worker} commit {e.data['id']} ok={e.data['ok']} "
                             f"{e.data['offsets']}")
            elif e.kind in ("assigned", "revoked", "closed"):
                lines.append(f"  #{e.seq} {e.worker} {e.kind} {e.data.get('tps', '')}")
        return "\n".join(lines)

    def summary(self) -> str:
        lines = [f"{len(self.unique)} distinct records processed, {len(self.events)} events"]
        for name, view in sorted(self.views.items()):
            lines.append(
                f"  {name}: assignment {sorted(view.assignment)}, {view.assignments} assigns, "
                f"{view.revocations} revokes, {len(view.batches)} batches, "
                f"{sum(not ok for ok in view.commits.values())} failed commits, "
                f"closed={view.closed}"
            )
        tail = [f"  #{e.seq} {e.worker}: {e.data}" for e in self.events[-8:]
                if e.kind != "batch"]
        return "\n".join([*lines, "last events:", *tail, self.describe_workers()])


# ---------------------------------------------------------------------------------- checks
def expected_positions(ends: Mapping[TP, int]) -> set[Position]:
    return {(t, p, o) for (t, p), end in ends.items() for o in range(end)}


def check_processing(ledger: Ledger, ends: Mapping[TP, int]) -> int:
    """Assert the delivery rule (module docstring) for records ``[0, end)`` of every partition;
    returns how many redeliveries the commit points allowed (and happened)."""
    expected = expected_positions(ends)
    missing = sorted(expected - ledger.unique)
    extra = sorted(ledger.unique - expected)
    assert not missing, f"{len(missing)} records never processed, e.g. {missing[:10]}"
    assert not extra, f"processed records nobody produced: {extra[:10]}"
    covered: Counter[Position] = Counter()
    total: Counter[Position] = Counter()
    for view in ledger.views.values():
        for batch, records in view.batches.items():
            total.update(records)
            if not view.commits.get(batch, False):
                continue
            processed, committed_at = view.batch_seq[batch], view.commit_seq[batch]
            covered.update(
                r for r in records
                if not any(processed < at < committed_at for at in ledger.assigned_at[r[:2]])
            )
    twice = sorted(pos for pos, n in covered.items() if n > 1)
    assert not twice, (
        f"{len(twice)} records processed again after a successful commit covered them, "
        f"e.g. {twice[:10]}; the batches holding {twice[0]}:\n{ledger.history(twice[0])}\n"
        f"{ledger.summary()}"
    )
    return sum(n - 1 for n in total.values())


def all_committed(ends: Mapping[TP, int]) -> Callable[[Ledger], bool]:
    """Every partition's end offset was committed by some member (the last batch committed)."""
    def check(ledger: Ledger) -> bool:
        best: dict[TP, int] = {}
        for view in ledger.views.values():
            for tp, offset in view.last_committed.items():
                best[tp] = max(best.get(tp, 0), offset)
        return all(best.get(tp, 0) >= end for tp, end in ends.items())
    return check


def first_offsets_after(ledger: Ledger, seq: int, partitions: set[TP],
                        exclude: str) -> dict[TP, int]:
    """Per partition, the lowest offset in the first batch after event ``seq`` that any member
    but ``exclude`` processed from it: where the new owner resumed."""
    firsts: dict[TP, tuple[int, int]] = {}
    for name, view in ledger.views.items():
        if name == exclude:
            continue
        for batch, records in view.batches.items():
            at = view.batch_seq[batch]
            if at <= seq:
                continue
            for t, p, o in records:
                tp = (t, p)
                if tp in partitions and (tp not in firsts or (at, o) < firsts[tp]):
                    firsts[tp] = (at, o)
    return {tp: o for tp, (_, o) in firsts.items()}
