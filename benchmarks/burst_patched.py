"""Burst rules that are not settings, measured with the simulator patched in this process only.

    python benchmarks/burst_patched.py head-pairing     # HEAD's pairing: busy instances dropped first
    python benchmarks/burst_patched.py no-killed        # no "holds a preempted request" source rule
    python benchmarks/burst_patched.py report-trigger   # the AE's round per 16 x 4 delivered step reports

L-L 3.0 req/s, 16 instances, 10,000 requests, llumnix under the testbed profile, seeds 0-9 (the
baseline is burst-ll's L-L-testbed llumnix; docs/simulator.md, "Bursts"). report-trigger counts
a closed-form decode run's k steps as k reports at the run's end, so its rounds lag the AE's.
Not a test: about 2 minutes per rule on one core.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from llumverify.scheduler import pairing
from llumverify.sim import cluster as cluster_mod
from llumverify.sim import instance as instance_mod
from llumverify.sim.named_profiles import profile_config
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def head_pairing() -> None:
    pair = pairing.pair_instances
    cluster_mod.pair_instances = lambda loads, t, busy_first=False: pair(loads, t, busy_first=True)


def no_killed() -> None:
    pair = pairing.pair_instances
    cluster_mod.pair_instances = lambda loads, t, busy_first=False: pair(
        [replace(load, has_preempted=False) for load in loads], t, busy_first)


def report_trigger() -> None:
    """Rounds fire when the cluster's count of delivered step reports crosses a multiple of 4 N."""
    boundary, add = instance_mod.Instance._boundary, cluster_mod.Cluster._add_instance

    def counted_boundary(self: instance_mod.Instance) -> None:
        ended = self._run.k_end if self.phase == instance_mod.DECODE else int(self.phase == instance_mod.PREFILL)
        boundary(self)
        if ended and getattr(self, "on_reports", None) is not None:
            self.on_reports(ended)

    def counting_add(self: cluster_mod.Cluster, startup_ns: int = 0) -> instance_mod.Instance:
        inst = add(self, startup_ns)

        def on_reports(n: int) -> None:
            per, before = 4 * self.cfg.cluster.num_instances, getattr(self, "reports_seen", 0)
            self.reports_seen = before + n
            if self.policy.migrates and self.reports_seen // per > before // per:
                self.migration_round()
        inst.on_reports = on_reports
        return inst

    def no_periodic_rounds(self: cluster_mod.Cluster):
        return
        yield

    instance_mod.Instance._boundary = counted_boundary
    cluster_mod.Cluster._add_instance = counting_add
    cluster_mod.Cluster._migration_rounds = no_periodic_rounds


PATCHES = {"head-pairing": head_pairing, "no-killed": no_killed, "report-trigger": report_trigger}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rule", choices=sorted(PATCHES))
    args = parser.parse_args()
    PATCHES[args.rule]()
    cfg = profile_config("testbed")
    p99, loss = [], []
    for seed in range(10):
        s = simulate(generate(10_000, 3.0, lengths="L-L", seed=seed), "llumnix", cfg).summary
        p99.append(s["ttft_p99_s"])
        loss.append(s["preemption_loss_s"])
        print(f"seed {seed}: P99 TTFT {s['ttft_p99_s']:.2f} s, preemption loss {s['preemption_loss_s']:.3f} s, "
              f"{s['migrations']} migrations", flush=True)
    print(f"{args.rule}: mean P99 TTFT {statistics.mean(p99):.2f} s, preemption loss {statistics.mean(loss):.3f} s")


if __name__ == "__main__":
    main()
