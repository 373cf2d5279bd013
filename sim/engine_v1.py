"""One vLLM-V1-like serving instance: chunked prefill in a shared token budget, prefix caching.

What changes from the vLLM 0.2 instance (sim/instance.py), following vLLM V1's scheduler
(vllm/v1/core/sched/scheduler.py, 0.19; docs/simulator.md lists the deviations):
- Every step shares one token budget (max_num_batched_tokens): each running decode takes one
  token, then the requests whose prefill is still in progress take chunks in admission order,
  then, unless this step preempted, waiting requests are admitted from the head (FCFS, head-of-
  line blocking) while the budget lasts and the batch has room. A prompt longer than what is
  left of the budget is split over steps, so prefills and decodes share steps.
- Async scheduling (vLLM's default from 0.14; `async_scheduling`): each step is planned when the
  step before it starts, so a request that reaches a busy engine joins the step after next (one
  step more to its first token); one reaching an idle engine, or during a step after which nothing
  was planned, joins the next (vllm/v1/engine/core.py step_with_batch_queue, a queue of two).
- Admission needs free blocks for the whole sequence minus its prefix-cache hits
  (`scheduler_reserve_full_isl`, on by default in 0.19); there is no watermark.
- When a step cannot allocate, the request admitted last (decode or partial prefill) is
  preempted: its blocks are freed, its computed tokens reset, and it goes to the queue head.
- Prefix caching: every full block has a key (the prompt's chained `hash_ids`, continued over the
  output by `output_hash_ids` where the workload names the blocks an answer fills, else a key only
  the request itself can hit, e.g. its generated tokens). Freed blocks stay cached with their
  keys, evicted least-recently-freed first (a request's tail blocks before its head); a request
  admitted later reuses the cached blocks of its longest cached prefix (all but its last token)
  by reference count, and computes only the rest. Free blocks include the evictable cached ones,
  as vLLM reports them. Prompt blocks are published to the cache as each chunk completes, so a
  concurrent request with the same prefix shares them.

Pure decode steps still run in closed form (sim/instance.py): with nothing admissible, nothing
but counters changes until the next completion, block shortage or arrival. A step with prefill
chunks is one event; its time is StepCost.step_ns (sim/stepcost.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, repeat

from llumverify.settings.config import EngineConfig
from llumverify.scheduler.selection import migratable
from llumverify.sim import audit
from llumverify.sim.decode_run import DecodeRun, allocation_prefix
from llumverify.sim.instance import DECODE, Instance, Request
from llumverify.sim.stepcost import StepCost
from llumverify.sim.waits import Environment

Key = tuple[int, int]
GIB = 1 << 30


def vllm_serve_defaults(device_name: str, memory_bytes: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of `vllm serve` (V1) on a device, before vLLM's caps:
    EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py), OPENAI_API_SERVER usage context: 8,192
    and 1,024 on a device of >= 70 GiB whose name does not contain "a100", else 2,048 and 256."""
    return (8192, 1024) if memory_bytes >= 70 * GIB and "a100" not in device_name.lower() else (2048, 256)


class _DecodeTerms:
    """StepCost.decode_terms memoised per (batch size, slow-down): every decode run asks for them."""

    __slots__ = ("_cost", "_memo")

    def __init__(self, cost: StepCost) -> None:
        self._cost = cost
        self._memo: dict[tuple[int, int], tuple[int, int]] = {}

    def decode_terms(self, n: int, slow_ppm: int = 0) -> tuple[int, int]:
        terms = self._memo.get((n, slow_ppm))
        if terms is None:
            terms = self._memo[(n, slow_ppm)] = self._cost.decode_terms(n, slow_ppm)
        return terms

    def decode_run_terms(self, n: int, context: int, outputs: int, slow_ppm: int = 0) -> tuple[int, int]:
        """As CostModel.decode_run_terms; a V1 step costs nothing per output token held (sim/engines.py
        refuses cost.cpu_ns_per_output_token for this engine), so `outputs` does not count."""
        fixed, per_token = self.decode_terms(n, slow_ppm)
        return fixed + per_token * context, per_token * n


class V1Instance(Instance):
    """A vLLM V1 engine behind the same cluster-facing API as the vLLM 0.2 instance: it overrides
    the engine hooks (sim/instance.py) and keeps its prefix cache in helpers of its own."""

    def __init__(self, env: Environment, iid: int, engine: EngineConfig, cost: StepCost,
                 fast: bool = True, on_finish: Callable[[Request], None] | None = None,
                 priorities: bool = True) -> None:
        super().__init__(env, iid, engine, _DecodeTerms(cost), fast, on_finish, priorities)  # type: ignore[arg-type]
        self.step_cost = cost
        self.watermark = 0  # V1 admits without a watermark
        self.caching = engine.prefix_caching
        self._chunking: list[Request] = []  # admitted, prefill incomplete, in admission order
        self._step_chunks: list[tuple[Request, int]] = []  # the step in progress: (request, chunk tokens)
        self._refs: dict[Key, int] = {}  # cached block key -> requests using it (0: free, evictable)
        # free blocks in the order they are reused (front first): a cached key (1 block), or a run of
        # blocks nobody can hit again (a (None, n) marker -> their count), kept only for their place
        self._lru: OrderedDict[Key | tuple[None, int], int] = OrderedDict()
        self._lru_size = 0  # blocks in _lru: the rest of the free blocks are reused before all of them
        self._runs = 0  # markers made so far
        self._preempted_now = False
        self.prefill_tokens = 0  # tokens prefilled (computed), for the prefix-cache metrics
        self.hit_tokens = 0  # prompt tokens taken from the prefix cache instead
        # async scheduling: step k is planned when step k-1 starts, so only requests queued by then join it
        self.async_scheduling = engine.async_scheduling
        self._queued_ns: dict[int, int] = {}  # request id -> when it joined the queue (async only)
        self._last_step = (-1, -1)  # (start, end) ns of the last step that ran
        self._cutoff = 0  # requests queued after this cannot join the step being planned
        self._held = False  # the plan left a queued request out for the cutoff alone
        self._arriving = False  # enqueue is poking the run: a request, not another change

    # ---------------------------------------------------------------- cluster-facing API
    def enqueue(self, req: Request) -> None:
        if not self.async_scheduling:
            super().enqueue(req)
            return
        self._queued_ns[req.id] = self.env.now
        self._arriving = True
        try:
            super().enqueue(req)
        finally:
            self._arriving = False

    def take_waiting(self) -> list[Request]:
        taken = super().take_waiting()
        for req in taken:
            self._queued_ns.pop(req.id, None)
        return taken

    def steps_past_poke(self, now: int) -> int:
        """A request queued during a step cannot join the next with async scheduling (that step was
        planned when the one in progress began), so the run goes on one step more instead of ending
        at a boundary that admits nothing. Not with per-step reports: the cluster reads each boundary."""
        if not self._arriving or self.step_reports:
            return 0
        run = self._run
        return 1 if now > run.t0 + run.span(run.steps_done(now - run.t0)) else 0

    def num_running(self) -> int:
        return super().num_running() + len(self._chunking)

    def migratable(self, req: Request) -> bool:
        """A request sharing a cached block with another request stays; one whose cached blocks
        are its own can go (the rule: llumverify/scheduler/selection.py `migratable`)."""
        refs = self._refs
        return migratable([refs[k] for k in req.pins])

    def cached_prefix_tokens(self, req: Request) -> int:
        """Leading tokens of the request this instance would take from its prefix cache now (inside a decode run,
        after the evictions its completed steps made: cache-aware dispatch asks mid-run)."""
        if not self.caching:
            return 0
        self._catch_up_evictions()
        return len(self._lookup(req, req.recompute_tokens)[0]) * self.bs

    def claim(self, req: Request) -> None:
        """Its cached blocks become private: no request can start sharing them while it migrates."""
        for key in req.pins:
            del self._refs[key]
        req.pins = []

    def remove_running(self, req_id: int) -> Request:
        req = self.running[req_id]
        kv = req.base + self.steps
        lru = self._lru_size
        out = super().remove_running(req_id)
        if self._unpin(req, kv, to_cache=False) != -(-kv // self.bs):
            raise audit.AuditError("blocks", f"instance {self.id}: migrated request {req_id} shared cached blocks")
        if self._lru_size != lru:  # its blocks stay reserved for the copy: none may be handed out or hit
            raise audit.AuditError("blocks", f"instance {self.id}: migrated request {req_id}'s reserved blocks "
                                             "joined the free-block reuse order")
        return out

    def fail(self) -> list[Request]:
        now = self.env.now
        self._queued_ns.clear()
        chunking, self._chunking, self._step_chunks = self._chunking, [], []
        for req in chunking:
            req.at, req.admit_seq, req.computed, req.pins = -1, -1, 0, []
        for req in self.running.values():
            req.pins = []
        for req, _ in self.parked.values():
            req.pins = []
        self._count_in_system(now, -len(chunking))
        lost = super().fail()
        self._refs.clear()
        self._lru.clear()
        self._lru_size = 0
        return lost + chunking

    def recount_held(self) -> int:
        """Physical blocks in use, recounted: each request's private blocks plus every cached block
        some request uses (shared blocks count once)."""
        bs = self.bs
        for r in (*self.running.values(), *(r for r, _ in self.parked.values()), *self._chunking):
            # a request pins its leading blocks, each cached and in use: the counts below assume it
            if r.pins and (r.pins != list(self._keys(r, 0, len(r.pins))) or min(self._refs.get(k, 0) for k in r.pins) < 1):
                raise audit.AuditError("blocks", f"instance {self.id}: request {r.id} pins blocks that are not its "
                                                 "leading cached ones")
        private = sum(-(-(r.base + self.steps) // bs) - len(r.pins) for r in self.running.values())
        private += sum(-(-(r.prompt + r.generated - 1) // bs) - len(r.pins) for r, _ in self.parked.values())
        private += sum(-(-r.computed // bs) - len(r.pins) for r in self._chunking)
        return private + sum(1 for n in self._refs.values() if n > 0)

    # ---------------------------------------------------------------- prefix cache
    def _keys(self, req: Request, lo: int, hi: int) -> Iterator[Key]:
        """Cache keys of blocks lo..hi-1: from the prompt's chained hashes where they cover the whole
        block (the id of the hash block holding its last token, and its index), continued over the
        output where the workload gives its blocks ids too, else a key of this request alone (its
        generated tokens, or a prompt without hashes). The request's own keys come lazily: a lookup
        usually stops at the first."""
        spec, bs = req.spec, self.bs
        hb = spec.hash_block
        ids = spec.hash_ids + spec.output_hash_ids if spec.output_hash_ids else spec.hash_ids
        known = req.prompt + spec.output_tokens if spec.output_hash_ids else req.prompt
        hashed = min(known // bs, len(ids) * hb // bs) if hb else 0
        mid = max(lo, min(hi, hashed))
        shared = [(ids[((j + 1) * bs - 1) // hb], j) for j in range(lo, mid)]
        return chain(shared, zip(repeat(-1 - req.id), range(mid, hi)))

    def _lookup(self, req: Request, tokens: int) -> tuple[list[Key], int]:
        """Keys of the longest cached prefix (at most tokens - 1 tokens), and how many are evictable."""
        refs, keys, evictable = self._refs, [], 0
        for key in self._keys(req, 0, (tokens - 1) // self.bs):
            n = refs.get(key)
            if n is None:
                break
            keys.append(key)
            evictable += n == 0
        return keys, evictable

    def _publish(self, req: Request) -> None:
        """Publish the request's newly computed full prompt blocks that have shared keys."""
        refs = self._refs
        for key in self._keys(req, len(req.pins), req.computed // self.bs):
            if key[0] < 0 or key in refs:
                break
            refs[key] = 1
            req.pins.append(key)

    def _unpin(self, req: Request, kv: int, to_cache: bool, finished: bool = False) -> int:
        """Let go of a request's `kv` tokens of KV; returns the physical blocks freed (its blocks
        minus shared ones still used by others). to_cache keeps the freed full blocks cached; a
        finished request's own blocks (no shared key) only keep their place in the reuse order."""
        refs, bs = self._refs, self.bs
        logical = -(-kv // bs)
        still_used = 0
        order: list[Key | None] = []  # freed blocks in block order; None: nobody can hit it again
        for key in req.pins:
            n = refs[key] - 1
            if n:
                refs[key] = n
                still_used += 1
            elif to_cache and not (finished and key[0] < 0):
                refs[key] = 0
                order.append(key)
            else:
                del refs[key]
                if to_cache:
                    order.append(None)
        if to_cache and self.caching:
            for key in self._keys(req, len(req.pins), kv // bs):
                if (finished and key[0] < 0) or key in refs:  # none will hit it, or another block holds the key
                    order.append(None)
                else:
                    refs[key] = 0
                    order.append(key)
            if kv % bs:
                order.append(None)  # the partial last block: free, in its place in the order
            if len(order) != logical - still_used:  # every freed block, and only those, joins the reuse order
                raise audit.AuditError("blocks", f"instance {self.id}: request {req.id} freed "
                                                 f"{logical - still_used} blocks, {len(order)} joined the reuse order")
        if order:
            self._to_lru(reversed(order))  # vLLM frees a request's blocks tail first: reused before its head
        req.pins = []
        return logical - still_used

    def _to_lru(self, blocks) -> None:
        """Append freed blocks (keys, or None for a block nobody can hit) at the back of the reuse order."""
        lru, run, total = self._lru, 0, 0
        for key in blocks:
            total += 1
            if key is None:
                run += 1
                continue
            if run:
                self._runs += 1
                lru[(None, self._runs)] = run
                run = 0
            lru[key] = 1
        if run:
            self._runs += 1
            lru[(None, self._runs)] = run
        self._lru_size += total

    def release(self, blocks: int) -> None:
        """Blocks a migration returns join the back of the reuse order (nobody can hit them)."""
        super().release(blocks)
        if self.caching and blocks:
            self._to_lru([None] * blocks)

    def _trim_cache(self) -> None:
        """Reuse free blocks from the front of the order until every cached free block is a free block."""
        self._evict_to(self.free)

    def _evict_to(self, free: int) -> None:
        excess = self._lru_size - free
        if excess <= 0:
            return
        lru, refs = self._lru, self._refs
        self._lru_size = free
        while excess > 0:
            key, n = lru.popitem(last=False)
            if key[0] is None:
                if n > excess:
                    lru[key] = n - excess
                    lru.move_to_end(key, last=False)
                    return
                excess -= n
            else:
                del refs[key]
                excess -= 1

    def decode_run_unaffected(self) -> bool:
        """Also: what the run's boundaries will evict from the reuse order (evicted lazily, at a
        boundary or a release) is only blocks nobody can hit, so no prefix lookup can tell when."""
        if not super().decode_run_unaffected():
            return False
        run = self._run
        excess = self._lru_size - (run.free0 - run.blocks_over(run.k_end))
        for key, n in self._lru.items():
            if excess <= 0:
                return True
            if key[0] is not None:
                return False
            excess -= n
        return excess <= 0

    def adjust_free(self, delta: int) -> None:
        """Inside a decode run, first evict what the run's completed steps allocated over, so blocks
        returned now do not spare those cached blocks. Outside one, blocks set aside (a migration's or hand-off's
        reservation on an idle instance) take cached free blocks from the front of the reuse order at once: a later
        prefix lookup must not hit them (it hit KV the reservation owned)."""
        if delta > 0:
            self._catch_up_evictions()
        super().adjust_free(delta)
        if delta < 0 and self.phase != DECODE:
            self._trim_cache()

    def _catch_up_evictions(self) -> None:
        """Inside a decode run (priced in closed form), evict the cached blocks its completed steps have allocated
        over, as each step does when run one by one: what the cache holds now is then the same on both paths."""
        if self.phase == DECODE and self._lru_size:
            run = self._run
            self._evict_to(run.free0 - run.blocks_over(run.in_progress(self.env.now)))

    # ---------------------------------------------------------------- the engine
    def finish_request(self, req: Request, blocks: int, now: int) -> None:
        super().finish_request(req, self._unpin(req, req.prompt + req.generated - 1, to_cache=True, finished=True), now)

    def _last_admitted(self) -> Request:
        """The tail of V1's running queue: the latest admitted of the decodes, the partial prefills
        and the parked requests (P/D wait: still in that queue, so preemptible like the others)."""
        best = max(self.running.values(), key=lambda r: r.admit_seq) if self.running else None
        if self._chunking and (best is None or self._chunking[-1].admit_seq > best.admit_seq):
            best = self._chunking[-1]
        if self.parked:
            req, seq = max(self.parked.values(), key=lambda p: p[1])
            if best is None or seq > best.admit_seq:
                best = req
        assert best is not None
        return best

    def _preempt(self, req: Request, now: int) -> None:
        """Recompute-preempt `req`: free its blocks (kept cached), back to the head of the queue."""
        if req.id in self.running:
            self._drop_running(req)
            kv = req.prompt + req.generated - 1
        elif req.id in self.parked:
            del self.parked[req.id]
            kv = req.prompt + req.generated - 1
        else:
            self._chunking.remove(req)
            req.admit_seq = -1
            kv = req.computed
        freed = self._unpin(req, kv, to_cache=True)
        self.free += freed
        self.held -= freed
        req.computed = 0
        req.preemptions += 1
        if req.killed_ns < 0:
            req.killed_ns = now
        self._push_waiting(req, head=True)
        self._preempted_now = True
        self._audit_blocks("preempt")
        watch = self._watches.pop(req.id, None)
        if watch is not None:
            watch("preempted", req)

    def _spare(self) -> int:
        """Free blocks left once this step's decodes have their next slots (they are served first)."""
        return self.free - self.hist[(-self.steps) % self.bs]

    def preempt_until_fits(self, now: int) -> None:
        """Every decode needs its next slot: preempt the last admitted request until they fit."""
        hist, slot = self.hist, (-self.steps) % self.bs
        while hist[slot] > self.free:
            self._preempt(self._last_admitted(), now)

    def schedule_step(self, now: int) -> None:
        """Plan the next step: decodes, then chunks of partial prefills, then admissions."""
        self._preempted_now = False
        bs = self.bs
        self.preempt_until_fits(now)
        budget = self.max_tokens - len(self.running)
        chunks: list[tuple[Request, int]] = []
        for req in list(self._chunking):
            if budget <= 0:
                break
            if req not in self._chunking:  # preempted for an earlier chunk of this step
                continue
            c = min(req.recompute_tokens - req.computed, budget)
            need = -(-(req.computed + c) // bs) - -(-req.computed // bs)
            while need > self._spare() and req in self._chunking:
                self._preempt(self._last_admitted(), now)
            if req not in self._chunking:
                break
            self.free -= need
            self.held += need
            chunks.append((req, c))
            budget -= c
        start, end = self._last_step
        self._cutoff = start if end == now else now  # busy until now: this step was planned at `start`
        self._held = False
        if not self._preempted_now:
            budget = self._admit_waiting(now, budget, chunks)
            if self._held and not chunks and not self.running:  # nothing was planned ahead: plan it now
                self._cutoff = now
                budget = self._admit_waiting(now, budget, chunks)
        self._trim_cache()
        if chunks:
            self._audit_blocks("admit")
            self._start_step(now, chunks)
            return
        if not self.running:
            audit.check_recount(f"instance {self.id} without a batch", self.held, self.recount_held())
            return
        if not self.fast:
            audit.check_recount(f"instance {self.id} step {self.steps}", self.held, self.recount_held())
        self.start_decode_run(now, max_k=1 if self._preempted_now else 0)

    def _admit_waiting(self, now: int, budget: int, chunks: list[tuple[Request, int]]) -> int:
        """Admit from the head of the queue while the budget, the batch and the KV cache allow. With
        async scheduling a request queued after the cutoff is not in the plan's queue: it is stepped
        over (a high-priority arrival queued ahead of older requests must not block them) and put back."""
        waiting, bs, refs, lru = self.waiting, self.bs, self._refs, self._lru
        unseen: list[Request] = []
        while waiting and budget > 0 and self.num_running() < self.max_seqs:
            req = waiting[0]
            if self._queued_ns.get(req.id, -1) > self._cutoff:
                self._held = True
                unseen.append(waiting.popleft())
                continue
            tokens = req.recompute_tokens
            # this step's decode slots, chunks and earlier admissions have taken free blocks: the cached ones they took
            # from the front of the reuse order are gone before the lookup (vLLM V1 allocates them first)
            self._evict_to(max(self._spare(), 0))
            keys, evictable = self._lookup(req, tokens) if self.caching else ([], 0)
            hits = len(keys)
            if -(-tokens // bs) - hits + evictable > self._spare():  # the whole sequence must fit
                break
            self._take_head(now)
            self._queued_ns.pop(req.id, None)
            for key in keys:
                if refs[key] == 0:
                    del lru[key]
                    self._lru_size -= 1
                    self.free -= 1
                    self.held += 1
                refs[key] += 1
            req.pins = keys
            req.computed = hits * bs
            self.hit_tokens += hits * bs
            c = min(tokens - req.computed, budget)
            need = -(-(req.computed + c) // bs) - hits
            self.free -= need
            self.held += need
            self._admit_counter += 1
            req.admit_seq = self._admit_counter
            self._chunking.append(req)
            chunks.append((req, c))
            budget -= c
        waiting.extendleft(reversed(unseen))
        return budget

    def _start_step(self, now: int, chunks: list[tuple[Request, int]]) -> None:
        """One step with prefill chunks (and every running decode): a run of exactly one step."""
        alpha = self.step_cost.step_ns([(c, r.computed) for r, c in chunks], len(self.running),
                                        self.ctx, self.slow_ppm)
        self._run = DecodeRun(now, 1, self.free, alpha, 0, len(self.running), self.hist, self.steps,
                              allocation_prefix(self.hist, self.steps, self.bs))
        self._step_chunks = chunks
        self.phase = DECODE
        self.launch(self._run, now)

    def start_decode_run(self, now: int, max_k: int = 0) -> None:
        """A closed-form decode run, ended before the first step whose admission could succeed: the
        free blocks left after a step's decodes rise and fall with which requests cross a block
        boundary, so the queue head may fit a few steps in although it does not fit now."""
        if self.fast and self.waiting and not max_k and self.num_running() < self.max_seqs \
                and self.max_tokens > len(self.running):
            head = self.waiting[0]
            tokens = head.recompute_tokens
            keys, evictable = self._lookup(head, tokens) if self.caching else ([], 0)
            demand = -(-tokens // self.bs) - len(keys) + evictable  # never falls during the run
            bs, s, hist, free = self.bs, self.steps, self.hist, self.free
            taken = hist[(-s) % bs]
            for j in range(1, bs):  # spare after step j's decodes; it repeats n lower every bs steps
                taken += hist[(-(s + j)) % bs]
                if free - taken >= demand:
                    max_k = j
                    break
        super().start_decode_run(now, max_k)

    def end_decode_run(self, now: int) -> None:
        run = self._run
        if run.k_end:
            self._last_step = (run.t0 + run.span(run.k_end - 1), now)
        chunks, self._step_chunks = self._step_chunks, []
        self._evict_to(self._run.free0 - self._run.blocks_over(self._run.k_end))  # before finished requests free blocks
        super().end_decode_run(now)
        for req, c in chunks:
            req.computed += c
            self.prefill_tokens += c
            if self.caching:
                self._publish(req)
            if req.computed < req.recompute_tokens:
                continue
            self._chunking.remove(req)
            kv = self._prefill_ended(req, now)
            if req.generated >= req.output:
                self.finish_request(req, 0, now)  # blocks: recounted from its KV by finish_request
            else:
                self._join_batch(req, kv, seq=req.admit_seq)  # keeps its place in admission order
                if self.on_first_token is not None:
                    self.on_first_token(req)
        self._trim_cache()


def prefix_cache_metrics(instances: Sequence[Instance]) -> dict[str, object]:
    """The engine's summary entries: prefix_hit_rate = prompt tokens served from the prefix cache /
    prompt tokens admitted (cached + computed, re-prefills after preemption included);
    prefill_tokens_saved = the cached ones."""
    v1 = [inst for inst in instances if isinstance(inst, V1Instance)]
    hits = sum(inst.hit_tokens for inst in v1)
    computed = sum(inst.prefill_tokens for inst in v1)
    return {"prefix_hit_rate": hits / (hits + computed) if hits + computed else 0.0,
            "prefill_tokens_saved": hits, "prefill_tokens_computed": computed}
