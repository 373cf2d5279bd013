"""Qwen3-30B-A3B served as vLLM serves MoE models (DP 2 + expert parallelism) on two RTX PRO 6000s.

    python benchmarks/dp_moe_proxy.py [VALIDATION_DIR] [MOE_PROFILE_DIR]   # default ../shared/validation

No measured DP run is in ../shared, so this is a proxy, not a validation (LLMServingSim publishes
one, which benchmarks/public_runs.py replays): the shared Llama-3.1-8B ShareGPT
workload (300 requests at 10/s) under the engine settings of the shared RTX PRO 6000 runs
(max_num_seqs 128, 2,048-token steps, prefix caching) with the model swapped for Qwen3-30B-A3B
at data_parallel_size 2 and enable_expert_parallel, replayed as validate replays such a run:
one instance per rank, vLLM's balancer (`vllm-dp`), KV per rank from the catalogs. It prints mean
TTFT / TPOT / E2E and each rank's share for: one engine on one GPU (the whole model, for scale),
two ranks stepping on their own, and two ranks in lockstep (sim/lockstep.py, what validate runs);
from first principles, and from an MoE kernel profile when MOE_PROFILE_DIR is given (LLMServingSim
5daddb2 `profiler/perf/RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16`). Then how much the
balancer's details matter (first principles, lockstep): vLLM's rule on exact counts (what validate
runs), round-robin, and vLLM's rule on counts 100 ms stale without vLLM's local increments (a bound:
vLLM refreshes every 100 ms but counts each request it sends at once).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from llumverify.settings.config import ClusterConfig, HardwareConfig, SimConfig
from llumverify.sim import engine_profile
from llumverify.sim.roofline import MoEGroup, kv_capacity_blocks
from llumverify.sim.run import simulate
from llumverify.validation.replay import load_workload
from llumverify.validation.run_engine import engine_settings

MODEL, GPU = "Qwen3-30B-A3B", "RTX PRO 6000"


def main(validation: Path, profile: Path | None) -> None:
    lss = validation / "llmservingsim"
    meta = json.loads((lss / "runs/RTXPRO6000-Llama-3.1-8B/meta.json").read_text())
    specs = list(load_workload(lss / "workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl", 16))
    cases = [("one engine, one GPU", 1, 1), ("DP2+EP, ranks alone", 2, 1), ("DP2+EP, lockstep", 2, 2)]
    sources = [("first principles", {"gpu": GPU, "model": MODEL})]
    if profile is not None:
        sources.append(("MoE profile", {"profile": str(profile), "model": MODEL}))
    def run(name: str, label: str, source: dict, dp: int, cluster: ClusterConfig, policy: str = "vllm-dp") -> None:
        hw = HardwareConfig(**source, dp=dp, expert_parallel=dp > 1)
        engine, _ = engine_settings(meta, "meta.json", num_blocks=kv_capacity_blocks(MODEL, GPU, group=MoEGroup(dp, dp > 1)))
        recs = simulate(specs, policy, SimConfig(engine=engine, cluster=cluster, step=engine_profile.step_cost(hw)),
                        keep_records=True).records
        ttft = np.array([r.first_token_ns - r.arrival_ns for r in recs]) / 1e9
        e2e = np.array([r.finish_ns - r.arrival_ns for r in recs]) / 1e9
        tpot = np.array([(r.finish_ns - r.first_token_ns) / (r.output - 1) for r in recs if r.output > 1]) / 1e6
        share = sum(r.instance == 0 for r in recs) / len(recs)
        print(f"{name:16s} {label:28s} TTFT {ttft.mean():6.3f} s  TPOT {tpot.mean():6.1f} ms  "
              f"E2E {e2e.mean():6.2f} s  rank 0 takes {100 * share:3.0f} %")

    for name, source in sources:
        for label, dp, lockstep in cases:
            run(name, label, source, dp, ClusterConfig(num_instances=dp, lockstep=lockstep))
    fp = sources[0][1]
    run("balancer", "round-robin", fp, 2, ClusterConfig(num_instances=2, lockstep=2), "round-robin")
    run("balancer", "vllm-dp, 100 ms stale counts", fp, 2, ClusterConfig(num_instances=2, lockstep=2, report_interval_s=0.1))


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "validation"
    moe = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    if not (folder / "llmservingsim" / "runs" / "RTXPRO6000-Llama-3.1-8B" / "meta.json").is_file():
        sys.exit(f"usage: python benchmarks/dp_moe_proxy.py [VALIDATION_DIR] [MOE_PROFILE_DIR]; "
                 f"{folder} has no llmservingsim/runs/RTXPRO6000-Llama-3.1-8B/meta.json")
    if moe is not None and not (moe / "tp1" / "moe.csv").is_file():
        sys.exit(f"usage: python benchmarks/dp_moe_proxy.py [VALIDATION_DIR] [MOE_PROFILE_DIR]; {moe} has no tp1/moe.csv")
    main(folder, moe)
