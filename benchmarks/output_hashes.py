"""sha256 of the simulator's outputs for a fixed set of runs: one line per named run.

A speed change must leave every line unchanged (`python benchmarks/output_hashes.py > before.txt`,
change, run again, `diff`). Each run hashes, separately:
- `state`: every request's record (all its fields) and what the cluster keeps for the metrics (time
  series, fragmentation samples, migration and hand-off stats, per-instance integrals and counters),
  read straight from the simulator, so it does not depend on how sim/metrics.py reports them;
- `summary`: the run's summary (sim/metrics.py) as sorted JSON.
`--sweep` also runs `llumverify sweep experiments/quick.toml` and hashes each file it writes.
Runs cover both engines, every policy, P/D with every fallback, crashes, priorities, polled
reports, autoscaling, unsafe variants, the step-by-step path, a replayed trace and idle gaps.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from llumverify.settings.config import (AutoscaleConfig, ClusterConfig, EngineConfig, FailureConfig, MigrationConfig,
                               SchedulerConfig, SimConfig)
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.metrics import summarize
from llumverify.sim.traces import read_trace
from llumverify.sim.workload import generate, shared_prefixes

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT.parent / "shared" / "traces" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"
V1 = EngineConfig(generation="vllm-v1")
V1_SMALL = EngineConfig(generation="vllm-v1", num_blocks=600, max_num_batched_tokens=2048)
REQ_FIELDS = [f for f in ("id", "arrival_ns", "prompt", "output", "priority", "instance", "status", "admitted_ns",
                          "first_token_ns", "finish_ns", "preemptions", "migrations", "preempt_loss_ns",
                          "killed_ns", "generated", "downtime_ns", "redispatches", "predicted_tokens", "computed")]


def _runs() -> dict[str, tuple[Callable[[], Sequence[RequestSpec]], str, SimConfig]]:
    """name -> (workload, policy, config)."""
    base = SimConfig()
    share = lambda: generate(2000, 9.5, seed=0)  # noqa: E731
    ll28 = lambda: generate(2000, 2.8, lengths="L-L", seed=1)  # noqa: E731
    prio = lambda: generate(2000, 26.0, lengths="S-S", arrival="gamma", cv=4.0, seed=2,  # noqa: E731
                            high_priority_frac=0.1)
    v1cfg = replace(base, engine=V1)
    v1small = replace(base, engine=V1_SMALL, cluster=ClusterConfig(num_instances=8))
    pd = lambda n, fb: replace(base, engine=V1, cluster=ClusterConfig(num_instances=8, pd=n, pd_fallback=fb))  # noqa: E731
    fail = FailureConfig(at=((3, 40.0), (7, 90.0)))
    runs: dict[str, tuple[Callable[[], Sequence[RequestSpec]], str, SimConfig]] = {}
    for pol in ("round-robin", "least-loaded", "llumnix"):
        runs[f"v02-sharegpt-{pol}"] = (share, pol, base)
        runs[f"v02-LL2.8-{pol}"] = (ll28, pol, base)
        runs[f"v1-sharegpt-{pol}"] = (share, pol, v1cfg)
    runs["v02-predicted-err"] = (share, "predicted", replace(base, scheduler=SchedulerConfig(prediction_error=0.5)))
    runs["v02-priorities-llumnix"] = (prio, "llumnix", base)
    runs["v02-priorities-least-loaded"] = (prio, "least-loaded", base)
    runs["v02-nopriorities-llumnix"] = (prio, "llumnix", replace(base, scheduler=SchedulerConfig(priorities=False)))
    runs["v02-fail-llumnix"] = (share, "llumnix", replace(base, failures=fail))
    runs["v02-fail-redispatch-least-loaded"] = (share, "least-loaded",
                                                replace(base, failures=replace(fail, on_failure="redispatch")))
    runs["v02-failrate-llumnix"] = (ll28, "llumnix", replace(base, failures=FailureConfig(rate_per_hour=2.0, seed=3,
                                                                                          on_failure="redispatch")))
    runs["v02-report0.05-llumnix"] = (share, "llumnix", replace(base, cluster=ClusterConfig(report_interval_s=0.05)))
    runs["v02-autoscale-llumnix"] = (ll28, "llumnix", replace(base, autoscale=AutoscaleConfig(enabled=True),
                                                             cluster=ClusterConfig(num_instances=8)))
    runs["v02-autoscale-least-loaded"] = (ll28, "least-loaded", replace(base, autoscale=AutoscaleConfig(enabled=True),
                                                                       cluster=ClusterConfig(num_instances=8)))
    runs["v02-autothreshold-llumnix"] = (ll28, "llumnix", replace(base, scheduler=SchedulerConfig(auto_threshold=True)))
    runs["v02-sr-headonly-llumnix"] = (ll28, "llumnix", replace(base, scheduler=SchedulerConfig(
        migrate_select="sr", head_only_freeness=True)))
    for variant in ("ae", "head"):
        runs[f"v02-variant-{variant}-llumnix"] = (ll28, "llumnix", replace(base, migration=MigrationConfig(variant=variant)))
    runs["v02-step-by-step-llumnix"] = (lambda: generate(400, 9.5, seed=4), "llumnix",
                                        replace(base, fast=False, cluster=ClusterConfig(num_instances=4)))
    runs["v02-idle-gaps-least-loaded"] = (lambda: generate(40, 0.002, seed=5), "least-loaded", base)
    runs["v02-idle-gaps-llumnix"] = (lambda: generate(40, 0.002, seed=5), "llumnix", base)
    if AZURE.exists():
        runs["v02-azure-llumnix"] = (lambda: read_trace(AZURE, limit=2000), "llumnix", base)
    cached = lambda: shared_prefixes(generate(1500, 8.0, seed=1))  # noqa: E731
    for pol in ("cache-aware", "least-loaded", "llumnix"):
        runs[f"v1-prefix-{pol}"] = (cached, pol, v1small)
    runs["v1-nocache-llumnix"] = (cached, "llumnix", replace(v1small, engine=replace(V1_SMALL, prefix_caching=False)))
    pd_load = lambda: generate(800, 30.0, seed=6)  # noqa: E731  (overloads 2:6: hand-offs often find no room)
    for fb in ("local", "retry"):
        for pol in ("least-loaded", "llumnix", "round-robin"):
            runs[f"v1-pd2:6-{fb}-{pol}"] = (pd_load, pol, pd("2:6", fb))
    runs["v1-pd2:6-retry-fail-llumnix"] = (pd_load, "llumnix", replace(pd("2:6", "retry"), failures=FailureConfig(
        at=((1, 20.0), (5, 30.0)), on_failure="redispatch")))
    runs["v1-pd2:6-fail-least-loaded"] = (pd_load, "least-loaded", replace(pd("2:6", "local"), failures=FailureConfig(
        at=((0, 25.0), (4, 35.0)))))
    runs["v1-pd2:6-prefix-cache-aware"] = (lambda: shared_prefixes(generate(1500, 20.0, seed=7)), "cache-aware",
                                           pd("2:6", "local"))
    runs["v1-pd4:12-llumnix"] = (lambda: generate(3000, 7.5, seed=0), "llumnix",
                                 replace(base, engine=V1, cluster=ClusterConfig(pd="4:12")))
    runs["v1-step-by-step-pd1:3"] = (lambda: generate(300, 8.0, seed=8), "llumnix",
                                     replace(base, engine=V1, fast=False, cluster=ClusterConfig(num_instances=4, pd="1:3")))
    for pol in ("least-loaded", "llumnix"):  # after the runs above, so their lines keep their order
        runs[f"v1-pd2:6-wait-{pol}"] = (pd_load, pol, pd("2:6", "wait"))
    runs["v1-pd2:6-wait-fail-llumnix"] = (pd_load, "llumnix", replace(pd("2:6", "wait"), failures=FailureConfig(
        at=((1, 20.0), (5, 30.0)), on_failure="redispatch")))
    return runs


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def _state(cluster: Cluster) -> object:
    """Everything the simulator hands the metrics, as plain values."""
    recs = [[getattr(r, f) for f in REQ_FIELDS] for r in cluster.records]
    insts = [[i.used_integral, i.in_system_integral, i.born_ns, i.gone_ns, i.dispatched,
              getattr(i, "prefill_tokens", 0), getattr(i, "hit_tokens", 0)] for i in cluster.instances]
    moves = [asdict(m.stats) for m in (cluster.migrations, cluster.handoffs) if m is not None]
    return [recs, insts, moves, {k: [repr(x) for x in v] for k, v in cluster.series.items()},
            [repr(x) for x in cluster.frag_samples], cluster.thresholds, cluster.end_ns, cluster.makespan_ns,
            cluster.handoff_fallbacks, repr(cluster.instance_seconds())]


def run_one(specs: Sequence[RequestSpec], policy: str, cfg: SimConfig) -> tuple[str, str, float]:
    """(state hash, summary hash, wall seconds) of one run."""
    cfg.validate()
    start = time.perf_counter()
    cluster = Cluster(specs, get_policy(policy), cfg, keep_records=True)
    cluster.run()
    wall = time.perf_counter() - start
    return _digest(_state(cluster)), _digest(summarize(cluster, cfg.slo)), wall


def sweep_hashes() -> dict[str, str]:
    """Hash of each file `llumverify sweep experiments/quick.toml` writes (its results, not its logs)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x"
        subprocess.run(["llumverify", "sweep", str(ROOT / "experiments" / "quick.toml"),
                        "--out", str(out), "--force", "--jobs", "1"], check=True, capture_output=True)
        return {f"sweep-quick:{p.relative_to(out)}": hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                for p in sorted(out.rglob("*")) if p.is_file() and p.suffix in (".csv", ".json") and p.name != "timing.json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only the runs whose name contains this")
    parser.add_argument("--sweep", action="store_true", help="also hash `llumverify sweep experiments/quick.toml`")
    parser.add_argument("--times", action="store_true", help="print each run's wall time to stderr")
    args = parser.parse_args()
    for name, (workload, policy, cfg) in _runs().items():
        if args.only in name:
            state, summary, wall = run_one(workload(), policy, cfg)
            print(f"{name} state={state} summary={summary}", flush=True)
            if args.times:
                print(f"{name}: {wall:.2f} s", file=sys.stderr)
    if args.sweep:
        for name, h in sweep_hashes().items():
            print(f"{name} {h}")


if __name__ == "__main__":
    main()
