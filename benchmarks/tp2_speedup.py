"""Qwen3-32B at TP2 on two RTX PRO 6000s: our predicted TP speed-up against the one issue #28 reports.

    python benchmarks/tp2_speedup.py [VALIDATION_DIR]   # default ../shared/validation

The shared folder has the TP2 run's settings (runs/RTXPRO6000-Qwen3-32B/meta.json) and the
one-GPU Qwen3-32B kernel profile, not the run's results or its workload. Issue #28 reports
that the one-GPU profile with --tp ignored overestimates the run's mean E2E by 35 % (so the
run is 1.35x faster than that replay) and that first principles then predicted 1.70x. This
replays the Llama-3.1-8B ShareGPT workload of the shared runs (same 300 requests at 10/s,
Llama-3 tokenizer lengths: a proxy for the Qwen run's own) under the TP2 run's engine settings
and prints mean TTFT / TPOT / E2E for the one-GPU profile (TP2's KV capacity), the profile scaled
to TP2, and first principles at TP1 and TP2. Speed-up = E2E(TP1 profile) / E2E(TP2 source).
Not a validation: the run's requests are not in ../shared, and the issue's 35 % came from an earlier
version of the simulator. LLMServingSim publishes the run with its requests: benchmarks/public_runs.py
replays it (reports/validation/public-runs).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from llumverify.settings.config import HardwareConfig
from llumverify.sim import engine_profile
from llumverify.sim.roofline import kv_capacity_blocks
from llumverify.validation.replay import RealRun, load_workload, replay
from llumverify.validation.run_engine import engine_settings

SOURCES = [("TP1 profile, TP2 KV", "profile", 1, 2), ("TP2 profile scaled", "profile", 2, 2),
           ("TP1 first principles", "gpu", 1, 1), ("TP2 first principles", "gpu", 2, 2)]  # (label, source, tp, KV of tp)


def main(validation: Path) -> None:
    lss = validation / "llmservingsim"
    meta = json.loads((lss / "runs/RTXPRO6000-Qwen3-32B/meta.json").read_text())
    specs = load_workload(lss / "workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl", 16)
    profile = str(lss / "profiles/RTXPRO6000/Qwen3-32B")
    e2e: dict[str, float] = {}
    for label, source, tp, kv_tp in SOURCES:
        hw = (HardwareConfig(profile=profile, model="Qwen3-32B", tp=tp) if source == "profile"
              else HardwareConfig(gpu="RTXPRO6000", model="Qwen3-32B", tp=tp))
        blocks = kv_capacity_blocks("Qwen3-32B", "RTXPRO6000", tp=kv_tp)
        engine, _ = engine_settings(meta, "meta.json", num_blocks=blocks)
        sim = replay(RealRun(engine, specs, {}, {}, meta), engine_profile.step_cost(hw))
        e2e[label] = float(np.mean(sim["e2e"]))
        print(f"{label:22s} KV blocks {blocks:6d}  TTFT {np.mean(sim['ttft']):6.2f} s  "
              f"TPOT {1000 * np.nanmean(sim['tpot']):6.1f} ms  E2E {e2e[label]:6.2f} s")
    base = e2e["TP1 profile, TP2 KV"]
    print(f"TP speed-up on E2E: profile {base / e2e['TP2 profile scaled']:.2f}x, first principles "
          f"{base / e2e['TP2 first principles']:.2f}x (issue #28: the run 1.35x, first principles then 1.70x)")


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "validation"
    if not (folder / "llmservingsim" / "runs" / "RTXPRO6000-Qwen3-32B" / "meta.json").is_file():
        sys.exit(f"usage: python benchmarks/tp2_speedup.py [VALIDATION_DIR] (../shared/validation); "
                 f"{folder} has no llmservingsim/runs/RTXPRO6000-Qwen3-32B/meta.json")
    main(folder)
