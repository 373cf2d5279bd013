"""First principles' 4-bit GEMMs against published kernel times: NVFP4 on B200, Marlin W4A16 on H200, H100, A10.

    python benchmarks/w4_kernels_published.py [ROWS_CSV]

ROWS_CSV (default reports/validation/w4-kernels/rows.csv): one published time a row,
`gpu,weights,kernel,n,k,tokens,kernel_us,role,source`: one GEMM of an n x k weight matrix in
`weights` (int4, nvfp4, or bf16 for a baseline in the same table) applied to `tokens` rows. Each
row is priced as the simulator prices a step's GEMM (sim/roofline.py gemm_ns, the format's bytes
and compute peak from sim/quantization.py, the shipped efficiencies), and the signed error
(first principles / published - 1) printed per kernel series, with and without the four fp4 terms.

The fit of fp4_gemm_bw, fp4_gemm_flops, fp4_gemm_ns and fp4_gemm_ps_per_k (sim/efficiency.toml), together, on
the rows whose role is `fit`: for each bandwidth share and each compute share (of the FP4 peak) from 0.05 to 1
in steps of 0.01, the fixed time and the time per reduction (K) element that minimise the squared relative
errors (each source's rows weighted 1/its row count, so one publication counts once), rounded to 100 ns and
1 ps and each at least 0; the four with the least weighted squared error win. The per-K time is the K loop
each output tile runs (FlashInfer's CUTLASS FP4 GEMM at 1-64 tokens: 4.3 us at K = 256-1,024, 40 us at
K = 28,672, #2540). The terms need fit rows of at least two weight sizes and two K, and some row whose
priced time depends on compute (at least 1.5x slower at a compute share of 0.05 than at 1: many tokens),
and a best share at either end of its range is no fit: each is a one-line error. The rows time
the GEMM alone (#20578's nvfp4-noquant column, helion's fp4in): the activations' quantisation to FP4,
24-39 % more at 512-16,384 tokens in #20578's with-quant column, is not priced (vLLM fuses some of it
into RMSNorm and SiLU; which, in a given server, is not checked). `fit` rows (from session 31) are the
kernel vLLM runs on sm_100 with FlashInfer installed, FlashInfer's CUTLASS FP4 GEMM (vLLM 0.15's
ModelOptNvFp4LinearMethod picks "flashinfer-cutlass" there; its B200 sweep logs "Using flashinfer-cutlass for
NVFP4 GEMM", FlashInfer 0.6.1 pinned, autotuned at warm-up): flashinfer#2540's autotuned table, timed on GB200,
whose GPUs stream at B200's 8 TB/s, so only its rows of up to 256 tokens. No row of that kernel has more tokens,
so the compute share rests on vLLM's own CUTLASS FP4 GEMM at 1,024-16,384 tokens (#20578), also fit rows: the two
are CUTLASS SM100 block-scaled GEMMs, assumed to reach one compute share. `check` rows: vLLM's own kernel at
fewer tokens (#20578, helion#3046 and its re-run #3278: what vLLM runs without FlashInfer), FlashInfer 0.3.1's
(#1732, an older generation), #2540's untuned table, Marlin W4A16 and a bf16 baseline (which pay no term);
`newer` rows (2026 TRT-LLM and CUTLASS kernels, several times faster at small shapes) are shown only. Before
session 31 every CUTLASS row was a fit row (bandwidth 0.49, compute 0.49, 4.0 µs, 561 ps a K element), which
priced FlashInfer's large shapes 15-41 % slow.

The fit of w4a16_hopper_bw and w4a16_hopper_ns (session 32), on the `fit` rows of weight-only 4-bit GEMMs on a Hopper
GPU (int4, or NVFP4 there): for each bandwidth share on the same grid, the fixed time (rounded to 100 ns, at least 0) that minimises the weighted
squared relative errors; the least wins. Its fit rows are vLLM's Marlin kernel (ops.marlin_gemm, what AWQ
checkpoints run up to vLLM 0.18 and RTN/Marlin checkpoints run) on H200 at one token, timed kernel-only
(TileOPs#1874: CUPTI, median of 50); humming#2's H100 Marlin rows (channelwise, 1-4 tokens) are `check` rows,
another GPU and table. They need fit rows of two weight sizes or more, and a best share at either end is no fit.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import published_rows
from published_rows import read_csv, source_key

from llumverify.errors import UserError
from llumverify.sim.catalog import FORMAT_BYTES, GPU, get_gpu
from llumverify.sim.quantization import runs_w4a16_hopper, runs_w4a4
from llumverify.sim.roofline import Efficiency, gemm_ns, gemm_terms, load_efficiency

ROWS = Path(__file__).resolve().parents[1] / "reports" / "validation" / "w4-kernels" / "rows.csv"
COLUMNS = ("gpu", "weights", "kernel", "n", "k", "tokens", "kernel_us", "role", "source")
WEIGHTS = ("bf16", "int4", "nvfp4")
ROLES = ("fit", "newer", "check")


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows, each checked: a catalog GPU, a known format and role, whole n, k, tokens >= 1 and a
    kernel time > 0 (a UserError naming the line otherwise)."""
    rows = read_csv(path, COLUMNS)
    for line, r in enumerate(rows, start=2):
        try:
            n, k, tokens, us = int(r["n"]), int(r["k"]), int(r["tokens"]), float(r["kernel_us"])
        except ValueError as exc:
            raise UserError(f"{path}:{line}: n, k and tokens must be whole numbers, kernel_us a number ({exc})") from None
        if min(n, k, tokens) < 1 or not (math.isfinite(us) and us > 0):
            raise UserError(f"{path}:{line}: n, k and tokens must be >= 1 and kernel_us > 0")
        for column, known in (("weights", WEIGHTS), ("role", ROLES)):
            if r[column] not in known:
                raise UserError(f"{path}:{line}: {column} must be one of {', '.join(known)}, got {r[column]!r}")
        try:
            gpu = get_gpu(r["gpu"])
        except UserError as exc:
            raise UserError(f"{path}:{line}: {exc}") from None
        if r["role"] == "fit" and not (runs_w4a4(r["weights"], gpu.arch) or runs_w4a16_hopper(r["weights"], gpu.arch)):
            raise UserError(f"{path}:{line}: a fit row must run W4A4 (nvfp4 on a Blackwell GPU) or W4A16 on Hopper (int4 "
                            f"or nvfp4 on sm_90), got {r['weights']} on {r['gpu']}")
    return rows


def _gemm(r: dict[str, str]) -> tuple[tuple[int, int, float, GPU], dict[str, object]]:
    """The row's GEMM as gemm_ns and gemm_terms take it: (weights, tokens, bytes a weight, GPU), and its format and
    reduction length (k) as keywords."""
    fmt = r["weights"]
    return ((int(r["n"]) * int(r["k"]), int(r["tokens"]), FORMAT_BYTES.get(fmt, 2.0), get_gpu(r["gpu"])),
            {"fmt": fmt, "k": int(r["k"])})


def priced_us(r: dict[str, str], eff: Efficiency) -> float:
    """The simulator's time for the row's GEMM, in us."""
    args, kw = _gemm(r)
    return gemm_ns(*args, eff, **kw) / 1e3


def _terms_ns(r: dict[str, str], eff: Efficiency) -> tuple[float, float, float]:
    """gemm_terms of the row's GEMM: (fixed, memory, compute) ns."""
    args, kw = _gemm(r)
    return gemm_terms(*args, eff, **kw)


SHARES = tuple(round(0.05 + 0.01 * i, 2) for i in range(96))


FP4_TERMS = ("fp4_gemm_bw", "fp4_gemm_flops", "fp4_gemm_ns", "fp4_gemm_ps_per_k")  # in the order the fit prints them
# each row's terms at shares of 1, without the fixed and per-K times
UNFITTED = dict(fp4_gemm_ns=0, fp4_gemm_ps_per_k=0, fp4_gemm_bw=1.0, fp4_gemm_flops=1.0)


def _fixed_and_per_k(y: np.ndarray, k: np.ndarray, w: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At every grid point (p: the rows' memory-compute time there, ns), the fixed time (ns, rounded to 100) and the
    time per reduction element (ns, rounded to 1 ps), both >= 0, that minimise the weighted squared relative errors
    of fixed + k x per_k + p: the least of the unconstrained solution (where both are >= 0), either one alone, and
    neither."""
    a1, a2, b = 1.0 / y, k / y, (y - p) / y
    s11, s12, s22 = (np.sum(w * u * v) for u, v in ((a1, a1), (a1, a2), (a2, a2)))
    t1, t2 = np.sum(w * a1 * b, axis=-1), np.sum(w * a2 * b, axis=-1)
    det = s11 * s22 - s12**2
    both = ((s22 * t1 - s12 * t2) / det, (s11 * t2 - s12 * t1) / det)
    zero = np.zeros_like(t1)
    best, score = (zero, zero), np.full(t1.shape, np.inf)
    for f, c in (both, (t1 / s11, zero), (zero, t2 / s22), (zero, zero)):
        f, c = np.round(f, -2), np.round(c, 3)
        err = np.where((f >= 0) & (c >= 0), np.sum(w * ((f[..., None] + k * c[..., None] + p) / y - 1) ** 2, axis=-1),
                       np.inf)
        take = err < score
        best, score = (np.where(take, f, best[0]), np.where(take, c, best[1])), np.where(take, err, score)
    return best


def _weights(fit: list[dict[str, str]]) -> np.ndarray:
    """Each fit row's weight: 1 / its source's row count, so one publication counts once."""
    per_source: dict[str, int] = {}
    for r in fit:
        per_source[source_key(r)] = per_source.get(source_key(r), 0) + 1
    return np.array([1.0 / per_source[source_key(r)] for r in fit])


def fit_fp4_terms(rows: list[dict[str, str]]) -> dict[str, float]:
    """fp4_gemm_bw, fp4_gemm_flops, fp4_gemm_ns and fp4_gemm_ps_per_k as the module docstring fits them (0 each
    without a W4A4 `fit` row)."""
    fit = [r for r in rows if r["role"] == "fit" and runs_w4a4(r["weights"], get_gpu(r["gpu"]).arch)]
    if not fit:
        return {t: 0.0 if t.endswith(("_bw", "_flops")) else 0 for t in FP4_TERMS}
    if len({int(r["n"]) * int(r["k"]) for r in fit}) < 2:
        raise UserError("the W4A4 fit rows hold one weight size: a bandwidth share and a fixed time need two or more")
    if len({int(r["k"]) for r in fit}) < 2:
        raise UserError("the W4A4 fit rows hold one reduction length (k): a time per k element needs two or more")
    eff = load_efficiency()
    y = np.array([float(r["kernel_us"]) * 1e3 for r in fit])
    w = _weights(fit)
    # every row's terms at shares of 1, then the whole grid at once: memory / bandwidth share, compute / compute share
    unit = np.array([_terms_ns(r, dataclasses.replace(eff, **UNFITTED)) for r in fit]).T
    k = np.array([float(r["k"]) for r in fit])
    shares = np.array(SHARES)
    mem = unit[1] / shares[:, None, None]  # (bandwidth share, 1, row)
    comp = unit[2] / shares[None, :, None]  # (1, compute share, row)
    p = unit[0] + (mem**eff.gemm_p + comp**eff.gemm_p) ** (1.0 / eff.gemm_p)
    fixed, per_k = _fixed_and_per_k(y, k, w, p)
    score = np.sum(w * ((fixed[..., None] + k * per_k[..., None] + p) / y - 1) ** 2, axis=-1)
    i, j = np.unravel_index(int(np.argmin(score)), score.shape)  # the first least, bandwidth share first
    best = (float(score[i, j]), SHARES[i], SHARES[j], int(fixed[i, j]), int(round(1e3 * per_k[i, j])))
    if best[1] in (SHARES[0], SHARES[-1]):
        raise UserError(f"the W4A4 fit rows put the bandwidth share at the end of its range ({best[1]}): no fit")
    slow, fast = (dataclasses.replace(eff, **UNFITTED | {"fp4_gemm_bw": 0.5, "fp4_gemm_flops": s})
                  for s in (SHARES[0], 1.0))
    if max(priced_us(r, slow) / priced_us(r, fast) for r in fit) < 1.5:
        raise UserError("no fit row's time depends on compute (too few tokens in every one): the compute share needs "
                        "rows of many tokens")
    if best[2] in (SHARES[0], SHARES[-1]):
        raise UserError(f"the W4A4 fit rows put the FP4 compute share at the end of its range ({best[2]}): no fit")
    return dict(zip(FP4_TERMS, best[1:]))


W4A16_TERMS = ("w4a16_hopper_bw", "w4a16_hopper_ns")
# every 4-bit kernel term at 0: each GEMM at gemm_bw and gemm_flops, as before the kernel fits
WITHOUT_4BIT_TERMS = dict(fp4_gemm_ns=0, fp4_gemm_ps_per_k=0, fp4_gemm_bw=0.0, fp4_gemm_flops=0.0, w4a16_hopper_bw=0.0,
                          w4a16_hopper_ns=0)


def fit_w4a16_terms(rows: list[dict[str, str]]) -> dict[str, float]:
    """w4a16_hopper_bw and w4a16_hopper_ns as the module docstring fits them (0 each without a weight-only `fit` row on
    Hopper)."""
    fit = [r for r in rows if r["role"] == "fit" and runs_w4a16_hopper(r["weights"], get_gpu(r["gpu"]).arch)]
    if not fit:
        return dict(zip(W4A16_TERMS, (0.0, 0)))
    if len({int(r["n"]) * int(r["k"]) for r in fit}) < 2:
        raise UserError("the W4A16 fit rows hold one weight size: a bandwidth share and a fixed time need two or more")
    eff = dataclasses.replace(load_efficiency(), w4a16_hopper_ns=0)
    y = np.array([float(r["kernel_us"]) * 1e3 for r in fit])
    w = _weights(fit)
    best: tuple[float, float, int] | None = None
    for share in SHARES:
        p = np.array([priced_us(r, dataclasses.replace(eff, w4a16_hopper_bw=share)) * 1e3 for r in fit])
        fixed = max(0.0, round(float(np.sum(w * (y - p) / y**2) / np.sum(w / y**2)), -2))
        score = float(np.sum(w * ((fixed + p) / y - 1) ** 2))
        if best is None or score < best[0]:
            best = (score, share, int(fixed))
    assert best is not None
    if best[1] in (SHARES[0], SHARES[-1]):
        raise UserError(f"the W4A16 fit rows put the bandwidth share at the end of its range ({best[1]}): no fit")
    return dict(zip(W4A16_TERMS, best[1:]))


def fit_terms(rows: list[dict[str, str]]) -> dict[str, float]:
    """Every term the fit rows set: the four fp4 terms, then the two W4A16 Hopper ones."""
    return fit_fp4_terms(rows) | fit_w4a16_terms(rows)


def series_table(rows: list[dict[str, str]]) -> list[list]:
    """Per (GPU, kernel, role): rows, token range, median signed error with and without the 4-bit terms (the four
    fp4 and the two W4A16 Hopper ones)."""
    eff = load_efficiency()
    without = dataclasses.replace(eff, **WITHOUT_4BIT_TERMS)
    series: dict[tuple, list[dict[str, str]]] = {}
    for r in rows:
        series.setdefault((r["gpu"], r["weights"], r["kernel"], r["role"], source_key(r)), []).append(r)
    table = []
    for (gpu, weights, kernel, role, source), rs in series.items():
        def med(e: Efficiency) -> str:
            return f"{100 * float(np.median([priced_us(r, e) / float(r['kernel_us']) - 1 for r in rs])):+.1f} %"
        tokens = sorted(int(r["tokens"]) for r in rs)
        shapes = sorted({f"{r['n']}x{r['k']}" for r in rs})
        table.append([gpu, weights, kernel, role, len(rs), f"{tokens[0]}-{tokens[-1]}", ", ".join(shapes),
                      f"{float(np.median([float(r['kernel_us']) for r in rs])):.1f}", med(eff), med(without), source])
    return table


def main(argv: list[str]) -> int:
    return published_rows.main(argv, "w4_kernels_published", ROWS, read_rows, series_table,
                               ["GPU", "weights", "kernel", "role", "rows", "tokens", "n x k", "median us",
                                "median signed", "without the 4-bit terms", "source"],
                               fit_terms,
                               {t: getattr(load_efficiency(), t) for t in FP4_TERMS + W4A16_TERMS})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
