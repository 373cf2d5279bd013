"""The mixed chunk+decode step against the kernel profiles and the shared real run (issue #28).

    python benchmarks/mixed_step.py      # reads ../shared/validation (or $LLUMVERIFY_VALIDATION)

1. What a prefill chunk does to the decodes' attention, measured: per RTX 4090 profile row (held out:
   the efficiencies are fitted on the RTX PRO 6000 profiles), a mixed row's time against the
   decode-only row plus the chunk-only row of the same shapes; the extra is the decodes going
   through the prefill kernel (sim/roofline.py, mixed_seq_ns and mixed_rows).
2. The first-principles attention on the mixed rows of every profile: median signed and absolute
   error; the RTX 4090 rows were not fitted on. Then each profile's mixed rows as
   benchmarks/h100_kernel_check.py reads the H100 one (mixed_summary): the measured extra over
   decode-only plus chunk-only, regressed on the fitted surcharge (where it is paid the slope is well
   above 0; on H100 it is about 0).
3. Inter-token latency against load on the shared RTX 4090 run: mean TPOT of the requests in each
   fifth of the arrival window, real and simulated (profile + the report's fitted per-step constant,
   and first principles), and its change from the first fifth to the last.
Not a test: about 5 s.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim import engine_profile
from h100_kernel_check import mixed_summary

from llumverify.sim.roofline import attention_rows, load_efficiency, load_profile, predict_attention
from llumverify.validation import replay

PROFILES = ("RTX4090/Llama-3.1-8B", "RTXPRO6000/Llama-3.1-8B", "RTXPRO6000/Qwen3-32B")
FIXED_NS = 722_656  # reports/validation/index.md section 1: fitted on the run's first third


def measured_extra(folder) -> None:
    p = load_profile(folder)
    rows = {tuple(r[:4]): r[4] for r in p.attention}
    print(f"{p.name}: mixed-step decode attention beyond decode-only + chunk-only (% of decode-only), per layer")
    for n in (16, 64):
        for kv in (256, 1024, 4096):
            d = rows.get((0, 0, n, kv))
            cells = [f"chunk {c}: {100 * (rows[(c, 0, n, kv)] - rows[(c, 0, 0, 0)] - d) / d:+.0f} %"
                     for c in (16, 512, 2048) if d and (c, 0, n, kv) in rows and (c, 0, 0, 0) in rows]
            print(f"  {n} decodes x {kv} KV tokens (decode-only {d:.0f} ns): " + ", ".join(cells))


def mixed_errors(folder) -> None:
    p, eff = load_profile(folder), load_efficiency()
    rows = attention_rows(p, "mixed")
    signed = np.array([predict_attention(p, r, eff) for r in rows]) / rows[:, 4] - 1
    held = "held out" if p.name not in eff.fitted_on else "fitted on"
    print(f"{p.name} ({held}): {len(rows)} mixed rows, median signed {100 * np.median(signed):+.1f} %, "
          f"median APE {100 * np.median(np.abs(signed)):.1f} %")


def itl_by_load(root) -> None:
    lss = root / "llmservingsim"
    run = replay.load_run(lss / "runs" / "RTX4090-Llama-3.1-8B", lss / "workloads" / "sharegpt-llama-3.1-8b-300-sps10.jsonl")
    fifths = np.array_split(np.argsort([s.arrival_s for s in run.specs], kind="stable"), 5)
    sources = {"real": run.real["tpot"],
               "sim, profile": replay.replay(run, engine_profile.step_cost(
                   HardwareConfig(profile=str(lss / "profiles" / "RTX4090" / "Llama-3.1-8B")), FIXED_NS))["tpot"],
               "sim, first principles": replay.replay(run, engine_profile.step_cost(
                   HardwareConfig(gpu="RTX4090", model="Llama-3.1-8B")))["tpot"]}
    print("mean TPOT (ms) of the requests arriving in each fifth of the window, RTX 4090 run:")
    for name, tpot in sources.items():
        means = [float(np.nanmean(tpot[i])) for i in fifths]
        print(f"  {name:22s} " + " ".join(f"{1000 * m:6.2f}" for m in means)
              + f"   last / first fifth {100 * (means[-1] / means[0] - 1):+.1f} %")


def main() -> None:
    root = Path(os.environ.get("LLUMVERIFY_VALIDATION") or Path(__file__).resolve().parents[2] / "shared" / "validation")
    measured_extra(root / "llmservingsim" / "profiles" / "RTX4090" / "Llama-3.1-8B")
    for name in PROFILES:
        mixed_errors(root / "llmservingsim" / "profiles" / name)
    for name in PROFILES:
        p = load_profile(root / "llmservingsim" / "profiles" / name)
        print(f"{p.name}: " + mixed_summary(1, p.model, root / "llmservingsim" / "profiles" / name, p.gpu))
    itl_by_load(root)


if __name__ == "__main__":
    try:
        main()
    except UserError as exc:  # a missing or malformed profile or run: one line, not a traceback
        print(f"mixed_step: error: {exc}", file=sys.stderr)
        sys.exit(2)
