"""A one-GPU profile scaled to TP2 (sim/tensor_parallel.py) against the TP2 shard's measured kernels.

    python benchmarks/tp_shard_check.py LSS_DIR

LSS_DIR as benchmarks/public_runs.py extracts it (casys-kaist/LLMServingSim at 5daddb2, MIT). Its
dense RTX PRO 6000 profiles (`profiler/perf/RTXPRO6000/<model>/bf16`: Llama-3.1-8B, Qwen3-32B) have
a `tp2/` beside `tp1/`: the same kernels timed on one GPU at the TP2 shard's shapes (half the
heads, KV heads, intermediate size and vocab; meta.yaml hf_overrides), without communication.
sim/tensor_parallel.py never reads tp2/: it multiplies the tp1 tables by first principles' tp2 /
tp1 ratio and adds the collectives. This takes the collectives back out (the same
collectives.py terms scale_to_tp adds) and compares the kernel part with the tp2 tables, per
table: `linear` (the layers' linear ops and norms per step of T tokens), `per_seq` (lm_head and
sampler per S sequences), and attention at every grid point both folders measured (a prefill
chunk over cached tokens plus decodes over their KV): the tp1 time times the ratio the scaled
attention coefficients give that point (so the attention model's own fit error, large on this
grid, cancels). Next to it, the tp1 tables unscaled (what `--tp` ignored gave). Nothing is fitted
on tp2; prints the median signed error (scaled / measured - 1) and the largest |error|.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from tabulate import tabulate

from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.collectives import logits_gather_ns, step_allreduce_ns
from llumverify.sim.profile import read_attention, step_cost_from_profile
from llumverify.sim.stepcost import StepCost, interpolate
from llumverify.sim.tensor_parallel import scale_to_tp

MODELS = {"Llama-3.1-8B": "meta-llama/Llama-3.1-8B", "Qwen3-32B": "Qwen/Qwen3-32B"}
TP = 2


def measured_tp2(profile: Path, layers: int) -> tuple[StepCost, np.ndarray]:
    """The tp2/ tables read as a one-GPU profile (a copy whose tp1/ is tp2/), and its attention grid."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "p"
        (copy / "tp1").mkdir(parents=True)
        shutil.copy2(profile / "meta.yaml", copy / "meta.yaml")
        for f in (profile / f"tp{TP}").glob("*.csv"):
            shutil.copy2(f, copy / "tp1" / f.name)
        return step_cost_from_profile(copy, layers), read_attention(copy)


def attention_ns(cost: StepCost, chunk: int, ctx: int, n_decode: int, decode_ctx: int) -> int:
    """The attention part of a step (all layers): the step without its per-step, linear and per-sequence parts."""
    chunks = [(chunk, ctx)] if chunk else []
    return (cost.step_ns(chunks, n_decode, decode_ctx) - cost.fixed_ns - interpolate(cost.linear, chunk + n_decode)
            - interpolate(cost.per_seq, n_decode + len(chunks)))


def summary(errs: np.ndarray) -> list[str]:
    return [f"{100 * np.median(errs):+.1f} %", f"{100 * np.max(np.abs(errs)):.1f} %"]


def errors(name: str, profile: Path) -> list[list]:
    model, gpu = get_model(name), get_gpu("RTX PRO 6000")
    one = step_cost_from_profile(profile, model.layers)
    scaled, (real, grid) = scale_to_tp(one, TP), measured_tp2(profile, model.layers)
    link = gpu.link
    kernels = {"linear": lambda x: interpolate(scaled.linear, x) - step_allreduce_ns(model, x, TP, link),
               "per_seq": lambda x: interpolate(scaled.per_seq, x) - logits_gather_ns(model, x, TP, link)}
    rows = []
    for table, kernel in kernels.items():
        xs = [x for x, _ in getattr(real, table)]
        truth = np.array([interpolate(getattr(real, table), x) for x in xs])
        ours = np.array([kernel(x) for x in xs]) / truth - 1
        unscaled = np.array([interpolate(getattr(one, table), x) for x in xs]) / truth - 1
        rows.append([name, table, len(xs), *summary(ours), summary(unscaled)[0]])
    # attention: the ratio the scaled coefficients give each measured grid point, times its tp1 time
    tp1 = {tuple(int(v) for v in r[:4]): r[4] for r in read_attention(profile)}
    shared = [(tuple(int(v) for v in r[:4]), r[4]) for r in grid if tuple(int(v) for v in r[:4]) in tp1]
    ratio = np.array([attention_ns(scaled, *k) / attention_ns(one, *k) for k, _ in shared])
    tp2 = np.array([us for _, us in shared])
    one_us = np.array([tp1[k] for k, _ in shared])
    rows.append([name, "attention grid", len(shared), *summary(one_us * ratio / tp2 - 1), summary(one_us / tp2 - 1)[0]])
    return rows


def main(root: Path) -> int:
    rows = []
    for name, hf in MODELS.items():
        profile = root / "profiler" / "perf" / "RTXPRO6000" / hf / "bf16"
        if not (profile / f"tp{TP}").is_dir():
            print(f"tp_shard_check: error: {profile}/tp{TP} not found (extract LLMServingSim as the docstring says)",
                  file=sys.stderr)
            return 2
        rows += errors(name, profile)
    print(tabulate(rows, headers=["model", "table", "points", "scaled tp1: median signed", "max |err|",
                                  "tp1 unscaled: median signed"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python benchmarks/tp_shard_check.py LSS_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
