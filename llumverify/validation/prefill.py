"""Prefill against measured time to first token of static batches, and the compute transfer rule.

Static-batch latencies (static_batch.py) are mostly decode: weight and KV reads. A batch of B
prompts with one output token is all prefill: GEMMs at full tensor-core load. The argonne
LLM-Inference-Bench rows of that kind (`Plots/Fig_22/all_results_TTFT_ITL.csv`: Hardware, Num of
Hardware, Framework, Model, Input Length, Output Length, Batch Size, TTFT Latency) show how much of
its datasheet compute a GPU reaches with the same vLLM; the kernel efficiencies come from another
GPU's profiles, so each tensor-core generation (GPU.arch) gets a scale of them
(Efficiency.flops_scale) that these rows would fit. `leave_one_gpu_out` fits it without the GPU
under test; a generation with no other measured GPU keeps 1. Nothing fitted here ships: Hopper's
0.81 is that 2024 engine's prefill, not its GEMMs (docs/engines.md, "Serving at load").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.inputs import csv_records
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.roofline import Efficiency, kv_capacity_blocks, step_cost_first_principles
from llumverify.validation.static_batch import BOARD_DEVICES, HARDWARE, engine_for, priced_name, simulate_batch

COLUMNS = ("Hardware", "Num of Hardware", "Framework", "Model", "Input Length", "Output Length", "Batch Size",
           "TTFT Latency")
SCALES = np.round(np.arange(0.50, 1.2001, 0.01), 2)
MAX_ROWS = 10_000


@dataclass(frozen=True)
class PrefillRow:
    """B prompts of `prompt` tokens started together on one GPU; seconds until every first token."""

    line: int
    gpu: str  # catalog name
    model: str  # catalog name
    batch: int
    prompt: int
    ttft_s: float
    tp: int = 1  # GPUs of the instance (one MI250 board is two, static_batch.BOARD_DEVICES)


def read_prefill_rows(path: Path, framework: str = "vLLM") -> tuple[list[PrefillRow], list[str]]:
    """The one-GPU (one-board), one-output-token rows of `framework` whose GPU and model are in the catalogs,
    and why each other such row was skipped; a malformed file is a one-line UserError."""
    rows, skipped = [], []
    for i, rec in csv_records(path, "TTFT CSV", COLUMNS, MAX_ROWS):
        if not rec.get("Hardware") or rec.get("Framework") != framework:
            continue
        try:
            gpus, out = int(rec["Num of Hardware"]), int(rec["Output Length"])
            batch, prompt, ttft = int(rec["Batch Size"]), int(rec["Input Length"]), float(rec["TTFT Latency"])
        except (TypeError, ValueError):
            raise UserError(f"{path}:{i}: malformed number") from None
        if not (batch > 0 and 0 < prompt <= 1_000_000 and ttft > 0 and np.isfinite(ttft)):
            raise UserError(f"{path}:{i}: batch, input length and TTFT must be positive")
        if gpus != 1 or out != 1:
            continue
        try:
            g = get_gpu(HARDWARE.get(rec["Hardware"], rec["Hardware"])).name
            m = priced_name(get_model(rec["Model"]))  # an fp8 checkpoint stays fp8
        except UserError as exc:
            skipped.append(f"line {i}: {str(exc).split(' (known')[0]}")
            continue
        rows.append(PrefillRow(i, g, m, batch, prompt, ttft, BOARD_DEVICES.get(g, 1)))
    return rows, skipped


def simulate_ttft(row: PrefillRow, eff: Efficiency) -> float:
    """Simulated seconds until the batch's last first token (its one output token: it then
    finishes), first principles on its GPU."""
    step = step_cost_first_principles(row.model, row.gpu, tp=row.tp, eff=eff)
    return simulate_batch(row.line, row.batch, row.prompt, 1, step,
                          engine_for(kv_capacity_blocks(row.model, row.gpu, tp=row.tp)))


def signed_errors(rows: Sequence[PrefillRow], eff: Efficiency) -> np.ndarray:
    """simulated / real - 1 per row."""
    return np.array([simulate_ttft(r, eff) / r.ttft_s - 1 for r in rows])


def with_scale(eff: Efficiency, arch: str, scale: float) -> Efficiency:
    scales = dict(eff.flops_scale)
    scales[arch] = float(scale)
    return dataclasses.replace(eff, flops_scale=tuple(sorted(scales.items())))


def _log_cost(rows: Sequence[PrefillRow], eff: Efficiency, arch: str, scale: float) -> float:
    return float(np.median(np.abs(np.log(signed_errors(rows, with_scale(eff, arch, scale)) + 1))))


def fit_scale(rows: Sequence[PrefillRow], eff: Efficiency, arch: str) -> tuple[float, float]:
    """(scale, median APE) for `arch` on `rows`: the scale on SCALES minimising the median
    |log(sim / real)|. A prefill's time is close to inverse in the scale, so one simulation per row
    at scale 1 gives a first guess; the grid points within 0.06 of it are then simulated."""
    if not rows:
        raise UserError(f"no prefill rows to fit {arch}'s flops_scale on")
    ratio = signed_errors(rows, with_scale(eff, arch, 1.0)) + 1
    guess = SCALES[int(np.argmin([np.median(np.abs(np.log(ratio / s))) for s in SCALES]))]
    near = [float(s) for s in SCALES if abs(s - guess) <= 0.06 + 1e-9]
    best = min(near, key=lambda s: _log_cost(rows, eff, arch, s))
    if best in (SCALES[0], SCALES[-1]):
        raise UserError(f"{arch}'s flops_scale fit ended at its grid's edge ({best}): the rows do not look like "
                        "prefill on this GPU family")
    return best, float(np.median(np.abs(signed_errors(rows, with_scale(eff, arch, best)))))


def leave_one_gpu_out(rows: Sequence[PrefillRow], eff: Efficiency) -> dict[str, dict[str, object]]:
    """Per GPU: its generation's scale fitted on the OTHER measured GPUs of that generation (1 if
    none), the error on its own rows before (scale 1) and after."""
    arch = {r.gpu: get_gpu(r.gpu).arch for r in rows}
    out: dict[str, dict[str, object]] = {}
    for gpu in dict.fromkeys(r.gpu for r in rows):
        held = [r for r in rows if r.gpu == gpu]
        train = [r for r in rows if r.gpu != gpu and arch[r.gpu] == arch[gpu]]
        scale = fit_scale(train, eff, arch[gpu])[0] if train else 1.0
        before = signed_errors(held, with_scale(eff, arch[gpu], 1.0))
        after = signed_errors(held, with_scale(eff, arch[gpu], scale))
        out[gpu] = {"arch": arch[gpu], "rows": len(held), "scale": scale,
                    "fitted_on": sorted({r.gpu for r in train}), "median_signed_before": float(np.median(before)),
                    "median_ape_before": float(np.median(np.abs(before))),
                    "median_signed": float(np.median(after)), "median_ape": float(np.median(np.abs(after)))}
    return out


def prefill_report(csv_path: Path, out: Path, eff: Efficiency) -> list[str]:
    """reports/validation's prefill section: writes out/validation.json, returns the markdown lines."""
    import json

    from llumverify.files.paths import write_atomic

    rows, skipped = read_prefill_rows(csv_path)
    logo = leave_one_gpu_out(rows, eff)
    shipped = dict(eff.flops_scale)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "validation.json", json.dumps({"schema_version": 1, "csv": str(csv_path), "rows": len(rows),
                                                      "skipped": skipped, "leave_one_gpu_out": logo,
                                                      "shipped_flops_scale": shipped}, indent=2, sort_keys=True) + "\n")
    return [
        "## 5. Prefill: time to first token of static batches, and the compute transfer rule",
        "",
        "A batch of 16 prompts of 1,024 tokens with one output token is all prefill: GEMMs at full tensor-core load, "
        "which static batches (mostly decode) hardly see. vLLM rows of argonne-lcf/LLM-Inference-Bench "
        "`Plots/Fig_22/all_results_TTFT_ITL.csv` (BSD-3-Clause, 4211f5d), regenerated with `llumverify "
        "validation-report --public-ttft-csv ttft.csv`, that file being `git show 4211f5d:Plots/Fig_22/"
        "all_results_TTFT_ITL.csv` (every row is read; other frameworks are left out); "
        f"{len(rows)} rows, {len(skipped)} skipped (GPU or model not in the catalogs). First principles with "
        "no engine term; each GPU's tensor-core generation gets a scale of the profiled compute efficiency "
        "(`flops_scale`, `llumverify/validation/prefill.py`) fitted on the OTHER measured GPUs of its generation; "
        "a generation with no other measured GPU keeps 1 (the rule). Signed error: simulated / real − 1.",
        "",
        "| GPU | arch | rows | before (scale 1) | scale | fitted on | after, held out |",
        "|---|---|---|---|---|---|---|",
        *(f"| {g}{' (one board: TP 2)' if BOARD_DEVICES.get(g, 1) > 1 else ''} | {v['arch']} | {v['rows']} | {100 * v['median_signed_before']:+.1f} % | {v['scale']} | "
          f"{', '.join(v['fitted_on']) or '— (rule: 1)'} | {100 * v['median_signed']:+.1f} % |"
          for g, v in logo.items()),
        "",
        *([f"Not predicted (held-out error beyond ±30 %): {', '.join(g for g, v in logo.items() if abs(v['median_signed']) > 0.3)}: "
           "a prefill far slower than any compute scale of the kernels explains (on AMD, 2024 ROCm vLLM takes about as "
           "long on MI250 as on MI300X): first-principles TTFT there is not to be trusted.", ""]
          if any(abs(v["median_signed"]) > 0.3 for v in logo.values()) else []),
        "Shipped in `sim/efficiency.toml`: "
        + (", ".join(f"{a} = {s}" for a, s in sorted(shipped.items())) + "; every other generation"
           if shipped else "none: every generation")
        + " keeps its datasheet peak times the profiled efficiency. These 2024 prefills are not what ships: measured "
        "H100 GEMM kernels (Vidur, `benchmarks/vidur_check.py`) and vLLM v0.15.1 serving runs "
        "(`benchmarks/public_serving.py`) both put Hopper at scale 1 (docs/engines.md).",
        "",
    ]
