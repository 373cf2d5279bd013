"""First principles' expert layers against fused-MoE kernel times published in vLLM and SGLang PRs.

    python benchmarks/moe_kernels_published.py [ROWS_CSV]

ROWS_CSV (default reports/validation/moe-kernels/rows.csv): one row per published kernel time,
`gpu,model,tp,weights,moe_config,tokens,kernel_us,source`. Every time there comes from vLLM's
benchmarks/kernels/benchmark_moe.py or SGLang's copy of it (tuning_fused_moe_triton.py): one
layer's fused_moe call (routing given; the grouped gate_up GEMM, SiLU·mul, the grouped down GEMM,
the sum over the k experts) on one GPU at the TP shard's shapes, random router logits, timed as a
CUDA graph of 10 calls replayed (kernel time, no launch cost). `moe_config` says whether vLLM had a
tuned Triton config for that GPU and shape or used its default heuristic.

Each row is priced the way the simulator prices a step's expert layers (sim/roofline.py
layer_dense_ns, through benchmarks/moe_kernel_check.py's block_ns without the router GEMM):
moe_gemm_ns for gate_up and down under uniform routing (the expected distinct experts
E(1 - (1 - k/E)^T)), SiLU·mul and moe_fixed_ns, with the shipped efficiencies. Prints per series
the median signed error (first principles / published - 1) over all its rows, at 1-4 tokens, where
every expert is read (A >= 0.95 E) up to 256 tokens (the decode batches of serving) and beyond 256
tokens, and at one token without moe_fixed_ns.

The fit of moe_layer_ns (sim/efficiency.toml): for each series on a GPU that pays it
(roofline.pays_moe_fixed: NVIDIA HBM), its one-token time minus the priced time without the term;
the median over the series, rounded to 100 ns. Series whose moe_config starts with `unshipped` (a
PR's proposal that never landed) or `held out` (found after the fit) are shown, not fitted on.
Nothing else is fitted here; the efficiencies come from RTX PRO 6000 profiles.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import published_rows
from moe_kernel_check import block_ns
from published_rows import read_csv

from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.roofline import Efficiency, check_tp, experts_touched, load_efficiency, pays_moe_fixed

ROWS = Path(__file__).resolve().parents[1] / "reports" / "validation" / "moe-kernels" / "rows.csv"
COLUMNS = ("gpu", "model", "tp", "weights", "moe_config", "tokens", "kernel_us", "source")
NOT_FITTED = ("unshipped", "held out")  # moe_config prefixes of series shown, not fitted on
WEIGHTS = ("bf16", "fp8")


def expert_layers_ns(model_name: str, gpu_name: str, tp: int, weights: str, tokens: int,
                     eff: Efficiency | None = None) -> float:
    """The simulator's expert GEMMs, SiLU·mul and fixed time of one layer for a step of `tokens` tokens."""
    model = get_model(model_name)
    if weights == "fp8":
        model = dataclasses.replace(model, weight_format="fp8")
    return block_ns(model, get_gpu(gpu_name), eff or load_efficiency(), tokens, tp=tp, router=False)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows, each checked: a catalog MoE model and GPU, a TP it shards to, bf16 or fp8, tokens >= 1,
    a kernel time > 0 (a UserError naming the line otherwise)."""
    rows = read_csv(path, COLUMNS)
    for line, r in enumerate(rows, start=2):
        try:
            tp, tokens, us = int(r["tp"]), int(r["tokens"]), float(r["kernel_us"])
        except ValueError as exc:
            raise UserError(f"{path}:{line}: tp and tokens must be whole numbers, kernel_us a number ({exc})") from None
        if tokens < 1 or not (math.isfinite(us) and us > 0):
            raise UserError(f"{path}:{line}: tokens must be >= 1 and kernel_us > 0, got {tokens} and {us}")
        if r["weights"] not in WEIGHTS:
            raise UserError(f"{path}:{line}: weights must be one of {', '.join(WEIGHTS)}, got {r['weights']!r}")
        try:
            model = get_model(r["model"])
            get_gpu(r["gpu"])
            check_tp(model, tp)
        except UserError as exc:
            raise UserError(f"{path}:{line}: {exc}") from None
        if not model.moe:
            raise UserError(f"{path}:{line}: {model.name} is not a mixture of experts")
    return rows


def _series(rows: list[dict[str, str]]) -> dict[tuple, list[tuple[int, float]]]:
    series: dict[tuple, list[tuple[int, float]]] = {}
    for r in rows:
        key = (r["gpu"], r["model"], int(r["tp"]), r["weights"], r["moe_config"], published_rows.source_key(r))
        series.setdefault(key, []).append((int(r["tokens"]), float(r["kernel_us"])))
    return series


def fit_moe_layer_ns(rows: list[dict[str, str]]) -> int:
    """moe_layer_ns as the module docstring fits it (0 without a one-token row to fit on)."""
    without = dataclasses.replace(load_efficiency(), moe_layer_ns=0)
    gaps = []
    for (gpu, model, tp, weights, config, _), points in _series(rows).items():
        one = [us for x, us in points if x == 1]
        if one and not config.startswith(NOT_FITTED) and pays_moe_fixed(get_gpu(gpu)):
            gaps.append(float(np.median(one)) * 1e3 - expert_layers_ns(model, gpu, tp, weights, 1, without))
    return int(round(float(np.median(gaps)), -2)) if gaps else 0


def series_table(rows: list[dict[str, str]]) -> list[list]:
    without = dataclasses.replace(load_efficiency(), moe_layer_ns=0)
    table = []
    for (gpu, model, tp, weights, config, source), points in _series(rows).items():
        m = get_model(model)
        t = np.array([p[0] for p in points])
        err = np.array([expert_layers_ns(model, gpu, tp, weights, int(x)) / (us * 1e3) - 1 for x, us in points])
        bare = np.array([expert_layers_ns(model, gpu, tp, weights, int(x), without) / (us * 1e3) - 1 for x, us in points])
        every = np.array([experts_touched(m, x) >= 0.95 * m.experts for x in t])

        def med(mask: np.ndarray, e: np.ndarray = err) -> str:
            return f"{100 * np.median(e[mask]):+.1f} % ({int(mask.sum())})" if mask.any() else "-"
        table.append([gpu, model, tp, weights, config, len(t), med(t > 0), med(t <= 4), med(every & (t <= 256)),
                      med(t > 256), med(t == 1, bare), source])
    return table


def main(argv: list[str]) -> int:
    return published_rows.main(argv, "moe_kernels_published", ROWS, read_rows, series_table,
                               ["GPU", "model", "tp", "weights", "MoE config", "rows", "median signed", "1-4 tokens",
                                "every expert, <= 256", "> 256", "1 token, no moe_layer_ns", "source"],
                               lambda rows: {"moe_layer_ns": fit_moe_layer_ns(rows)},
                               {"moe_layer_ns": load_efficiency().moe_layer_ns})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
