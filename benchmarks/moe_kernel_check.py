"""First principles' MoE block against a measured fused-MoE kernel profile (held out: nothing fitted on it).

    python benchmarks/moe_kernel_check.py PROFILE_DIR

PROFILE_DIR: an LLMServingSim MoE profile with tp1/moe.csv (`tokens,activated_experts,time_us`:
one layer's router + experts), e.g. Qwen3-30B-A3B on an RTX PRO 6000 with vLLM 0.19:

    git -C LLMServingSim archive 5daddb2 profiler/perf/RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16 | tar -x

For every row, sim/roofline.py's MoE terms at that row's activated experts A (not the uniform-
routing expectation, so each grid point is checked): the gate_up and down GEMMs reading A experts'
weights and computing T·k expert rows, the router GEMM and SiLU·mul, with the efficiencies fitted
on the dense profiles (sim/efficiency.toml). Prints each row's signed error, the median APE over
all rows and over the rows nearest uniform routing (the A a step of T tokens activates on average,
what simulations use), and the whole model's linear step cost from the profile (sim/profile.py,
its moe.csv read under uniform routing) against first principles.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.profile import profile_meta, read_moe, step_cost_from_profile
from llumverify.sim.roofline import (experts_touched, gemm_k, gemm_ns, gemm_params, load_efficiency, moe_fixed_ns,
                                     moe_gemm_ns,
                                     small_op_ns, step_cost_first_principles)
from llumverify.sim.stepcost import interpolate


def block_ns(model, gpu, eff, tokens: int, active: float | None = None, tp: int = 1, router: bool = True,
             shared: bool = False) -> float:
    """sim/roofline.py's MoE block of one layer on one GPU of a tp-way group, as layer_dense_ns prices it:
    the gate_up and down expert GEMMs reading `active` experts (default uniform routing's expectation),
    SiLU·mul, the fixed time on NVIDIA HBM GPUs (moe_fixed_ns), and optionally the router GEMM and a
    shared expert. The one copy the benchmark scripts use (tests/test_moe_kernels_published.py checks it
    against layer_dense_ns)."""
    gp = gemm_params(model, tp)
    t = sum(moe_gemm_ns(gp[op], tokens, model, gpu, eff, active=active) for op in ("gate_up_proj", "down_proj"))
    t += small_op_ns(model, "act_fn", tokens, gpu, eff, tp) + moe_fixed_ns(gpu, eff)
    if router:
        t += gemm_ns(model.hidden * model.experts, tokens, model.dtype_bytes, gpu, eff)
    if shared:
        t += sum(gemm_ns(gp[op], tokens, model.linear_bytes, gpu, eff, fmt=model.op_format(False), k=gemm_k(model, op, tp))
                 for op in ("shared_gate_up_proj", "shared_down_proj"))
        t += small_op_ns(model, "shared_act_fn", tokens, gpu, eff, tp)
    return t


def main(folder: Path) -> None:
    table = read_moe(folder)
    if table is None:
        raise UserError(f"{folder}: no tp1/moe.csv (not an MoE profile)")
    meta = profile_meta(folder)
    model, gpu, eff = get_model(meta["model"]), get_gpu(meta["hardware"]), load_efficiency()
    print(f"{model.name} on {gpu.name}, {folder}/tp1/moe.csv; first principles with {', '.join(eff.fitted_on)}'s efficiencies")
    print(f"{'tokens':>7} {'experts':>8} {'real us':>9} {'ours us':>9} {'signed':>7}")
    signed, uniform = [], []
    for t, points in table.items():
        expected = experts_touched(model, t)
        nearest = min(a for a, _ in points if abs(a - expected) == min(abs(b - expected) for b, _ in points))
        for a, ns in points:
            err = block_ns(model, gpu, eff, t, a) / ns - 1
            signed.append(err)
            if a == nearest:
                uniform.append(err)
            print(f"{t:>7} {a:>8} {ns / 1e3:>9.1f} {block_ns(model, gpu, eff, t, a) / 1e3:>9.1f} {100 * err:>+6.1f}%"
                  + ("  <- nearest uniform routing" if a == nearest else ""))
    s, u = np.array(signed), np.array(uniform)
    print(f"all {len(s)} rows: median APE {100 * np.median(np.abs(s)):.1f} %, median signed {100 * np.median(s):+.1f} %")
    print(f"{len(u)} rows nearest uniform routing: median APE {100 * np.median(np.abs(u)):.1f} %, "
          f"max APE {100 * np.max(np.abs(u)):.1f} %")
    prof = step_cost_from_profile(folder, model.layers, routing=(model.experts, model.experts_per_token))
    ours = step_cost_first_principles(model, gpu)
    print("whole model, linear step cost (ms) at T tokens: profile / first principles")
    for t in (1, 8, 64, 512, 2048):
        print(f"  T={t:>5}: {interpolate(prof.linear, t) / 1e6:6.2f} / {interpolate(ours.linear, t) / 1e6:6.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python benchmarks/moe_kernel_check.py PROFILE_DIR  (a folder holding meta.yaml and tp1/moe.csv)")
    try:
        main(Path(sys.argv[1]))
    except UserError as exc:
        sys.exit(f"error: {exc}")
