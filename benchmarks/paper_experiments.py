"""The paper-scale comparisons docs/simulator.md reports (not tests: each takes seconds to minutes).

    python benchmarks/paper_experiments.py serving     # L-L 2.8 and M-M 7.6 req/s, 16 x 10k requests
    python benchmarks/paper_experiments.py priorities  # S-S 26 req/s Gamma CV 2-8, 10 % high priority
    python benchmarks/paper_experiments.py autoscaling # L-L Gamma 2 req/s, 1-16 instances from 8

Each prints one row per run with the metrics the paper compares (LLUMNIX.md §7).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from tabulate import tabulate

from llumverify.settings.config import AutoscaleConfig, ClusterConfig, SchedulerConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def serving(requests: int, seed: int) -> None:
    rows = []
    for lengths, rate, threshold in (("L-L", 2.8, 3.0), ("M-M", 7.6, 3.0), ("M-M", 7.6, 10.0)):
        specs = generate(requests, rate, lengths=lengths, seed=seed)
        cfg = SimConfig(scheduler=SchedulerConfig(migrate_threshold=threshold))
        for policy in ("round-robin", "least-loaded", "llumnix"):
            if threshold != 3.0 and policy != "llumnix":
                continue
            s = simulate(specs, policy, cfg).summary
            rows.append([lengths, rate, f"{policy} T={threshold:g}" if policy == "llumnix" else policy,
                         s["ttft_mean_s"], s["ttft_p99_s"], s["tpot_p99_s"] * 1000, s["e2e_mean_s"], s["e2e_p99_s"],
                         s["preemption_loss_s"], s["fragmentation"] * 100, s["migrations"], s["migrations_aborted"],
                         s["downtime_mean_s"] and s["downtime_mean_s"] * 1000, s["migrating_frac"] * 100])
    print(tabulate(rows, headers=["lengths", "rate", "policy", "TTFT mean", "TTFT P99", "TPOT P99 ms", "e2e mean",
                                  "e2e P99", "preempt loss s", "frag %", "migr", "aborted", "downtime ms",
                                  "migrating %"], floatfmt=".3g"))


def priorities(requests: int, seed: int) -> None:
    rows = []
    for cv in (2.0, 4.0, 6.0, 8.0):
        specs = generate(requests, 26.0, lengths="S-S", arrival="gamma", cv=cv, seed=seed, high_priority_frac=0.1)
        for on in (True, False):
            cfg = SimConfig(engine=replace(SimConfig().engine, max_num_batched_tokens=12_000),
                            scheduler=SchedulerConfig(priorities=on))
            s = simulate(specs, "llumnix", cfg).summary
            rows.append([cv, "with" if on else "without", s["ttft_mean_s_high"], s["ttft_p99_s_high"],
                         s["e2e_mean_s_high"], s["ttft_mean_s_normal"], s["ttft_p99_s_normal"], s["e2e_mean_s_normal"],
                         s["migrations"]])
    print(tabulate(rows, headers=["CV", "priorities", "high TTFT mean", "high TTFT P99", "high e2e mean",
                                  "normal TTFT mean", "normal TTFT P99", "normal e2e mean", "migr"], floatfmt=".3g"))


def autoscaling(requests: int, seed: int) -> None:
    rows = []
    for cv in (2.0, 4.0, 6.0):
        specs = generate(requests, 2.0, lengths="L-L", arrival="gamma", cv=cv, seed=seed)
        cfg = SimConfig(engine=replace(SimConfig().engine, max_num_batched_tokens=12_000),
                        cluster=ClusterConfig(num_instances=8), autoscale=AutoscaleConfig(enabled=True))
        for policy in ("least-loaded", "llumnix"):
            s = simulate(specs, policy, cfg).summary
            rows.append([cv, policy, s["ttft_mean_s"], s["ttft_p99_s"], s["instances_mean"], s["instance_seconds"],
                         s["migrations"]])
    print(tabulate(rows, headers=["CV", "policy", "TTFT mean", "TTFT P99", "instances mean", "instance-s", "migr"],
                   floatfmt=".4g"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=["serving", "priorities", "autoscaling"])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    {"serving": serving, "priorities": priorities, "autoscaling": autoscaling}[args.experiment](args.requests, args.seed)


if __name__ == "__main__":
    main()
