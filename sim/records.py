"""Request records reduced as requests end, so a run's memory follows the requests in flight.

When a request ends, the cluster hands it to its `Ledger`, which keeps only what the summaries
(sim/metrics.py) and the end-of-run audits need: four integer-ns times, the output length, the
priority and the outcome in numpy columns indexed by arrival position (38 bytes a request, so
exact percentiles and arrival-order means stay bit-identical to computing them from Request
objects), plus a few exact integer sums. A per-request output row, if asked for, goes to `on_row`
in arrival order as soon as every earlier arrival has ended (a reorder buffer of the rows that
finished ahead of an older request). `keep=True` also keeps every Request (tests, tools).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from llumverify.sim import audit
from llumverify.sim.instance import Request

UNENDED, FINISHED, REJECTED, FAILED = 0, 1, 2, 3  # `Ledger.outcome`


class Row(NamedTuple):
    """One request's output row, as raw values (sim/request_output.py formats them); instance -1
    = never dispatched, first_token_ns / finish_ns -1 = not finished."""

    id: int
    arrival_s: float
    prompt: int
    output: int
    priority: int
    instance: int
    first_token_ns: int
    finish_ns: int
    preemptions: int
    migrations: int
    status: str


def row_of(r: Request) -> Row:
    """The output row of an ended request."""
    finished = r.status == "finished"
    return Row(r.id, r.spec.arrival_s, r.prompt, r.output, r.priority, r.instance,
               r.first_token_ns if finished else -1, r.finish_ns if finished else -1,
               r.preemptions, r.migrations, r.status)


class Ledger:
    """The ended requests of one run of `n` arrivals, as columns and sums (module doc)."""

    def __init__(self, n: int, keep: bool = False, on_row: Callable[[Row], None] | None = None) -> None:
        # np.empty / np.zeros pages are committed only when written: memory grows as requests end;
        # arrival_ns is when the client sent the request (Request.sent_ns), so latencies are the client's
        self.arrival_ns, self.admitted_ns, self.first_token_ns, self.finish_ns = (
            np.empty(n, dtype=np.int64) for _ in range(4))
        self.output = np.empty(n, dtype=np.int32)
        self.priority = np.empty(n, dtype=np.int8)
        self.outcome = np.zeros(n, dtype=np.int8)
        self.arrived = self.ended = 0
        self.rejected = self.redispatches = self.preemptions = self.preempt_loss_ns = 0
        self.sojourn_ns = 0  # Σ finish - arrival of finished and failed requests (Little's law audit)
        self._pos: dict[Request, int] = {}  # in flight -> arrival position
        self._seen = bytearray(n)  # 1: the request of this id has arrived (each arrives once)
        self._keep: list[Request] | None = [] if keep else None
        self._on_row = on_row
        self._rows: dict[int, Row] = {}  # ended ahead of an older request, by position
        self._next_row = 0

    @property
    def records(self) -> list[Request]:
        """Every Request in arrival order; only with keep=True (a silent empty list would let a
        test pass on nothing)."""
        if self._keep is None:
            raise RuntimeError("records were not kept: run with keep_records=True")
        return self._keep

    def arrive(self, req: Request) -> None:
        """`req` arrived (call in arrival order); refuses an id that arrives twice or is outside 0..n-1."""
        rid = req.id
        if not 0 <= rid < len(self._seen) or self._seen[rid]:
            raise audit.AuditError("accounting", f"request {rid} arrived twice, or is not one of the workload's "
                                   f"ids 0..{len(self._seen) - 1}")
        self._seen[rid] = 1
        self._pos[req] = self.arrived
        self.arrived += 1
        if self._keep is not None:
            self._keep.append(req)

    def end(self, req: Request) -> None:
        """`req` ended (Request.end ran): reduce it to the columns and sums, emit its row."""
        audit.check_status(req.id, req.status)
        pos = self._pos.pop(req, None)
        if pos is None:
            raise audit.AuditError("accounting", f"request {req.id} recorded twice or without arriving")
        self.ended += 1
        self.arrival_ns[pos], self.output[pos], self.priority[pos] = req.sent_ns, req.output, req.priority
        self.redispatches += req.redispatches
        self.preemptions += req.preemptions
        self.preempt_loss_ns += req.preempt_loss_ns
        if req.status.startswith("rejected:"):
            self.outcome[pos] = REJECTED
            self.rejected += 1
        else:
            self.sojourn_ns += req.finish_ns - req.arrival_ns
            finished = req.status == "finished"
            self.outcome[pos] = FINISHED if finished else FAILED
            if finished:
                self.admitted_ns[pos], self.first_token_ns[pos], self.finish_ns[pos] = (
                    req.admitted_ns, req.first_token_ns, req.finish_ns)
        if self._on_row is not None:
            self._rows[pos] = row_of(req)
            while self._next_row in self._rows:
                self._on_row(self._rows.pop(self._next_row))
                self._next_row += 1

    def close(self, arrived: int) -> None:
        """End of run: every one of the `arrived` requests ended exactly once (with Request.end,
        which refuses a second end, and `end` above, which refuses a second record)."""
        audit.check_ended(arrived, self.ended)
