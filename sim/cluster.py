"""The global scheduler as SimPy processes: arrivals, dispatch, the migration loop, autoscaling,
instance failures and sampling.

Loads are exact at every decision (computed lazily from each instance's closed-form state),
reported per step as in the AE (computed when a step is scheduled, seen when it ends:
Instance.reported), or polled every report_interval_s (HEAD: 50 ms); with reports, requests
dispatched since an instance's last report are invisible except for the per-instance dispatch
counts, which the scheduler itself keeps. A policy that migrates (llumnix) pairs
instances every migration round and runs each pair's migration through the shared protocol
(sim/migration.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any, cast

import simpy

from llumverify.errors import UserError
from llumverify.settings.config import SimConfig
from llumverify.scheduler.autoscale import decide, drains_to_cancel
from llumverify.scheduler.dispatch import Policy, least_loaded
from llumverify.scheduler.index import FreenessIndex
from llumverify.scheduler.freeness import fragmentation, migration_freeness, migration_freeness_at
from llumverify.scheduler.pairing import MigrationLoad, pair_instances
from llumverify.scheduler.pd import decode_target
from llumverify.scheduler.prediction import predicted_output
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.scheduler.threshold import next_threshold, observe
from llumverify.sim import audit
from llumverify.sim.costmodel import CostModel
from llumverify.sim.engine_profile import resolve
from llumverify.sim.engines import Engine, get_engine
from llumverify.sim.frontend import engine_arrivals
from llumverify.sim.instance import Instance, Request
from llumverify.sim.lockstep import LockstepGroup
from llumverify.sim.migration import Migration, Migrations
from llumverify.sim.records import Ledger, Row
from llumverify.sim.samples import Repeats, Ticks
from llumverify.sim.stepcost import StepCost
from llumverify.sim.waits import Environment, Task
from llumverify.requests import HIGH, RequestSpec, chained_successors

NS = 1_000_000_000
SERIES_KEYS = ("t_s", "kv_util_mean", "fragmentation", "instances", "waiting", "migrations_inflight")
ProcessGenerator = Generator[simpy.Event, Any, None]  # the cluster's SimPy processes
REFERENCE_DECODE = (32, 8192)  # the calibration decode step (32 sequences, 8k KV tokens): a round's unit


def to_ns(seconds: float) -> int:
    """Seconds to integer simulated nanoseconds."""
    return round(seconds * NS)


def sequence_limit(cfg: SimConfig, engine: Engine) -> int:
    """The most tokens one request's KV may hold on an instance: the whole cache for an engine with
    chunked prefill (no watermark), else what is above the watermark and within the prefill budget."""
    if engine.chunked_prefill:
        return cfg.engine.num_blocks * cfg.engine.block_size
    usable = cfg.engine.num_blocks - cfg.engine.watermark_blocks
    return min(usable * cfg.engine.block_size, cfg.engine.batch_limits()[1])


def rejection(spec: RequestSpec, limit: int, max_model_len: int | None = None) -> str:
    """Why a request can never run on an instance holding `limit` tokens ('' if it can): its prompt,
    or its whole sequence (a preempted request re-prefills its prompt plus its generated tokens); or
    why the engine refuses it: longer than `max_model_len`, prompt plus the tokens it asks for (vLLM's
    API server answers 400 to prompt + max_tokens over the model length)."""
    if max_model_len is not None and spec.prompt_tokens + spec.output_tokens > max_model_len:
        return "prompt_exceeds_max_model_len" if spec.prompt_tokens > max_model_len else "sequence_exceeds_max_model_len"
    if spec.prompt_tokens > limit:
        return "prompt_exceeds_capacity"
    if spec.prompt_tokens + spec.output_tokens - 1 > limit:
        return "sequence_exceeds_capacity"
    return ""


class Cluster:
    """Instances plus the processes that feed them; `run()` simulates until every request ended.

    record=True keeps every migration transition (tests replay them through the Z3 relation).
    Ended requests go to `ledger` (sim/records.py): keep_records=True also keeps every Request
    (`records`); `on_row` hears each request's output row, in arrival order.
    """

    def __init__(self, specs: Sequence[RequestSpec], policy: Policy, cfg: SimConfig, record: bool = False,
                 on_progress: Callable[[int], None] | None = None, keep_records: bool = False,
                 on_row: Callable[[Row], None] | None = None) -> None:
        cfg = resolve(cfg)  # the step costs and KV capacity the hardware settings name
        self.env = Environment()
        self._on_progress = on_progress  # told the number of ended requests, about 200 times a run
        self._progress_every = max(1, len(specs) // 200)
        self.cfg = cfg
        self.policy = policy
        self.specs = specs
        self.cost = CostModel(cfg.cost)
        self.engine: Engine = get_engine(cfg.engine.generation)
        # typed `object` in the config, which does not import the simulator
        self.step_cost = cast(StepCost, cfg.step) if self.engine.step_costs else None
        self.instances: list[Instance] = []
        # times a drained, idle instance stayed because a migration still used it (scale-down under load)
        self.removals_held = 0
        # park-offer timers that found their request parked again since (P/D wait): nothing offered for them
        self.stale_offers = 0
        self._starting: set[int] = set()
        self._rng = random.Random(cfg.failures.seed)
        crash_free = not cfg.failures.at and cfg.failures.rate_per_hour == 0
        self.migrations = Migrations(self.env, cfg.migration, self.cost, self._lost,
                                     cfg.scheduler.migrate_select, record, crash_free=crash_free,
                                     on_forget=self._migration_forgotten)
        self.roles = cfg.cluster.roles()
        self._dispatch_roles = ("prefill", "neutral") if cfg.cluster.pd else None
        self._migration_roles = ("decode", "neutral") if cfg.cluster.pd else None
        # P/D: every hand-off runs the pd variant's single blocking stage, however many blocks remain
        self.handoffs = Migrations(self.env, replace(cfg.migration, variant=cfg.migration.pd_variant,
                                                     last_stage_blocks=cfg.engine.num_blocks, slowdown_ppm=0),
                                   self.cost, self._lost, cfg.scheduler.migrate_select, record, handoffs=True,
                                   on_over=self._handoff_over, crash_free=crash_free) if cfg.cluster.pd else None
        self._max_tokens = sequence_limit(cfg, self.engine)
        self._max_model_len = cfg.engine.max_model_len
        self.ledger = Ledger(len(specs), keep_records, on_row)
        self._ended = 0
        self._done = self.env.event()
        self._reports: dict[int, InstanceSnapshot] | None = None  # the last poll's, when polled
        self._stale = cfg.cluster.report_interval_s > 0 or cfg.cluster.step_reports  # loads are reports
        self._wake: simpy.Event | None = None  # the migration rounds sleep on it while the cluster is idle
        self.frag_samples = Repeats()
        self._ticks = Ticks()
        self._values: dict[str, Repeats] = {k: Repeats() for k in SERIES_KEYS if k != "t_s"}
        self.series: dict[str, Repeats | Ticks] = {k: self._values.get(k, self._ticks) for k in SERIES_KEYS}
        self.end_ns = 0  # when the simulation stopped (>= makespan_ns when migrations had to settle)
        self.makespan_ns = 0  # when the last request ended
        self._last_ns = 0
        self._arrivals_done = False
        # closed-loop users (cluster.users): a due request whose user's previous request has not
        # ended waits, keyed by that request's id; `_open` holds the ids due and not yet ended
        self._waiting_on: dict[int, RequestSpec] = {}
        self._open: set[int] = set()
        # a closed-loop request's end, until its user's next one is due (at most one entry per user)
        self._ended_at: dict[int, int] = {}
        self._held = 0  # closed-loop requests released, arriving after their user's own time (RequestSpec.after_s)
        # chained requests (RequestSpec.chained) by the id of the request whose end sends them; their ids.
        # A pending one does not hold the arrivals open (_arrivals_done): its predecessor is open, so an
        # instance is active or a request held, and a chain that cannot go on ends the run (stalled audit)
        self._after = chained_successors(specs)
        self._chained = {s.id for s in self._after.values()}
        if self._chained and cfg.cluster.users:
            raise UserError("chained requests (RequestSpec.chained: their users' own closed loops) cannot also be "
                            f"sent by cluster.users' round robin (--users {cfg.cluster.users})")
        self._all_due = False
        self.threshold = cfg.scheduler.migrate_threshold  # T; moved every round when auto_threshold
        self.thresholds: list[float] = []  # T of every migration round, when auto_threshold
        self._seen_migrations = (0, 0)  # (committed, refused) at the last round, for the controller
        self.handoff_fallbacks = 0  # P/D: times a request stayed on its prefill instance (no taker / aborted)
        self._offers_due = 0  # P/D wait: parked requests whose next offer is scheduled
        self._crashes_due = 0  # scheduled crashes still to come (one may re-dispatch or end a stuck request)
        self._source_since: dict[int, tuple[int, float]] = {}  # instance -> (version, when it becomes a source)
        if cfg.scheduler.auto_threshold and policy.migrates:
            self.series["threshold"] = self._values["threshold"] = Repeats()
        # Indexes of F_d for least-loaded dispatch and P/D hand-offs (scheduler/index.py): exact while
        # loads are fresh and no instance starts up or drains; otherwise every decision scans.
        indexed = not self._stale and not cfg.autoscale.enabled
        self._dispatch_index = FreenessIndex(self._fresh_snapshot) \
            if indexed and policy.dispatch is least_loaded and not policy.prefix_aware else None
        self._decode_index = FreenessIndex(self._fresh_snapshot) if indexed and cfg.cluster.pd else None
        for _ in range(cfg.cluster.num_instances):
            self._add_instance()
        step = cfg.cluster.lockstep
        for first in range(0, len(self.instances), step) if step > 1 else ():
            group = LockstepGroup(self.env)
            for inst in self.instances[first:first + step]:
                inst.group = group

    # ------------------------------------------------------------------ processes
    def run(self) -> None:
        """Simulate every request to its end, then close the books (time integrals, audits)."""
        processes = [self._arrivals(), self._sampler()]
        if self.cfg.cluster.report_interval_s > 0:
            self._reports = {inst.id: inst.snapshot() for inst in self.instances}
            processes.append(self._poller())
        if self.policy.migrates:
            processes.append(self._migration_rounds())
        if self.cfg.autoscale.enabled:
            processes.append(self._autoscaler())
        tasks = [Task(self.env, gen) for gen in processes]  # each as a SimPy Process would run it
        for iid, t in self.cfg.failures.at:
            self._fail_at(iid, to_ns(t))
        if self.specs:
            try:
                self.env.run(until=self._done)
            except RuntimeError as exc:
                if "No scheduled events left" not in str(exc):
                    raise
                raise self._stall_error("nothing left to happen") from None
        self.makespan_ns = self.env.now
        mc = self.cfg.migration
        # late frees, leases and timeouts, and a copy still in flight after S timed out on it
        # (no stage copies more than an instance's blocks, shared at most by every pair of instances)
        sharers = max(self.cfg.cluster.num_instances, self.cfg.autoscale.max_instances) // 2 if mc.shared_copies else 1
        longest_copy = self.cost.copy_stage_ns(self.cfg.engine.num_blocks, self.cfg.engine.block_size, max(1, sharers))
        settle_by = self.env.now + 2 * to_ns(mc.rpc_timeout_s + mc.lease_s + mc.lease_check_s) + longest_copy
        while (self.migrations.live or self._handoffs_live()) and self.env.peek() != float("inf"):
            if self.env.peek() > settle_by:
                raise audit.AuditError("protocol", f"migrations {[m.id for m in self.migrations.live]} did not "
                                                   f"settle after the last request")
            self.env.step()  # let migrations settle (late frees, leases, timeouts) after the last request
        self.end_ns = self.env.now
        for inst in self.instances:
            inst.close(self.end_ns)
        self.migrations.close()
        if self.handoffs is not None:
            self.handoffs.close()
        self._audit_end()
        for task in tasks:  # the periodic ones wait for ever (waits.Task.gen says why this matters)
            task.close()

    def _arrivals(self) -> ProcessGenerator:
        """Each request as it becomes due. With closed-loop users (cluster.users = N), request k (in
        arrival order) is user k mod N's, or the user its spec names (RequestSpec.user: a replayed
        client or conversation), and is sent only once that user's previous request has ended (multi-turn
        chat) and the user's own time after it (RequestSpec.after_s) has passed: until then it waits,
        and `_ended_one` sends it. A chained request (RequestSpec.chained) is skipped here: its user's
        previous one's end sends it, whenever it is due."""
        env = self.env
        users = self.cfg.cluster.users
        latest: dict[int, int] = {}  # user -> id of its latest due request
        for k, (t, sent, spec) in enumerate(engine_arrivals(self.specs, self.cfg.cost, to_ns)):
            if self._chained and spec.id in self._chained:
                continue
            if t > env.now:
                yield env.timeout(t - env.now)
            user = spec.user if spec.user >= 0 else k % users if users else -1
            if user >= 0:
                prev = latest.get(user)
                latest[user] = spec.id
                self._open.add(spec.id)
                if prev is not None and prev in self._open:
                    self._waiting_on[prev] = spec
                    continue
                ready = self._ended_at.pop(prev, 0) + to_ns(spec.after_s) if prev is not None else 0
                if ready > env.now:
                    self._hold(spec, ready - env.now)
                    continue
            self._send(spec, sent)
        self._all_due = True
        self._arrivals_done = not self._waiting_on and not self._held

    def _send(self, spec: RequestSpec, sent: int) -> None:
        """The request reaches the cluster now (sent at `sent`: earlier only through the front end)."""
        now = self.env.now
        audit.check_clock("cluster arrivals", self._last_ns, now)
        self._last_ns = now
        req = Request(spec, now, sent)
        sched = self.cfg.scheduler
        if sched.prediction_error:
            req.predicted_tokens = spec.prompt_tokens + predicted_output(spec, sched.prediction_error,
                                                                         sched.prediction_seed)
        self.ledger.arrive(req)
        reason = self._rejection(spec)
        if reason:
            req.end(f"rejected:{reason}", now)
            self._ended_one(req)
            return
        self._dispatch(req)

    def _hold(self, spec: RequestSpec, delay_ns: int) -> None:
        """Sends a closed-loop user's request after delay_ns (a timeout's callback: even at 0 it runs
        after the event that ended the user's previous request, outside the instance that ended it)."""
        self._held += 1
        self.env.timeout(delay_ns).callbacks.append(self._release(spec))

    def _release(self, spec: RequestSpec) -> Callable[[simpy.Event], None]:
        def send(_: simpy.Event) -> None:
            self._held -= 1
            self._send(spec, self.env.now)
            self._arrivals_done = self._all_due and not self._waiting_on and not self._held
        return send

    def _poller(self) -> ProcessGenerator:
        period = to_ns(self.cfg.cluster.report_interval_s)
        while not self._stalled():
            yield self.env.timeout(period)
            self._reports = {inst.id: inst.snapshot() for inst in self._serving()}

    def _sampler(self) -> ProcessGenerator:
        """Samples fragmentation and the time series at a fixed simulated-time period.

        While no instance is active nothing a sample reads changes before the next scheduled event,
        so the samples due before it repeat the last one and are written at once (an idle gap costs
        no events and no load reads, and its samples one run each: sim/samples.py)."""
        period = to_ns(self.cfg.sample_interval_s)
        wait = period
        while not self._stalled():
            yield self.env.timeout(wait)
            self._sample()
            wait = period
            nxt = self.env.peek()
            if nxt != float("inf") and not any(inst.active for inst in self.instances):
                repeats = max((int(nxt) - self.env.now - 1) // period, 0)  # sample times strictly before nxt
                self._repeat_sample(repeats, period)
                wait += repeats * period

    def _repeat_sample(self, repeats: int, period: int) -> None:
        """The samples of the next `repeats` periods, equal to the last one but for their times."""
        self._ticks.extend_ns(self.env.now + period, period, repeats)
        for values in self._values.values():
            values.repeat(repeats)
        self.frag_samples.repeat(repeats)

    def _sample(self) -> None:
        """One sample of fragmentation and the time series, from the loads now."""
        snaps = [inst.snapshot() for inst in self._serving()]
        frag = fragmentation(snaps)
        self.frag_samples.append(frag)
        self._ticks.append_ns(self.env.now)
        s = self._values
        s["kv_util_mean"].append(sum(1 - x.free_blocks / x.num_blocks for x in snaps) / len(snaps) if snaps else 0.0)
        s["fragmentation"].append(frag)
        s["instances"].append(float(sum(not inst.dead for inst in self.instances)))
        s["waiting"].append(float(sum(x.num_waiting for x in snaps)))
        s["migrations_inflight"].append(float(self.migrations.inflight))
        if "threshold" in s:
            s["threshold"].append(self.threshold)

    def round_period_ns(self) -> int:
        """A migration round every period_steps reference decode steps (about N steps per instance)."""
        sched = self.cfg.scheduler
        if sched.round_period_s > 0:
            return to_ns(sched.round_period_s)
        if self.step_cost is not None:
            return sched.period_steps * self.step_cost.step_ns((), REFERENCE_DECODE[0], REFERENCE_DECODE[1])
        return sched.period_steps * self.cost.decode_ns(REFERENCE_DECODE[0], REFERENCE_DECODE[1])

    def _migration_rounds(self) -> ProcessGenerator:
        period = self.round_period_ns()
        while not self._stalled():
            if self._idle():
                # A round on an idle cluster finds no source. Sleep until the next dispatch and resume
                # on the same round grid, so results are those of running every round, while an idle
                # gap no longer costs gap / period events (millions with tiny step costs).
                self._wake = self.env.event()
                yield self._wake
                yield self.env.timeout(-self.env.now % period)
            else:
                yield self.env.timeout(period)
            if self._stalled():
                self._check_progress()
            self.migration_round()

    def _idle(self) -> bool:
        """No request anywhere and no migration in flight, and loads not polled (exact loads, or per-step
        reports: an idle AE instance steps no more, so it sends no report that would trigger a round)."""
        return (self._reports is None and not self.migrations.busy and not self._handoffs_live()
                and not self._offers_due
                and not any(inst.running or inst.waiting or inst.active for inst in self.instances))

    def migration_round(self) -> None:
        """Pair sources and destinations by migration freeness and start one migration per pair."""
        sched = self.cfg.scheduler
        if not sched.auto_threshold and not self._stale and not self._may_have_source():
            return  # no pair can form: skip reading every load
        busy = self.migrations.busy
        snapshots = self._snapshots(self._migration_roles)  # P/D: Llumnix balances the decode instances
        if sched.auto_threshold:
            self._tune_threshold(snapshots)
        loads = [MigrationLoad(s.instance, migration_freeness(s, sched.head_only_freeness), s.num_preempted > 0,
                               s.instance in busy, s.terminating) for s in snapshots]
        for src, dst in pair_instances(loads, self.threshold):
            self.migrations.start(self.instances[src], self.instances[dst])

    def _may_have_source(self) -> bool:
        """Whether some instance that migration rounds pair may be a source (pairing.is_source) now.

        Per instance, the time from which it is a source is kept until its `version` changes: its
        load changes only then, apart from the free blocks a decode run takes step by step, and
        F_m grows with free blocks (T is fixed without auto_threshold; loads are fresh, not polled).
        """
        roles, head_only, t, now = self._migration_roles, self.cfg.scheduler.head_only_freeness, self.threshold, self.env.now
        since = self._source_since
        for inst in self.instances:
            if inst.dead or inst.id in self._starting or (roles is not None and inst.role not in roles):
                continue
            cached = since.get(inst.id)
            if cached is None or cached[0] != inst.version:
                snap = inst.snapshot()
                if snap.terminating or snap.num_preempted > 0:
                    start = -math.inf
                else:
                    start = inst.free_fails_from(lambda free: migration_freeness_at(snap, free, head_only) >= t)
                cached = since[inst.id] = (inst.version, start)
            if now >= cached[1]:
                return True
        return False

    def _tune_threshold(self, snapshots: Sequence[InstanceSnapshot]) -> None:
        """Move T by the controller (scheduler/threshold.py) on what happened since the last round."""
        sched, st = self.cfg.scheduler, self.migrations.stats
        seen = (st.committed, st.aborted["dst_refused"])
        signals = observe(snapshots, seen[0] - self._seen_migrations[0], seen[1] - self._seen_migrations[1])
        self._seen_migrations = seen
        self.threshold = next_threshold(self.threshold, signals, t_min=sched.threshold_min, t_max=sched.threshold_max,
                                        increase=sched.threshold_increase, decrease=sched.threshold_decrease)
        self.thresholds.append(self.threshold)

    def schedule_migration(self, t_ns: int, src: int, dst: int) -> None:
        """Start a migration src -> dst at time t_ns whatever the loads (micro-benchmark, tests)."""
        self.env.timeout(t_ns - self.env.now).callbacks.append(
            lambda _ev: self.migrations.start(self.instances[src], self.instances[dst]))

    def _autoscaler(self) -> ProcessGenerator:
        auto = self.cfg.autoscale
        period = to_ns(auto.interval_s)
        while not self._stalled():
            yield self.env.timeout(period)
            self._remove_drained()
            active = [s for s in self._snapshots() if not s.terminating]
            decision = decide(active, len(self._starting), scale_up_below=auto.scale_up_below,
                              scale_down_above=auto.scale_down_above, min_instances=auto.min_instances,
                              max_instances=auto.max_instances)
            draining = [inst.id for inst in self.instances if inst.terminating and not inst.dead]
            cancel, add = drains_to_cancel(draining, decision.delta)
            for iid in cancel:
                self.instances[iid].set_terminating(False)
            for _ in range(add):
                self._add_instance(startup_ns=to_ns(auto.startup_s))
            if decision.victim is not None:
                self._drain(self.instances[decision.victim])

    # ------------------------------------------------------------------ instances come and go
    def _add_instance(self, startup_ns: int = 0) -> Instance:
        """A new instance; with a start-up delay it serves (and is dispatched to) only after it."""
        cost = self.step_cost if self.step_cost is not None else self.cost
        inst: Instance = self.engine.cls(self.env, len(self.instances), self.cfg.engine, cost, self.cfg.fast,
                                         self._on_finish, self.cfg.scheduler.priorities)
        inst.role = self.roles[inst.id] if inst.id < len(self.roles) else "neutral"
        if self.cfg.cluster.step_reports:
            inst.enable_step_reports()
        if inst.role == "prefill":
            inst.on_first_token = self._hand_off
        inst.index = self._decode_index if inst.role == "decode" else self._dispatch_index
        if inst.index is not None:
            inst.index.add(inst.id)
        self.instances.append(inst)
        if startup_ns:
            self._starting.add(inst.id)
            self.env.timeout(startup_ns).callbacks.append(lambda _ev: self._starting.discard(inst.id))
        rate = self.cfg.failures.rate_per_hour
        if rate > 0:
            self._fail_at(inst.id, self.env.now + to_ns(self._rng.expovariate(rate / 3600.0)))
        return inst

    def _drain(self, inst: Instance) -> None:
        """Terminate `inst`: it reports F = -1000, its queue goes elsewhere (no KV to move), its
        running requests leave by migration (llumnix) or by finishing; then it is removed."""
        inst.set_terminating(True)
        for req in inst.take_waiting():
            self._dispatch(req)
        self._remove_drained()

    def _remove_drained(self) -> None:
        for inst in self.instances:
            if inst.terminating and not inst.dead and not inst.running and not inst.waiting and not inst.active:
                if self.migrations.uses(inst):
                    self.removals_held += 1
                else:
                    self._remove(inst)

    def _remove(self, inst: Instance) -> None:
        """Remove a drained, idle instance. Unlike a crash (fail_instance) no migration is told, so none may
        still use it: a paused request whose migration then aborted would be in no batch (an audit, not a
        guard: the caller checks first)."""
        if self.migrations.uses(inst):
            raise audit.AuditError("protocol", f"instance {inst.id} removed at {self.env.now} ns while a migration "
                                               f"uses it")
        inst.fail()

    def _fail_at(self, iid: int, t_ns: int) -> None:
        self._crashes_due += 1

        def crash(_ev: simpy.Event) -> None:
            self._crashes_due -= 1
            self.fail_instance(iid)
        self.env.timeout(max(t_ns - self.env.now, 0)).callbacks.append(crash)

    def fail_instance(self, iid: int) -> None:
        """Crash instance `iid` now: its requests fail or are re-dispatched; its migrations learn it."""
        if iid >= len(self.instances) or self.instances[iid].dead:
            return
        inst = self.instances[iid]
        self._starting.discard(iid)
        lost = inst.fail()
        self.migrations.instance_failed(inst)
        if self.handoffs is not None:
            self.handoffs.instance_failed(inst)
        for req in lost:
            self._lost(req, "failed:instance_crash")

    def _lost(self, req: Request, reason: str) -> None:
        """A request whose instance crashed: re-dispatch it (recompute) or end it as failed."""
        if self.cfg.failures.on_failure == "redispatch" and self._serving():
            req.redispatches += 1
            self._dispatch(req)
        else:
            req.end(reason, self.env.now)
            self._ended_one(req)

    # ------------------------------------------------------------------ decisions
    def _dispatch(self, req: Request) -> None:
        if self._dispatch_index is not None and req.priority != HIGH:
            target = self._dispatch_index.best()  # least-loaded's choice, without a scan
            if target is not None:
                self._enqueue(target, req)
                return
        snapshots = self._snapshots(self._dispatch_roles)  # P/D: prompts go to the prefill instances
        if not snapshots:
            req.end("failed:no_instance", self.env.now)
            self._ended_one(req)
            return
        if self.policy.prefix_aware:  # the cache-aware policy sees each instance's cached prefix of the prompt
            hits = {s.instance: self.instances[s.instance].cached_prefix_tokens(req) for s in snapshots}
            target = self.policy.dispatch(snapshots, req.spec, hits)  # type: ignore[call-arg]
        else:
            target = self.policy.dispatch(snapshots, req.spec)
        self._enqueue(target, req)

    def _enqueue(self, target: int, req: Request) -> None:
        self.instances[target].enqueue(req)
        if self._wake is not None:
            self._wake.succeed()
            self._wake = None

    def _hand_off(self, req: Request) -> None:
        """A request on a prefill instance has its first token: move it to the freest decode instance."""
        src = self.instances[req.at]
        if self._decode_index is not None and req.priority != HIGH:
            dst = self._decode_index.best()  # decode_target's choice, without a scan
        else:
            dst = decode_target(self._snapshots(("decode",)), req.spec)
        if dst is None:
            self._hand_off_later(req, src)
            return
        assert self.handoffs is not None
        self.handoffs.start(src, self.instances[dst], request=req)

    def _handoff_over(self, m) -> None:
        """A hand-off ended: if the request is back in its prefill instance's batch (not taken, or
        aborted), the fallback decides what it does there."""
        req = m.given
        if req is not None and not req.status and req.at == m.src.id and req.id in m.src.running:
            self._hand_off_later(req, m.src)

    def _hand_off_later(self, req: Request, src: Instance) -> None:
        """No decode instance took `req`, which is in `src`'s batch (at a boundary of src when it was
        refused or aborted): it decodes there (pd_fallback = local), decodes there and is offered
        again a round period later (retry), or is parked there, holding its KV without decoding,
        until an offer a round period later (wait, HEAD). A request that cannot leave now (no
        decode instance up: crashed ones never return; or it shares cached blocks, which hand-offs
        do not move) is not parked, so nothing waits forever: under wait it is treated as retry."""
        self.handoff_fallbacks += 1
        fallback = self.cfg.cluster.pd_fallback
        if fallback == "local":
            return
        if fallback == "wait" and src.migratable(req) and self._decode_up():
            self._park(req, src)
            return

        def retry(_ev: simpy.Event) -> None:
            if not req.status and req.at == src.id and req.id in src.running and not src.dead:
                self._hand_off(req)
        self.env.timeout(self.round_period_ns()).callbacks.append(retry)

    def _park(self, req: Request, src: Instance) -> None:
        """Park `req` on `src` (inside src's boundary callback) and, a round period later, if this
        parking still holds (not preempted, no crash), offer it again at src's next boundary: it
        rejoins the batch there and the hand-off takes it out at once, as any hand-off of a running
        request (to the protocol a parked request is running, merely not scheduled)."""
        seq = src.park(req)
        self._offers_due += 1

        def offer(_src: Instance) -> None:
            if src.parked.get(req.id, (req, -1))[1] != seq:  # `due` found this parking: it must still hold
                raise audit.AuditError("protocol", f"instance {src.id}: the offer of request {req.id}'s parking "
                                                   f"{seq} made to another parking")
            src.unpark(req)
            self._hand_off(req)

        def due(_ev: simpy.Event) -> None:
            self._offers_due -= 1
            held = src.parked.get(req.id, (req, -1))[1]
            if held == seq:
                src.at_next_boundary(offer)
            elif held >= 0:  # preempted and parked again since: that parking's own timer offers it
                self.stale_offers += 1
        self.env.timeout(self.round_period_ns()).callbacks.append(due)

    def _decode_up(self) -> bool:
        """Some decode instance could take a hand-off (crashed instances never come back)."""
        return any(inst.role == "decode" and not inst.dead for inst in self.instances)

    def _rejection(self, spec: RequestSpec) -> str:
        return rejection(spec, self._max_tokens, self._max_model_len)

    def _serving(self) -> list[Instance]:
        return [inst for inst in self.instances if not inst.dead and inst.id not in self._starting]

    def _fresh_snapshot(self, iid: int) -> InstanceSnapshot | None:
        """An indexed instance's load now; None once it crashed."""
        inst = self.instances[iid]
        return None if inst.dead else inst.snapshot()

    def _snapshots(self, roles: tuple[str, ...] | None = None) -> list[InstanceSnapshot]:
        """Loads of the serving instances (of those roles only, if given)."""
        serving = self._serving()
        if roles is not None:
            serving = [inst for inst in serving if inst.role in roles]
        if not self._stale:
            return [inst.snapshot() for inst in serving]
        out = []
        for inst in serving:
            if self._reports is None:
                s = inst.reported()
            else:
                s = self._reports.get(inst.id) or inst.snapshot()
            out.append(s._replace(dispatched=inst.dispatched, terminating=inst.terminating))
        return out

    # ------------------------------------------------------------------ bookkeeping
    def _stalled(self) -> bool:
        """Nothing more can happen: periodic processes stop so a stuck request ends the run (a parked
        request whose offer is due is not stuck: P/D wait)."""
        return (self._arrivals_done and not self.migrations.busy and not self._handoffs_live()
                and not self._offers_due and not any(inst.active for inst in self.instances))

    def _check_progress(self) -> None:
        """A migration round found the cluster stalled: if requests have not ended and nothing can change any
        more (no step in progress or due, no arrival, migration, hand-off, offer, crash, start-up or autoscaler
        to come), the round could only start migrations their sources cancel (an idle instance runs nothing to
        move), for ever: the run would never end. Raise the stalled audit instead, naming who is stuck."""
        if (self._ended >= len(self.specs) or self.migrations.live or self._crashes_due or self._starting
                or self.cfg.autoscale.enabled):
            return
        raise self._stall_error("no progress can be made, only migration rounds that find nothing to move")

    def _stall_error(self, why: str) -> audit.AuditError:
        """The stalled audit (requests not ended and the run cannot go on), naming who is stuck and why."""
        stuck: list[str] = []
        held = 0
        for inst in self.instances:
            held += len(inst.waiting) + len(inst.parked)
            if inst.waiting and not inst.dead:
                head = inst.waiting[0]
                ids = [r.id for r in list(inst.waiting)[:5]]
                stuck.append(f"instance {inst.id} is idle with requests {ids}{'...' if len(inst.waiting) > 5 else ''} "
                             f"waiting; its head, request {head.id} ({head.prompt} prompt + {head.generated} generated "
                             f"tokens of {head.output}), needs {-(-head.recompute_tokens // inst.bs)} blocks, "
                             f"{inst.free_blocks()} of {inst.capacity} free")
        left = len(self.specs) - self._ended
        if left > held:
            stuck.append(f"{left - held} held by no instance")
        return audit.AuditError("accounting", f"simulation stalled at {self.env.now} ns with {left} requests not "
                                              f"ended: {why} ({'; '.join(stuck)})")

    def _handoffs_live(self) -> bool:
        return self.handoffs is not None and bool(self.handoffs.live)

    def _on_finish(self, req: Request) -> None:
        if self.instances[req.instance].terminating:  # after the boundary that finished it
            self.env.timeout(0).callbacks.append(lambda _ev: self._remove_drained())
        self._ended_one(req)

    def _migration_forgotten(self, m: Migration) -> None:
        """Nothing can act on migration `m` any more: a draining instance it kept (a source emptied by migrating
        its requests out, or a destination) goes now, as one whose last request finished does, not at the
        autoscaler's next tick (or never, without an autoscaler)."""
        if m.src.terminating or m.dst.terminating:
            self.env.timeout(0).callbacks.append(lambda _ev: self._remove_drained())

    @property
    def records(self) -> list[Request]:
        """Every request in arrival order (only with keep_records=True)."""
        return self.ledger.records

    def _ended_one(self, req: Request) -> None:
        if req.id in self._open:
            self._open.discard(req.id)
            waiting, chained = self._waiting_on.pop(req.id, None), self._after.pop(req.id, None)
            if chained is not None:
                if waiting is not None:
                    raise audit.AuditError("accounting", f"request {req.id} ended with two next requests of its "
                                                         f"user ({waiting.id}, {chained.id}, chained)")
                waiting = chained
                self._open.add(waiting.id)  # open from now (a waiting one already is)
            if waiting is not None:
                self._hold(waiting, to_ns(waiting.after_s))
            else:
                self._ended_at[req.id] = self.env.now
        self.ledger.end(req)
        self._ended += 1
        if self._on_progress is not None and self._ended % self._progress_every == 0:
            self._on_progress(self._ended)
        if self._ended == len(self.specs):
            self._done.succeed()

    def instance_seconds(self) -> float:
        """Σ over instances of the time from their start (or scale-up decision) to removal or the last request's end."""
        end = self.makespan_ns
        return sum(max(min(inst.gone_ns if inst.gone_ns >= 0 else end, end) - inst.born_ns, 0)
                   for inst in self.instances) / NS

    def _audit_end(self) -> None:
        self.ledger.close(len(self.specs))
        in_system = sum(inst.in_system_integral for inst in self.instances) + self.migrations.stats.paused_integral_ns
        if self.handoffs is not None:
            in_system += self.handoffs.stats.paused_integral_ns
        audit.check_littles_law(in_system, self.ledger.sojourn_ns)
        for inst in self.instances:
            audit.check_recount(f"instance {inst.id} at end", inst.held, 0)
            if inst.predicted_tokens:  # every request left: the incremental projection must be back to 0
                raise audit.AuditError("accounting", f"instance {inst.id} at end: predicted tokens "
                                                     f"{inst.predicted_tokens} != 0")
            audit.check_blocks(f"instance {inst.id} at end", inst.free, inst.held, inst.reserved, inst.capacity)
            if inst.reserved and self.migrations.safe and (self.handoffs is None or self.handoffs.safe):
                raise audit.AuditError("blocks", f"instance {inst.id} at end: {inst.reserved} blocks still reserved "
                                                 "after every migration ended (a proved variant frees them all)")

