"""The global scheduler as a SimPy process: arrivals, rejection, dispatch from load reports.

Loads are either exact at every arrival (the AE: refreshed every engine step, computed lazily
from each instance's closed-form state) or polled every report_interval_s (HEAD: 50 ms), in
which case requests dispatched since the last poll are invisible except for the per-instance
dispatch counts, which the scheduler itself keeps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import simpy

from llumverify.config import SimConfig
from llumverify.scheduler.dispatch import Policy
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.sim import audit
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.requests import RequestSpec

NS = 1_000_000_000


def to_ns(seconds: float) -> int:
    """Seconds to integer simulated nanoseconds."""
    return round(seconds * NS)


class Cluster:
    """Instances plus the processes that feed them; `run()` simulates until every request ended."""

    def __init__(self, specs: Sequence[RequestSpec], policy: Policy, cfg: SimConfig) -> None:
        self.env = simpy.Environment()
        self.cfg = cfg
        self.policy = policy
        self.specs = specs
        cost = CostModel(cfg.cost)
        self.instances = [Instance(self.env, i, cfg.engine, cost, cfg.fast, self._on_finish)
                          for i in range(cfg.cluster.num_instances)]
        usable = cfg.engine.num_blocks - cfg.engine.watermark_blocks
        self._max_tokens = min(usable * cfg.engine.block_size, cfg.engine.max_num_batched_tokens)
        self.records: list[Request] = []
        self._ended = 0
        self._done = self.env.event()
        self._reports: list[InstanceSnapshot] | None = None
        self.frag_samples: list[float] = []
        self.end_ns = 0
        self._last_ns = 0
        self._arrivals_done = False

    # ------------------------------------------------------------------ processes
    def run(self) -> None:
        """Simulate every request to its end, then close the books (time integrals, audits)."""
        self.env.process(self._arrivals())
        self.env.process(self._sampler())
        if self.cfg.cluster.report_interval_s > 0:
            self._reports = [inst.snapshot() for inst in self.instances]
            self.env.process(self._poller())
        if self.specs:
            try:
                self.env.run(until=self._done)
            except RuntimeError as exc:
                if "No scheduled events left" not in str(exc):
                    raise
                raise audit.AuditError("accounting", f"simulation stalled at {self.env.now} ns with "
                                                     f"{len(self.specs) - self._ended} requests not ended") from None
        self.end_ns = self.env.now
        for inst in self.instances:
            inst.close(self.end_ns)
        self._audit_end()

    def _arrivals(self) -> simpy.events.ProcessGenerator:
        env = self.env
        for spec in self.specs:
            t = to_ns(spec.arrival_s)
            if t > env.now:
                yield env.timeout(t - env.now)
            audit.check_clock("cluster arrivals", self._last_ns, env.now)
            self._last_ns = env.now
            req = Request(spec, env.now)
            self.records.append(req)
            reason = self._rejection(spec)
            if reason:
                req.end(f"rejected:{reason}", env.now)
                self._ended_one()
                continue
            snapshots = self._snapshots()
            self.instances[self.policy.dispatch(snapshots, spec)].enqueue(req)
        self._arrivals_done = True

    def _poller(self) -> simpy.events.ProcessGenerator:
        period = to_ns(self.cfg.cluster.report_interval_s)
        while not self._stalled():
            yield self.env.timeout(period)
            self._reports = [inst.snapshot() for inst in self.instances]

    def _sampler(self) -> simpy.events.ProcessGenerator:
        """Samples fragmentation at a fixed simulated-time period (a time average)."""
        period = to_ns(self.cfg.sample_interval_s)
        while not self._stalled():
            yield self.env.timeout(period)
            self.frag_samples.append(fragmentation([inst.snapshot() for inst in self.instances]))

    # ------------------------------------------------------------------ decisions
    def _rejection(self, spec: RequestSpec) -> str:
        """Why a request can never run on any instance ('' if it can).

        The prompt must fit above the watermark and within the prefill budget; so must the whole
        sequence, because a preempted request re-prefills its prompt plus its generated tokens.
        """
        if spec.prompt_tokens > self._max_tokens:
            return "prompt_exceeds_capacity"
        if spec.prompt_tokens + spec.output_tokens - 1 > self._max_tokens:
            return "sequence_exceeds_capacity"
        return ""

    def _snapshots(self) -> list[InstanceSnapshot]:
        if self._reports is None:
            return [inst.snapshot() for inst in self.instances]
        return [dataclasses.replace(s, dispatched=inst.dispatched)
                for s, inst in zip(self._reports, self.instances)]

    # ------------------------------------------------------------------ bookkeeping
    def _stalled(self) -> bool:
        """Nothing more can happen: periodic processes stop so a stuck request ends the run."""
        return self._arrivals_done and not any(inst.active for inst in self.instances)

    def _on_finish(self, req: Request) -> None:
        self._ended_one()

    def _ended_one(self) -> None:
        self._ended += 1
        if self._ended == len(self.specs):
            self._done.succeed()

    def _audit_end(self) -> None:
        audit.check_accounting(len(self.specs), self.records)
        in_system = sum(inst.in_system_integral for inst in self.instances)
        sojourn = sum(r.finish_ns - r.arrival_ns for r in self.records if r.status == "finished")
        audit.check_littles_law(in_system, sojourn)
        for inst in self.instances:
            audit.check_recount(f"instance {inst.id} at end", inst.held, 0)
            audit.check_blocks(f"instance {inst.id} at end", inst.free, inst.held, inst.reserved, inst.capacity)


def fragmentation(snapshots: Sequence[InstanceSnapshot]) -> float:
    """Share of cluster KV memory that is free while some instance's head-of-line request cannot
    be admitted there although the cluster's total free blocks (above one watermark) could hold
    it; 0 when no such head exists."""
    free = sum(s.free_blocks for s in snapshots)
    total = sum(s.num_blocks for s in snapshots)
    for s in snapshots:
        if s.num_waiting and s.head_blocks > s.free_blocks - s.watermark_blocks \
                and s.head_blocks <= free - s.watermark_blocks:
            return free / total
    return 0.0

