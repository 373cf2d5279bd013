"""One vLLM-0.2-like serving instance: waiting deque, running batch, 16-token KV blocks.

At each step boundary the engine admits waiting requests from the head (FCFS) while their
blocks fit above the watermark, the batch has room and the prefill token budget holds; if it
admitted any, the step prefills only them. Otherwise every running request decodes one token,
allocating a block whenever its KV length crosses a block boundary; when a step cannot allocate,
the running request that arrived last is preempted (recompute) to the head of the queue (vLLM 0.2
sorts the running batch by arrival before every decode step and preempts from its tail).

Speed: cost grows with events, not tokens. Between events nothing but counters changes, so a
decode *run* of k identical-shape steps is one event, in closed form (sim/decode_run.py): a
running request stores its KV length relative to the instance's decode-step counter (L = base +
steps), blocks needed over k steps come from a histogram of base mod block_size, the first
completion from a heap. An arrival or a hook cuts the run at the end of the step in progress.
fast=False runs one step per event instead; both paths produce the same requests
(tests/test_sim_fastpath.py).

The engine interface: an engine is this class or a subclass, registered by name in
sim/engines.py (docs/extending.md). The cluster calls `enqueue`, `snapshot` / `reported`,
`free_blocks`, `at_next_boundary`, `watch`, `remove_running` / `insert_running` / `park` /
`unpark` / `kv_tokens` (inside a boundary callback), `reserve` / `release`, `set_slowdown`,
`set_terminating`, `fail`, `close`, and the rules an engine answers for: `migratable`,
`cached_prefix_tokens`, `claim`, `num_running`, `recount_held` (docs/simulator.md). The step loop
(`_boundary`) calls the engine hooks, which a subclass overrides where it differs:
`schedule_step` (admission and what the next step runs), `start_decode_run` / `end_decode_run`
(a run of decode steps: its time and its completions), `preempt_until_fits` (who is preempted),
`finish_request` (blocks freed at the end), `adjust_free` / `decode_run_unaffected` (blocks set
aside or returned mid-run, e.g. by a prefix cache), `steps_past_poke` (how many steps a run goes on
after the one in progress when something cuts it, e.g. an arrival the engine planned no step for).
The underscored methods are helpers they share.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING

import simpy

from llumverify.settings.config import EngineConfig
from llumverify.requests import HIGH, RequestSpec
from llumverify.scheduler.index import FreenessIndex
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.scheduler.selection import migratable
from llumverify.sim import audit
from llumverify.sim.costmodel import CostModel
from llumverify.sim.decode_run import DecodeRun, allocation_prefix, steps_that_fit
from llumverify.sim.waits import Environment, Urgent

if TYPE_CHECKING:
    from llumverify.sim.lockstep import LockstepGroup

_new_tuple = tuple.__new__

IDLE, PREFILL, DECODE = 0, 1, 2


class Request:
    """A request's live state inside the simulator and, once it ends, its record.

    Times are integer ns (-1 = not yet). While a request is in an instance's decode batch its KV
    length is `base + instance.steps`; `generated` is exact whenever it is not in a decode batch.
    """

    __slots__ = ("spec", "id", "arrival_ns", "sent_ns", "prompt", "output", "priority", "instance", "status",
                 "admitted_ns", "first_token_ns", "finish_ns", "preemptions", "migrations",
                 "preempt_loss_ns", "killed_ns", "generated", "base", "admit_seq", "at", "downtime_ns",
                 "redispatches", "predicted_tokens", "computed", "pins")

    def __init__(self, spec: RequestSpec, arrival_ns: int, sent_ns: int | None = None) -> None:
        self.spec = spec
        self.id = spec.id
        self.arrival_ns = arrival_ns  # reached the cluster's engines (sim/frontend.py)
        self.sent_ns = arrival_ns if sent_ns is None else sent_ns  # the client sent it: latencies count from here
        self.prompt = spec.prompt_tokens
        self.output = spec.output_tokens
        self.priority = spec.priority
        self.instance = -1
        self.status = ""
        self.admitted_ns = self.first_token_ns = self.finish_ns = self.killed_ns = -1
        self.preemptions = self.migrations = self.preempt_loss_ns = 0
        self.generated = 0
        self.base = 0
        self.admit_seq = -1  # position in admission order while running; -1 when not running
        self.at = -1  # the instance holding it now (queue or batch); -1 in none (e.g. paused mid-migration)
        self.downtime_ns = 0  # total time paused by live migrations
        self.redispatches = 0  # times re-dispatched after its instance failed
        # prompt + predicted output: the `predicted` policy's projection (exact unless the cluster
        # sets a noisy prediction, scheduler/prediction.py)
        self.predicted_tokens = spec.prompt_tokens + spec.output_tokens
        self.computed = 0  # vllm-v1: tokens of the current (re-)prefill already computed or cached
        self.pins: list[tuple[int, int]] = []  # vllm-v1: prefix-cache keys of its leading blocks it shares

    def end(self, status: str, now_ns: int) -> None:
        """Finish or reject the request; ending twice is an accounting bug."""
        if self.status:
            raise audit.AuditError("accounting", f"request {self.id} ended twice ({self.status!r}, then {status!r})")
        self.status = status
        self.finish_ns = now_ns

    @property
    def recompute_tokens(self) -> int:
        """Tokens a (re-)prefill processes: the prompt plus every token generated so far."""
        return self.prompt + self.generated


def arrival_order(req: Request) -> tuple[int, int]:
    """vLLM 0.2's FCFS order of a batch: by arrival, ties by request id (larger = later)."""
    return req.arrival_ns, req.id


Listener = Callable[[str, Request], None]  # ("finished" | "preempted", request)


class Instance:
    """One engine. The cluster calls `enqueue` on arrival; everything else is driven by SimPy."""

    def __init__(self, env: simpy.Environment, iid: int, engine: EngineConfig, cost: CostModel,
                 fast: bool = True, on_finish: Callable[[Request], None] | None = None,
                 priorities: bool = True) -> None:
        if not isinstance(env, Environment):  # a plain simpy.Environment would order boundaries after arrivals
            raise TypeError("an Instance's step boundaries are Urgent: it needs llumverify.sim.waits.Environment")
        self.env = env
        self.id = iid
        self.cost = cost
        self.fast = fast
        self.on_finish = on_finish
        self.role = "neutral"  # P/D: "prefill" or "decode" (sim/cluster.py)
        self.on_first_token: Callable[[Request], None] | None = None  # called when a prefill joins the batch
        self.index: FreenessIndex | None = None  # told of every change of this instance's load (sim/cluster.py)
        self.version = 0  # counts those changes: a load read at one version bounds the next reads (min_free_blocks)
        self.bs = engine.block_size
        self.capacity = engine.num_blocks
        self.watermark = engine.watermark_blocks
        self.spare = engine.spare_block  # vLLM 0.2's can_append_slot: a free block per sequence at its turn
        self.max_seqs, self.max_tokens = engine.batch_limits()
        self.ae_loss = engine.preemption_loss == "ae"  # account preemption loss as the artifact's benchmark
        self.terminating = False
        self.dead = False  # crashed or removed: it never steps again
        self.born_ns = env.now
        self.gone_ns = -1  # when it crashed or was removed
        self.priorities = priorities  # high-priority requests queue first and set [P]
        self.dispatched = 0
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # admission order
        # P/D wait (sim/cluster.py): requests out of the decode batch, keeping their KV here (held),
        # each with its admission position (a preemption may still take it, as vLLM's running queue)
        self.parked: dict[int, tuple[Request, int]] = {}
        self.free = self.capacity
        self.held = 0
        self.reserved = 0
        self.steps = 0  # decode steps executed so far
        self.hist = [0] * self.bs  # running requests by base mod block_size
        self.ctx = 0  # Σ KV tokens of the running batch, as of `steps`
        self.prompts = 0  # Σ prompt tokens of the running batch (ctx - prompts: its output tokens)
        self.heap: list[tuple[int, int, Request]] = []  # (last decode step, admit_seq, request)
        self.waiting_tokens = 0  # Σ recompute tokens of the waiting requests
        self.waiting_preempted = 0
        self.priority_hosted = 0
        self.predicted_tokens = 0  # Σ Request.predicted_tokens of the requests held here (queue and batch)
        self.slow_ppm = 0
        self.phase = IDLE
        self._admit_counter = iid << 40  # disjoint per instance: a moved request's stale heap entry never matches
        self._wake: Urgent | None = None  # the pending step boundary
        self._prefilling: list[Request] = []
        self._hooks: list[Callable[[Instance], None]] = []
        self._watches: dict[int, Listener] = {}
        self._starting = False  # an idle instance has a wake-up pending (now, or at its lockstep group's next step)
        self.group: LockstepGroup | None = None  # the data-parallel ranks it steps in lockstep with (sim/lockstep.py)
        self._busy = False  # inside _boundary: pokes wait for the scheduling that follows
        self._in_hooks = False  # inside at_next_boundary callbacks: batch surgery allowed
        self._run = DecodeRun(0, 0, 0, 1, 0, 0, self.hist, 0, [0] * (self.bs + 1))  # the last run planned
        self.step_reports = False  # keep the AE's per-step load reports (enable_step_reports)
        self._report: InstanceSnapshot | None = None  # computed when the step in progress (or the last) was scheduled
        self._delivered: InstanceSnapshot | None = None  # the report of the last step that ended
        # integrals for metrics and audits (ns x blocks, ns x requests)
        self.used_integral = 0
        self.in_system = 0
        self.in_system_integral = 0
        self._in_system_since = 0
        self._used_since = 0
        self._last_ns = 0

    # ---------------------------------------------------------------- cluster-facing API
    def enqueue(self, req: Request) -> None:
        """A dispatched request joins the waiting queue (admitted at the next boundary): at the tail,
        or, with priorities, ahead of every normal request that was not preempted (paper §4; the
        artifact's insertion is buggy, docs/llumnix-code-notes.md H-AE-8)."""
        self._place(req)
        now = self.env.now
        self._count_in_system(now, +1)
        req.instance = self.id
        self.dispatched += 1
        self.predicted_tokens += req.predicted_tokens
        if req.priority == HIGH:
            self.priority_hosted += 1
        if req.priority == HIGH and self.priorities:
            self._push_waiting(req, head=False, ahead_of_normal=True)
        else:
            self._push_waiting(req, head=False)
        self._touched()
        self._poke()

    @property
    def active(self) -> bool:
        """A step is in progress or about to start (an idle instance with a stuck queue is not)."""
        return self.phase != IDLE or self._starting

    def free_blocks(self) -> int:
        """Free blocks as `snapshot()` reports them, without building the snapshot."""
        if self.phase == DECODE:
            return self._run.free_at(self.env.now)
        return self.free

    def free_fails_from(self, ok: Callable[[int], bool]) -> float:
        """The time from which `ok(free_blocks())` is false until `version` next changes (inf: not
        before then; at most now if it is false now), for an `ok` that holds for more free blocks
        whenever it holds for fewer. Free blocks only fall during a decode run, step by step (a
        cut ends the run sooner, so the answer is never late)."""
        if self.phase != DECODE:
            return -math.inf if not ok(self.free) else math.inf
        run = self._run
        lo, hi = 0, run.k_end - 1  # steps done; free_blocks() with j done is free0 - blocks_over(j + 1)
        if ok(run.free0 - run.blocks_over(hi + 1)):
            return math.inf
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(run.free0 - run.blocks_over(mid + 1)):
                lo = mid + 1
            else:
                hi = mid
        return run.t0 + run.span(lo)

    def snapshot(self) -> InstanceSnapshot:
        """The exact load as of the last step boundary <= now (after that boundary's scheduling).

        Read from another instance's callback at the very nanosecond this run ends (before this
        instance's boundary event is processed), it shows the state before that boundary.
        """
        free = self.free_blocks()
        waiting = self.waiting
        head = math.ceil(waiting[0].recompute_tokens / self.bs) if waiting else 0
        # every field, in order, through tuple.__new__: the NamedTuple's own __new__ is Python code
        # and this is the simulator's most built object (dispatch, rounds, samples)
        return _new_tuple(InstanceSnapshot, (
            self.id, self.capacity, self.watermark, free, self.num_running(),
            len(waiting), self.waiting_tokens / self.bs, head, self.waiting_preempted,
            self.priorities and self.priority_hosted > 0, self.terminating, self.dispatched,
            self.predicted_tokens / self.bs, self.bs))

    def enable_step_reports(self) -> None:
        """Keep the AE's per-step reports from now on (before any request arrives: it reports empty)."""
        self.step_reports = True
        self._delivered = self.snapshot()

    def reported(self) -> InstanceSnapshot:
        """The load as the AE's global scheduler sees it: the report of the last step that ended,
        computed when that step was scheduled (vllm/core/scheduler.py:253, 328) and delivered with
        its outputs (llm_engine.py:459-462), so one to two steps old. Within a decode run only the
        blocks the steps take change, so the report of the run's j-th step is the run's first with
        those blocks off. Before its first step an instance reports itself empty (the AE dispatches
        round-robin until every instance has reported once: not modelled)."""
        if self.phase == DECODE and self._report is not None:
            j = self._run.steps_done(self.env.now - self._run.t0)
            if j >= 1:
                return self._run_report(j)
        assert self._delivered is not None
        return self._delivered

    def _run_report(self, j: int) -> InstanceSnapshot:
        """The report of the current decode run's j-th step (j >= 1): the run's first report, with
        the blocks steps 2..j took off (the first report already counts step 1's)."""
        assert self._report is not None
        run = self._run
        return self._report._replace(free_blocks=self._report.free_blocks - run.blocks_over(j) + run.blocks_over(1))

    def _step_ended_report(self) -> InstanceSnapshot | None:
        """At a boundary, before the step's results are applied: the report the ended step delivers
        (None when the instance was idle: no step ended, the scheduler keeps the last one)."""
        if self._report is None:  # _report is None while idle
            return None
        if self.phase == DECODE:
            return self._run_report(self._run.k_end)
        return self._report

    def num_running(self) -> int:
        """Requests in the running queue: the batch and the parked (vllm-v1 adds those whose prefill
        is still in chunks)."""
        return len(self.running) + len(self.parked)

    def migratable(self, req: Request) -> bool:
        """Whether a running request can leave by migration (scheduler/selection.py's rule; vLLM 0.2
        shares no blocks, vllm-v1 passes its pinned blocks' refcounts)."""
        return migratable(())

    def cached_prefix_tokens(self, req: Request) -> int:
        """Leading tokens of the request this instance would take from its prefix cache (none here)."""
        return 0

    def claim(self, req: Request) -> None:
        """A migration chose `req` (one that was migratable): keep it so until it leaves."""

    def at_next_boundary(self, fn: Callable[[Instance], None]) -> None:
        """Run fn(self) at the next step boundary: after the step in progress completes (its
        finished requests notified), before the next step is scheduled; at this time if idle."""
        self._hooks.append(fn)
        self._poke()

    def watch(self, req_id: int, fn: Listener) -> None:
        """Call fn once, when request `req_id` finishes or is preempted on this instance."""
        self._watches[req_id] = fn

    def unwatch(self, req_id: int, fn: Listener) -> None:
        """Stop calling fn for a request (its migration ended); another's watch of it stays: a P/D
        hand-off watches its committed request on D, where a balancing migration may take that
        request out as its source meanwhile and watch it in its place."""
        if self._watches.get(req_id) == fn:
            del self._watches[req_id]

    def set_slowdown(self, ppm: int) -> None:
        """Decode steps starting from the next boundary run (1 + ppm/1e6) times slower (migration)."""
        self.at_next_boundary(lambda inst: setattr(inst, "slow_ppm", ppm))

    def reserve(self, blocks: int) -> bool:
        """Set aside `blocks` free blocks (counted as used) if that many are free now."""
        free_now = self.free_blocks()
        if blocks < 0 or blocks > free_now:
            return False
        self.adjust_free(-blocks)
        self.reserved += blocks
        self._audit_blocks("reserve")
        return True

    def release(self, blocks: int) -> None:
        """Return `blocks` reserved blocks to the free pool (may let a waiting request in)."""
        if not 0 <= blocks <= self.reserved:
            raise audit.AuditError("blocks", f"instance {self.id}: release {blocks} of {self.reserved} reserved")
        self.reserved -= blocks
        self.adjust_free(blocks)
        self._audit_blocks("release")
        self._poke()

    def allocated_tokens(self, req: Request) -> int:
        """KV slots a decode-phase running request holds now: as of the last boundary <= now, after
        its scheduling (the step in progress has its slot), consistent with `snapshot()`."""
        tokens = req.base + self.steps
        if self.phase == DECODE:
            tokens += self._run.in_progress(self.env.now) + 1
        return tokens

    def kv_tokens(self, req: Request) -> int:
        """KV length of a running request (call inside a boundary callback)."""
        return req.base + self.steps if req.id in self.running else req.prompt + req.generated - 1

    def remove_running(self, req_id: int) -> Request:
        """Take a decode-phase request out of the batch (inside a boundary callback). Its KV stays:
        its blocks become reserved here until `release`d or the request is re-inserted."""
        self._require_boundary("remove_running")
        req = self.running[req_id]
        blocks = self._drop_running(req)
        self.held -= blocks
        self.reserved += blocks
        if req.priority == HIGH:
            self.priority_hosted -= 1
        self.predicted_tokens -= req.predicted_tokens
        self._count_in_system(self.env.now, -1)
        req.at = -1
        self._audit_blocks("remove_running")
        self._touched()
        return req

    def insert_running(self, req: Request) -> None:
        """Append a decode-phase request with its KV (prompt + generated - 1 tokens) to the batch
        (inside a boundary callback), turning that many reserved blocks into its blocks."""
        self._require_boundary("insert_running")
        self._place(req)
        kv = req.prompt + req.generated - 1
        blocks = -(-kv // self.bs)
        if blocks > self.reserved:
            raise audit.AuditError("blocks", f"instance {self.id}: insert of request {req.id} needs {blocks} "
                                             f"blocks, {self.reserved} reserved")
        self.reserved -= blocks
        self.held += blocks
        req.instance = self.id
        if req.priority == HIGH:
            self.priority_hosted += 1
        self.predicted_tokens += req.predicted_tokens
        self._count_in_system(self.env.now, +1)
        self._join_batch(req, kv)
        self._audit_blocks("insert_running")
        self._touched()

    def park(self, req: Request) -> int:
        """Take a decode-phase request out of the batch, keeping its KV (inside a boundary callback):
        it holds its blocks and stays in the running queue, generating nothing, until `unpark`ed or
        preempted (P/D wait: Llumnix HEAD does not schedule a request that has its expected steps).
        Returns its admission position, which names this parking."""
        self._require_boundary("park")
        seq = req.admit_seq
        self._drop_running(req)
        self.parked[req.id] = (req, seq)
        self._touched()
        return seq

    def unpark(self, req: Request) -> None:
        """Put a parked request back into the batch (inside a boundary callback), as most recently
        admitted (its heap entry from before it was parked must stay stale)."""
        self._require_boundary("unpark")
        del self.parked[req.id]
        self._join_batch(req, req.prompt + req.generated - 1)
        self._touched()

    def take_waiting(self) -> list[Request]:
        """Remove every waiting request (they hold no KV) so the cluster can send them elsewhere."""
        taken = list(self.waiting)
        self.waiting.clear()
        for req in taken:
            req.at = -1
            self.predicted_tokens -= req.predicted_tokens
            if req.priority == HIGH:
                self.priority_hosted -= 1
        self.waiting_tokens = self.waiting_preempted = 0
        self._count_in_system(self.env.now, -len(taken))
        self._touched()
        return taken

    def fail(self) -> list[Request]:
        """Crash now: the step in progress is lost, every block is gone, nothing runs here again.

        Returns the requests it held (waiting, prefilling, decoding, parked), each with `generated`
        exact (tokens of completed steps only). Pending boundary callbacks and watches are dropped: the
        cluster tells the migrations itself.
        """
        now = self.env.now
        if self.phase == DECODE:
            run = self._run
            k = run.in_progress(now)
            self.used_integral += run.used_integral(k, self.capacity)
            allocated = run.blocks_over(k + 1)
            self.used_integral += (self.capacity - run.free0 + allocated) * (now - run.t0 - run.span(k))
            self.steps += k
            self.ctx += k * len(self.running)
        else:
            self.used_integral += (self.capacity - self.free) * (now - self._used_since)
        prefilling = {r.id for r in self._prefilling}
        lost = list(self.waiting)
        for req in list(self.running.values()):
            if req.id not in prefilling:
                self._drop_running(req)
            lost.append(req)
        lost.extend(req for req, _ in self.parked.values())
        for req in lost:
            req.at = -1
        self._count_in_system(now, -len(lost))
        self.waiting.clear()
        self.running.clear()
        self.parked.clear()
        self.heap.clear()
        self._prefilling = []
        self._hooks.clear()
        self._watches.clear()
        self.hist = [0] * self.bs
        self.waiting_tokens = self.waiting_preempted = self.priority_hosted = self.ctx = self.prompts = 0
        self.predicted_tokens = 0
        self.free, self.held, self.reserved = self.capacity, 0, 0
        self._used_since = now
        self._wake = None  # the pending boundary never happens
        self.phase = IDLE
        self._starting = False
        self.dead = True
        self.gone_ns = now
        self._touched()
        return lost

    # ---------------------------------------------------------------- bookkeeping
    def _place(self, req: Request) -> None:
        """Record that this instance holds `req`; holding it twice anywhere is a duplication bug."""
        if req.at >= 0 or req.status:
            raise audit.AuditError("accounting", f"request {req.id} placed on instance {self.id} while "
                                                 f"{'on instance ' + str(req.at) if req.at >= 0 else req.status}")
        if self.dead:
            raise audit.AuditError("accounting", f"request {req.id} placed on dead instance {self.id}")
        req.at = self.id

    def _push_waiting(self, req: Request, head: bool, ahead_of_normal: bool = False) -> None:
        if head:
            self.waiting.appendleft(req)
        elif ahead_of_normal:
            i = 0
            for queued in self.waiting:
                if queued.priority != HIGH and not queued.preemptions:
                    break
                i += 1
            self.waiting.insert(i, req)
        else:
            self.waiting.append(req)
        self.waiting_tokens += req.recompute_tokens
        if req.preemptions:
            self.waiting_preempted += 1

    def _count_in_system(self, now: int, delta: int) -> None:
        self.in_system_integral += self.in_system * (now - self._in_system_since)
        self._in_system_since = now
        self.in_system += delta

    def adjust_free(self, delta: int) -> None:
        """Change free blocks at any time, also inside a decode run (allocations count from free0)."""
        self._touched()
        now = self.env.now
        if self.phase == DECODE:  # the run's closed-form integral will count delta from its start
            self.used_integral += delta * (now - self._run.t0)
            self._run.free0 += delta
            if delta > 0 or not self.decode_run_unaffected():
                self._cut_run()
        else:
            self.used_integral += (self.capacity - self.free) * (now - self._used_since)
            self._used_since = now
        self.free += delta

    def decode_run_unaffected(self) -> bool:
        """Whether the decode run may go on as planned after blocks were set aside mid-run: its
        steps still fit (fewer free blocks admit nobody sooner), and no per-step load report is
        kept (a run's reports derive from its first one). Not cutting then saves a boundary and
        a stale wake: a run split in two executes the same steps (tests/test_sim_fastpath.py)."""
        run = self._run
        return not self.step_reports and not self.spare and run.blocks_over(run.k_end) <= run.free0

    def set_terminating(self, terminating: bool) -> None:
        """Start or cancel a drain (the autoscaler): the instance reports F = -1000 while it drains."""
        self.terminating = terminating
        self._touched()

    def _touched(self) -> None:
        """This instance's load may have risen or fallen other than by a decode run's steps."""
        self.version += 1
        if self.index is not None:
            self.index.touch(self.id)

    def _audit_blocks(self, where: str) -> None:
        free = self.free_blocks()
        held = self.held + (self.free - free)
        audit.check_blocks(f"instance {self.id} {where}", free, held, self.reserved, self.capacity)

    def _require_boundary(self, what: str) -> None:
        if not self._in_hooks:
            raise RuntimeError(f"{what} may only be called from an at_next_boundary callback")

    def _join_batch(self, req: Request, kv: int, seq: int = 0) -> None:
        """Add a request whose KV holds `kv` tokens to the decode batch: most recently admitted, or
        at admission position `seq` (a fresh number from _admit_counter never used in the heap). A request in the
        batch owes a token: one whose step produced its last has finished (else it would decode for ever)."""
        if req.generated >= req.output:
            raise audit.AuditError("accounting", f"instance {self.id}: request {req.id} joins the decode batch with "
                                                 f"{req.generated} of its {req.output} output tokens generated")
        if not seq:
            self._admit_counter += 1
            seq = self._admit_counter
        req.admit_seq = seq
        self.running[req.id] = req
        req.base = kv - self.steps
        self.hist[req.base % self.bs] += 1
        self.ctx += kv
        self.prompts += req.prompt
        last_step = self.steps + req.output - req.generated - 1
        heapq.heappush(self.heap, (last_step, req.admit_seq, req))

    def _drop_running(self, req: Request) -> int:
        """Remove a running request from the batch; make `generated` exact; return its blocks."""
        kv = req.base + self.steps
        del self.running[req.id]
        req.admit_seq = -1  # its heap entry is now stale
        self.hist[req.base % self.bs] -= 1
        self.ctx -= kv
        self.prompts -= req.prompt
        req.generated = kv - req.prompt + 1
        return -(-kv // self.bs)

    # ---------------------------------------------------------------- time and runs
    def _wake_at(self, t_ns: int, now: int) -> None:
        """The step boundary at t_ns: Urgent, so it precedes every arrival, poll or sample at t_ns."""
        self._wake = Urgent(self.env, t_ns - now)
        self._wake.callbacks.append(self._on_wake)

    def _on_wake(self, ev: simpy.Event) -> None:
        if ev is self._wake:  # otherwise superseded by a cut run
            self._boundary()

    def _poke(self) -> None:
        """Something changed that the next step must see: if idle, start a step at this time (after
        every same-time arrival has been enqueued, so a burst is admitted together); else cut the run."""
        if self.dead:
            return
        if self.phase == IDLE:
            if not self._busy and not self._starting:
                self._starting = True
                now = self.env.now
                self._wake_at(now if self.group is None else self.group.next_start(now), now)
        elif self.phase == DECODE:
            self._cut_run()

    def steps_past_poke(self, now: int) -> int:
        """Steps the decode run goes on after the one in progress when poked at `now` (0: it ends there,
        so the next step sees the change)."""
        return 0

    def _cut_run(self) -> None:
        """End the decode run at the end of the step in progress, or `steps_past_poke` steps later."""
        now = self.env.now
        end = self._run.cut(now, self.steps_past_poke(now))
        if end is not None:
            self._wake_at(end, now)

    # ---------------------------------------------------------------- the engine
    def _boundary(self) -> None:
        """Complete the step that just ended, run hooks, schedule the next step."""
        now = self.env.now
        audit.check_clock(f"instance {self.id}", self._last_ns, now)
        self._last_ns = now
        self._starting = False
        self._busy = True
        self._touched()
        delivered = self._step_ended_report() if self.step_reports else None
        if self.phase == DECODE:
            self.end_decode_run(now)
        else:
            self.used_integral += (self.capacity - self.free) * (now - self._used_since)
            if self.phase == PREFILL:
                self._end_prefill(now)
        self._used_since = now
        self.phase = IDLE
        self._in_hooks = True
        while self._hooks:
            self._hooks.pop(0)(self)
        self._in_hooks = False
        self.schedule_step(now)
        if self.step_reports:
            if delivered is not None:
                self._delivered = delivered
            self._report = self.snapshot() if self.phase != IDLE else None
        self._touched()
        self._busy = False

    def _end_prefill(self, now: int) -> None:
        done = self._prefilling
        self._prefilling = []
        for req in done:
            kv = self._prefill_ended(req, now)
            del self.running[req.id]
            if req.generated >= req.output:
                self.finish_request(req, -(-kv // self.bs), now)
            else:  # re-enter the batch, in admission order, as a decode request
                self._join_batch(req, kv)
                if self.on_first_token is not None:
                    self.on_first_token(req)

    def _prefill_ended(self, req: Request, now: int) -> int:
        """A prefill (or a preempted request's recompute) produced its token: the first token's
        time if it is the first, the end of the preemption's loss if it was a recompute. Returns
        the KV length (the new token's slot is taken by the next step)."""
        req.generated += 1
        if req.first_token_ns < 0:
            req.first_token_ns = now
        if req.killed_ns >= 0:
            req.preempt_loss_ns += now - req.killed_ns
            req.killed_ns = -1
        return req.prompt + req.generated - 1

    def end_decode_run(self, now: int) -> None:
        run = self._run
        k = run.k_end
        if run.end_ns != now:
            raise audit.AuditError("clock", f"instance {self.id}: run of {k} steps ends at "
                                            f"{run.end_ns} ns, woken at {now} ns")
        allocated = run.blocks_over(k)
        self.used_integral += run.used_integral(k, self.capacity)
        self.free = run.free0 - allocated
        self.held += allocated
        self.steps += k
        self.ctx += k * len(self.running)
        self.phase = IDLE
        heap, last = self.heap, self.steps - 1
        while heap and (heap[0][2].admit_seq != heap[0][1] or heap[0][0] == last):
            _, seq, req = heapq.heappop(heap)
            if req.admit_seq == seq:
                self.finish_request(req, self._drop_running(req), now)

    def finish_request(self, req: Request, blocks: int, now: int) -> None:
        if req.generated != req.output:  # every request generates exactly its output tokens (RequestSpec)
            raise audit.AuditError("accounting", f"request {req.id} finished with {req.generated} of its "
                                                 f"{req.output} output tokens")
        if req.priority == HIGH:
            self.priority_hosted -= 1
        self.predicted_tokens -= req.predicted_tokens
        self.free += blocks
        self.held -= blocks
        self._audit_blocks("finish")
        self._count_in_system(now, -1)
        req.at = -1
        req.end("finished", now)
        watch = self._watches.pop(req.id, None)
        if watch is not None:
            watch("finished", req)
        if self.on_finish is not None:
            self.on_finish(req)

    def schedule_step(self, now: int) -> None:
        """Start the next step at `now`: a prefill if the head of the queue fits, else decode."""
        if self._admit(now):
            return
        if not self.running:
            audit.check_recount(f"instance {self.id} without a batch", self.held, self.recount_held())
            return
        queued = len(self.waiting)
        self.preempt_until_fits(now)
        if not self.running:  # everything was preempted: the head now fits
            self.schedule_step(now)
            return
        if not self.fast:
            audit.check_recount(f"instance {self.id} step {self.steps}", self.held, self.recount_held())
        # with a spare block a victim may fit again after one step (the step can leave free what it
        # freed); without one it cannot, so the run goes on until blocks free up
        self.start_decode_run(now, max_k=1 if self.spare and len(self.waiting) > queued else 0)

    def _admit(self, now: int) -> bool:
        """Admit from the head of the queue; if any, start a prefill-only step for them."""
        waiting, bs = self.waiting, self.bs
        budget = self.free - self.watermark
        tokens = sq = 0
        admitted = self._prefilling
        while waiting:
            req = waiting[0]
            t = req.recompute_tokens
            blocks = -(-t // bs)
            if blocks > budget or self.num_running() >= self.max_seqs or tokens + t > self.max_tokens:
                break
            self._take_head(now)
            budget -= blocks
            self.free -= blocks
            self.held += blocks
            tokens += t
            sq += t * t
            self.running[req.id] = req
            admitted.append(req)
        if not admitted:
            return False
        self._audit_blocks("admit")
        self.phase = PREFILL
        self._wake_at(now + self.cost.prefill_ns(tokens, sq), now)
        return True

    def _take_head(self, now: int) -> Request:
        """Admit the head of the queue: out of the waiting counters, its first admission time kept."""
        req = self.waiting.popleft()
        self.waiting_tokens -= req.recompute_tokens
        if req.preemptions:
            self.waiting_preempted -= 1
        if req.admitted_ns < 0:
            req.admitted_ns = now
        if self.ae_loss and req.killed_ns >= 0:
            req.preempt_loss_ns += now - req.killed_ns + self._ae_recompute_ns(req.output)
            req.killed_ns = -1
        return req

    def _ae_recompute_ns(self, output: int) -> int:
        """The artifact's recompute term of one preemption (EngineConfig.preemption_loss "ae"): the
        prefill of the request's final output length padded to 8, less a decode step of batch 8 over
        that many tokens (process_log.py:87-89: the profiled GPU latencies; the gap cancels out, the
        engine's CPU time per sequence is taken off)."""
        tokens = -(-output // 8) * 8
        decode = self.cost.decode_ns(8, output) - 8 * self.cost.cfg.cpu_ns_per_seq
        return self.cost.prefill_ns(tokens, tokens * tokens) - decode

    def preempt_until_fits(self, now: int) -> None:
        """Recompute-preempt the running request that arrived last until this step's blocks fit.

        vLLM 0.2 (and the paper's artifact, docs/llumnix-code-notes.md H-AE-6) sorts the running
        batch by arrival (FCFS) before every decode step and preempts from the tail, so a request
        re-admitted after a preemption or migrated in keeps its place by arrival: it is not the
        next victim merely because it joined this batch last. A parked request (P/D wait) is in
        that order too: it stays in vLLM's running queue.
        """
        hist, slot = self.hist, (-self.steps) % self.bs
        while self.running and not self._step_fits():
            req = max(chain(self.running.values(), (r for r, _ in self.parked.values())), key=arrival_order)
            if req.id in self.running:
                blocks = self._drop_running(req)
            else:
                del self.parked[req.id]
                blocks = -(-(req.prompt + req.generated - 1) // self.bs)
            self.free += blocks
            self.held -= blocks
            req.preemptions += 1
            req.killed_ns = now
            self._push_waiting(req, head=True)
            self._audit_blocks("preempt")
            watch = self._watches.pop(req.id, None)
            if watch is not None:
                watch("preempted", req)

    def _step_fits(self) -> bool:
        """Whether the next decode step can append every running sequence's slot. vLLM 0.2 with
        `spare` (block_manager.py:124-129, scheduler.py:274-290) wants a free block for each sequence
        at its turn, in arrival order, whether or not it crosses a block boundary: the step's new
        blocks plus one, less one if the last sequence is itself the one that takes the last block."""
        need = self.hist[(-self.steps) % self.bs]
        if self.spare and not self._tail_crosses(1):
            need += 1
        return need <= self.free

    def _tail_crosses(self, j: int) -> bool:
        """Whether the running request that arrived last takes a new block at the j-th decode step
        from now (j = 1: the next)."""
        tail = max(self.running.values(), key=arrival_order)
        return (tail.base + self.steps + j - 1) % self.bs == 0

    def start_decode_run(self, now: int, max_k: int = 0) -> None:
        """Plan the longest run of decode steps in which nothing but counters can change (at most
        max_k steps if max_k > 0)."""
        n, s = len(self.running), self.steps
        prefix = allocation_prefix(self.hist, s, self.bs)
        if self.fast:
            heap = self.heap
            while heap[0][2].admit_seq != heap[0][1]:
                heapq.heappop(heap)
            if self.spare:  # a block to spare, unless the step taking the last one is the tail's (_step_fits)
                k = steps_that_fit(self.free - 1, n, prefix)
                if (k + 1) // self.bs * n + prefix[(k + 1) % self.bs] == self.free and self._tail_crosses(k + 1):
                    k += 1
            else:
                k = steps_that_fit(self.free, n, prefix)
            k = min(k, heap[0][0] - s + 1)
        else:
            k = 1
        if max_k:
            k = min(k, max_k)
        if self.group is not None:
            k = 1
        alpha, beta = self.cost.decode_run_terms(n, self.ctx, self.ctx - self.prompts, self.slow_ppm)
        self._run = run = DecodeRun(now, k, self.free, alpha, beta, n,
                                    self.hist, s, prefix)
        self.phase = DECODE
        self.launch(run, now)

    def launch(self, run: DecodeRun, now: int) -> None:
        """Start the planned run now, or (a lockstep rank) with its group's next step."""
        if self.group is None:
            self._wake_at(run.end_ns, now)
        else:
            self.group.join(self, run, now)

    def wake_at_step_end(self, run: DecodeRun, now: int) -> None:
        """The group started the step (sim/lockstep.py): wake when it ends."""
        self._wake_at(run.end_ns, now)

    def close(self, now: int) -> None:
        """Bring the time integrals up to `now` (end of the simulation; the instance is idle)."""
        self._count_in_system(now, 0)
        self.used_integral += (self.capacity - self.free) * (now - self._used_since)
        self._used_since = now

    def recount_held(self) -> int:
        """Blocks the running and parked requests' KV lengths need, recounted one by one (for audits)."""
        bs = self.bs
        return (sum(-(-(r.base + self.steps) // bs) for r in self.running.values())
                + sum(-(-(r.prompt + r.generated - 1) // bs) for r, _ in self.parked.values()))
