"""What kernel profiles cannot give first principles, fitted on measured static batches.

The kernel efficiencies (sim/efficiency.toml) come from GDDR kernel profiles of one GPU. Four
priors remain (sim/roofline.py), fitted here on static batches (argonne LLM-Inference-Bench
format, llumverify/validation/static_batch.py), never on the rows they are then judged on:
- hbm_bw_scale, fixed_ns and seq_ns jointly on one-GPU rows: the share of the GDDR-fitted
  bandwidth efficiency an HBM GPU reaches, and the engine's CPU time per step and per sequence
  and step of that vLLM version;
- tp_step_ns on rows of TP groups (the others kept): a TP group's per-step overhead.
A static batch runs the same steps whatever these constants are (no queueing decisions depend on
time), so its latency is linear in fixed_ns, seq_ns and tp_step_ns: for each candidate
hbm_bw_scale three simulations give every row's latency as a function of the constants, a fine
grid is searched on that, and the chosen point is simulated again to report its error.
`leave_one_gpu_out` fits on every GPU but one and reports the error on the one left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from llumverify.sim.roofline import PRIORS, Efficiency, kv_capacity_blocks, step_cost_first_principles
from llumverify.validation.static_batch import Row, engine_for, simulate_row

Rows = Sequence[tuple[Row, str, str]]  # (row, catalog GPU, catalog model), as static_rows gives them
SCALES = np.round(np.arange(0.70, 1.0001, 0.025), 4)
FIXED = np.arange(0, 5_000_001, 50_000)  # ns per step
SEQ = np.arange(0, 100_001, 1_000)  # ns per sequence and step
TP_STEP = np.arange(0, 8_000_001, 50_000)
LAYER = np.arange(0, 1_000_001, 2_500)  # ns per layer and step


def simulate(rows: Rows, eff: Efficiency) -> np.ndarray:
    """Each row's simulated latency (s) from first principles with these efficiencies, at its TP."""
    cache: dict[tuple[str, str, int], tuple] = {}
    out = []
    for row, g, m in rows:
        key = (g, m, row.gpus)
        if key not in cache:
            cache[key] = (step_cost_first_principles(m, g, tp=row.gpus, eff=eff),
                          engine_for(kv_capacity_blocks(m, g, tp=row.gpus)))
        out.append(simulate_row(row, *cache[key]))
    return np.array(out)


def ape(rows: Rows, eff: Efficiency) -> np.ndarray:
    """Absolute relative error of every row's latency."""
    return np.abs(simulate(rows, eff) / _real(rows) - 1)


def _real(rows: Rows) -> np.ndarray:
    return np.array([r.latency_s for r, _, _ in rows])


def _best_linear(base: np.ndarray, slopes: list[np.ndarray], axes: list[np.ndarray],
                 real: np.ndarray) -> tuple[tuple[int, ...], float]:
    """The grid point minimising the median APE of base + Σ slope·value (values in the axes' units)."""
    best, best_loss = (0,) * len(axes), np.inf
    first, rest = axes[0], axes[1:]
    grids = np.stack(np.meshgrid(*rest, indexing="ij"), -1).reshape(-1, len(rest)) if rest else np.zeros((1, 0))
    for v in first:
        pred = base[None, :] + slopes[0][None, :] * v
        if rest:
            pred = pred + grids @ np.array(slopes[1:])
        loss = np.median(np.abs(pred / real[None, :] - 1), axis=1)
        i = int(np.argmin(loss))
        if loss[i] < best_loss:
            best, best_loss = (int(v), *(int(x) for x in grids[i])), float(loss[i])
    return best, best_loss


def fit_engine_terms(rows: Rows, base: Efficiency, step_term: str = "fixed_ns") -> tuple[Efficiency, float]:
    """(efficiencies with hbm_bw_scale, seq_ns and the per-step term fitted, median APE) on one-GPU
    rows; the per-step term is fixed_ns, or layer_ns (per layer and step) for a stack whose step
    overhead grows with the layers (vendor_fit)."""
    real = _real(rows)
    grid = {"fixed_ns": FIXED, "layer_ns": LAYER}[step_term]
    best: tuple[float, Efficiency] = (np.inf, base)
    for scale in SCALES:
        eff = dataclasses.replace(base, hbm_bw_scale=float(scale), fixed_ns=0, seq_ns=0, layer_ns=0)
        t0 = simulate(rows, eff)
        per_step = (simulate(rows, dataclasses.replace(eff, **{step_term: 1_000_000})) - t0) / 1_000_000
        per_seq = (simulate(rows, dataclasses.replace(eff, seq_ns=1_000)) - t0) / 1_000
        (step, seq), loss = _best_linear(t0, [per_step, per_seq], [grid, SEQ], real)
        if loss < best[0]:
            best = (loss, dataclasses.replace(eff, seq_ns=seq, **{step_term: step}))
    eff = best[1]
    return eff, float(np.median(ape(rows, eff)))


KV_SCALES = (0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)  # of the profile-fitted kv_bw


def vendor_fit(rows: Rows, base: Efficiency) -> tuple[Efficiency, float]:
    """(efficiencies, median APE) for a GPU whose serving stack the NVIDIA-fitted terms do not
    describe (MI300X's 2024 ROCm vLLM), on its own one-GPU calibration rows: the decode-attention
    KV-read efficiency (kv_bw, a share of the profile-fitted one, with every query head reading its
    KV head: another vendor's paged-attention kernel), and with it hbm_bw_scale, layer_ns (per layer
    and step, fixed_ns = 0) and seq_ns."""
    base = dataclasses.replace(base, kv_per_query_head=True)
    fits = [fit_engine_terms(rows, dataclasses.replace(base, kv_bw=round(base.kv_bw * k, 4)), "layer_ns")
            for k in KV_SCALES]
    return min(fits, key=lambda f: f[1])


def fit_tp_step(rows: Rows, eff: Efficiency) -> tuple[Efficiency, float]:
    """(efficiencies with tp_step_ns fitted, median APE) on rows of TP groups."""
    t0 = simulate(rows, dataclasses.replace(eff, tp_step_ns=0))
    slope = (simulate(rows, dataclasses.replace(eff, tp_step_ns=1_000_000)) - t0) / 1_000_000
    (step,), _ = _best_linear(t0, [slope], [TP_STEP], _real(rows))
    eff = dataclasses.replace(eff, tp_step_ns=step)
    return eff, float(np.median(ape(rows, eff)))


def by_gpu(rows: Rows) -> dict[str, list[tuple[Row, str, str]]]:
    out: dict[str, list[tuple[Row, str, str]]] = {}
    for item in rows:
        out.setdefault(item[1], []).append(item)
    return out


def leave_one_gpu_out(rows: Rows, base: Efficiency) -> dict[str, dict[str, object]]:
    """For each GPU: hbm_bw_scale, fixed_ns and seq_ns fitted on the other GPUs' one-GPU rows, and
    the median and P90 APE on its own rows (which the fit never saw)."""
    groups = by_gpu([r for r in rows if r[0].gpus == 1])
    out: dict[str, dict[str, object]] = {}
    for gpu, held in groups.items():
        train = [r for g, rs in groups.items() if g != gpu for r in rs]
        eff, train_ape = fit_engine_terms(train, base)
        errs = ape(held, eff)
        out[gpu] = {"rows": len(held), "median_ape": float(np.median(errs)), "p90_ape": float(np.percentile(errs, 90)),
                    "fitted_on": sorted(g for g in groups if g != gpu), "hbm_bw_scale": eff.hbm_bw_scale,
                    "fixed_ns": eff.fixed_ns, "seq_ns": eff.seq_ns, "train_median_ape": train_ape}
    return out


# argonne-lcf/LLM-Inference-Bench's NVIDIA GPUs with one-GPU vLLM rows (leave-one-GPU-out), and the
# calibration GPU of the TP, MoE and cross-vendor checks (the shared folder's calibration GPU too)
LOGO_GPUS = ("A100-40GB", "H100", "GH200")
CALIB_GPU = "A100-40GB"


def _median(rows: Sequence[object], signed: np.ndarray) -> dict[str, object]:
    return {"rows": len(rows), "median_ape": float(np.median(np.abs(signed))),
            "median_signed": float(np.median(signed))}


def public_report(csv_path, out) -> list[str]:
    """reports/validation section 4 from a public static-batch CSV (vLLM rows only): writes
    out/validation.json and returns the markdown lines."""
    import json
    from pathlib import Path

    from llumverify.settings.config import HardwareConfig
    from llumverify.files.paths import write_atomic
    from llumverify.sim.catalog import get_model
    from llumverify.sim.roofline import load_efficiency
    from llumverify.validation.static_batch import static_rows

    rows, skipped = static_rows(Path(csv_path), HardwareConfig(), tp=None)
    rows = [r for r in rows if r[0].framework == "vLLM"]
    base = load_efficiency()
    logo = leave_one_gpu_out([r for r in rows if r[1] in LOGO_GPUS], base)
    one = [r for r in rows if r[1] == CALIB_GPU and r[0].gpus == 1]
    eff, calib_one = fit_engine_terms(one, base)
    moe = {r[2] for r in rows if r[2].startswith(("Mixtral", "Qwen3-30B"))}
    tp_calib = [r for r in rows if r[1] == CALIB_GPU and r[0].gpus > 1 and r[2] not in moe]
    eff, calib_tp = fit_tp_step(tp_calib, eff)
    held = [r for r in rows if r not in one and r not in tp_calib]
    real = _real(held)
    signed = simulate(held, eff) / real - 1
    groups: dict[str, tuple[list, list]] = {}
    for r, e in zip(held, signed):
        kind = "MoE " if r[2] in moe else ""
        keys = [f"{r[1]} TP{r[0].gpus}"]
        if kind or get_model(r[2]).params > 30e9:  # MoE and 34B-70B models also on their own
            keys.append(f"{kind}{r[2]} on {r[1]} TP{r[0].gpus}")
        for key in keys:
            groups.setdefault(key, ([], []))[0].append(r)
            groups[key][1].append(e)
    table = {k: _median(rs, np.array(es)) for k, (rs, es) in sorted(groups.items())}
    vendor, vendor_lines = _vendor_report([r for r in rows if r[1] == VENDOR_GPU], base, eff)
    Path(out).mkdir(parents=True, exist_ok=True)
    write_atomic(Path(out) / "validation.json", json.dumps({
        "schema_version": 1, "csv": str(csv_path), "leave_one_gpu_out": logo,
        "calibration": {"one_gpu_rows": len(one), "one_gpu_median_ape": calib_one, "tp_rows": len(tp_calib),
                        "tp_median_ape": calib_tp, "fixed_ns": eff.fixed_ns, "seq_ns": eff.seq_ns,
                        "hbm_bw_scale": eff.hbm_bw_scale, "tp_step_ns": eff.tp_step_ns},
        "held_out": table, VENDOR_GPU: vendor, "skipped": len(skipped)}, indent=2, sort_keys=True) + "\n")
    lines = [
        "## 4. Public static batches: other GPUs, tensor parallelism, MoE, 70B",
        "",
        f"vLLM rows of argonne-lcf/LLM-Inference-Bench `Plots/All_results.csv` (BSD-3-Clause, 4211f5d; 2024 vLLM "
        f"versions; `Num of Hardware` = TP degree), regenerated with `llumverify validation-report --public-csv "
        f"argonne_vllm.csv`, that file being All_results.csv's header and vLLM rows (`awk -F, 'NR == 1 || $3 == "
        f"\"vLLM\"'`: the whole file is over a static-batch CSV's size limit); {len(skipped)} rows skipped (model or "
        f"GPU not in the catalogs, or the model does not fit).",
        "",
        "**Leave-one-GPU-out** (one-GPU rows): the engine terms (fixed_ns, seq_ns, hbm_bw_scale; "
        "`llumverify/validation/transfer_fit.py`) fitted on the other GPUs' rows, errors on the GPU left out; the kernel "
        "efficiencies come from RTX PRO 6000 profiles for every GPU.",
        "",
        "| GPU left out | rows | median APE | P90 APE | fitted on | fixed_ns | seq_ns | hbm_bw_scale |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| {g} | {v['rows']} | {100 * v['median_ape']:.1f} % | {100 * v['p90_ape']:.1f} % | "
          f"{', '.join(v['fitted_on'])} | {v['fixed_ns']:,} | {v['seq_ns']:,} | {v['hbm_bw_scale']} |"
          for g, v in logo.items()),
        "",
        f"**TP, MoE, 70B, MI300X**: calibration = the {len(one)} one-GPU {CALIB_GPU} rows (fixed_ns "
        f"{eff.fixed_ns:,} ns, seq_ns {eff.seq_ns:,} ns, hbm_bw_scale {eff.hbm_bw_scale}; median APE "
        f"{100 * calib_one:.1f} %) and its {len(tp_calib)} dense TP2/TP4 rows (tp_step_ns {eff.tp_step_ns:,} ns per "
        f"step, median APE {100 * calib_tp:.1f} %). Every row below is held out (signed error: simulated / real − 1; "
        "MoE rows never entered a fit):",
        "",
        "| held-out rows | rows | median APE | median signed error |", "|---|---|---|---|",
        *(f"| {k} | {v['rows']} | {100 * v['median_ape']:.1f} % | {100 * v['median_signed']:+.1f} % |"
          for k, v in table.items()),
        "",
        *vendor_lines,
    ]
    return lines


# MI300X (2024 ROCm vLLM): its own calibration rows, since a vendor's stack does not transfer from NVIDIA
VENDOR_GPU = "MI300X"
VENDOR_CALIB = ("Llama-3-8B", "Llama-2-7B")  # one GQA and one MHA model at TP1: vendor_fit
VENDOR_TP_CALIB = ("Llama-3-8B", 2)  # tp_step_ns


def _vendor_report(rows: Rows, base: Efficiency, nvidia: Efficiency) -> tuple[dict[str, object], list[str]]:
    """MI300X calibrated on its own stated rows (VENDOR_CALIB at TP1, then VENDOR_TP_CALIB), and every
    other MI300X row held out: median APE before (the NVIDIA-fitted terms) and after."""
    one = [r for r in rows if r[2] in VENDOR_CALIB and r[0].gpus == 1]
    tp_calib = [r for r in rows if (r[2], r[0].gpus) == VENDOR_TP_CALIB]
    eff, calib_one = vendor_fit(one, base)
    eff, calib_tp = fit_tp_step(tp_calib, eff)
    held = [r for r in rows if r not in one and r not in tp_calib]
    before = simulate(held, nvidia) / _real(held) - 1
    after = simulate(held, eff) / _real(held) - 1
    groups: dict[str, list[int]] = {}
    for i, (r, _, m) in enumerate(held):
        for key in (f"{VENDOR_GPU} TP{r.gpus}", f"{m} TP{r.gpus}", "all held-out"):
            groups.setdefault(key, []).append(i)
    table = {k: {"before": _median(idx, before[idx]), "after": _median(idx, after[idx])}
             for k, idx in sorted(groups.items())}
    terms = {"kv_bw": eff.kv_bw, "hbm_bw_scale": eff.hbm_bw_scale, "layer_ns": eff.layer_ns,
             "seq_ns": eff.seq_ns, "fixed_ns": eff.fixed_ns, "tp_step_ns": eff.tp_step_ns}
    doc = {"calibration": {"one_gpu": f"{', '.join(VENDOR_CALIB)} TP1", "one_gpu_rows": len(one),
                           "one_gpu_median_ape": calib_one, "tp": f"{VENDOR_TP_CALIB[0]} TP{VENDOR_TP_CALIB[1]}",
                           "tp_rows": len(tp_calib), "tp_median_ape": calib_tp, **terms},
           "held_out": table}
    lines = [
        f"**{VENDOR_GPU}, its own calibration** (not leave-one-GPU-out: the NVIDIA-fitted terms above leave every "
        f"{VENDOR_GPU} group 44-81 % too fast, and a vendor's serving stack cannot be transferred from another "
        f"vendor's). Its 2024 ROCm vLLM rows are overhead- and attention-bound, not weight-bandwidth-bound: "
        "Llama-3-8B at B = 1, L = 1,024 takes 10.3 ms per output token on TP1 and 9.8-10.8 ms on TP2-TP8 (16 GB of "
        "weights at 5.3 TB/s is 3.0 ms, and TP does not shorten it), Llama-2-70B 54.7 ms on TP1 (138 GB: 26 ms at "
        "peak) and 22.7 ms on TP8; at B = 64, L = 2,048 a step takes 93 ms on MI300X and 23.5 ms on H100 (25 GB "
        "of KV read per step). Fitted (`transfer_fit.vendor_fit`): layer_ns, a per-layer per-step overhead "
        "(fixed_ns 0), the decode-attention KV efficiency kv_bw with every query head reading its KV head "
        "(no GQA reuse), hbm_bw_scale and seq_ns on the "
        f"{len(one)} TP1 rows of {' and '.join(VENDOR_CALIB)} (median APE {100 * calib_one:.1f} %), then tp_step_ns "
        f"on the {len(tp_calib)} {VENDOR_TP_CALIB[0]} TP{VENDOR_TP_CALIB[1]} rows ({100 * calib_tp:.1f} %): "
        + ", ".join(f"{k} {v:,}" for k, v in terms.items()) + ". Every row below is held out:",
        "",
        "| held-out rows | rows | median APE before | median APE after | median signed after |",
        "|---|---|---|---|---|",
        *(f"| {k} | {v['after']['rows']} | {100 * v['before']['median_ape']:.1f} % | "
          f"{100 * v['after']['median_ape']:.1f} % | {100 * v['after']['median_signed']:+.1f} % |"
          for k, v in table.items()),
        "",
    ]
    return doc, lines


# every term a static-batch fit can set (the priors and the vendor fit's KV-read terms): what
# `calibrate --static-batch` writes and `validate --static-batch --engine-terms` reads back
TERMS = PRIORS + ("kv_bw", "kv_per_query_head")
SHARES = ("hbm_bw_scale", "kv_bw")  # fractions of a datasheet peak; every other number is whole ns
# a fitted term at its grid's upper end means the grid could not bracket it: the fit failed
GRID_ENDS = {"fixed_ns": int(FIXED[-1]), "seq_ns": int(SEQ[-1]), "tp_step_ns": int(TP_STEP[-1]),
             "layer_ns": int(LAYER[-1])}


def calibrate_static(rows: Rows, base: Efficiency, per_layer: bool = False) -> tuple[Efficiency, str]:
    """The engine terms for first principles fitted on static batches of one hardware: fixed_ns,
    seq_ns and hbm_bw_scale on its one-GPU rows (per_layer: layer_ns, kv_bw read per query head,
    seq_ns and hbm_bw_scale, vendor_fit), tp_step_ns on its dense TP rows (if any); and a line
    saying how well they fit. A term stuck at its grid's end is a failed fit (UserError)."""
    from llumverify.errors import UserError
    from llumverify.sim.catalog import get_model

    one = [r for r in rows if r[0].gpus == 1]
    if not one:
        raise UserError("fit failed: no one-GPU rows to fit the engine terms on")
    eff, err = vendor_fit(one, base) if per_layer else fit_engine_terms(one, base)
    fitted = "layer_ns, kv_bw, seq_ns, hbm_bw_scale" if per_layer else "fixed_ns, seq_ns, hbm_bw_scale"
    how = f"{fitted}: median APE {100 * err:.1f} % on {len(one)} one-GPU rows"
    tp_rows = [r for r in rows if r[0].gpus > 1 and not get_model(r[2]).moe]
    if tp_rows:
        eff, tp_err = fit_tp_step(tp_rows, eff)
        how += f"; tp_step_ns: {100 * tp_err:.1f} % on {len(tp_rows)} dense TP rows"
    stuck = [k for k, end in GRID_ENDS.items() if getattr(eff, k) >= end]
    if stuck:
        raise UserError(f"fit failed: {', '.join(stuck)} at the search grid's upper end ({how}); first principles do "
                        "not describe these batches")
    return eff, how


def engine_terms_toml(eff: Efficiency, how: str) -> str:
    """The TOML `calibrate --static-batch` writes and `validate --static-batch --engine-terms` reads."""
    return ("# engine terms for first-principles step costs (llumverify/validation/transfer_fit.py)\n"
            f"# {how}\n" + "".join(f"{k} = {_toml_value(getattr(eff, k))}\n" for k in TERMS))


def _toml_value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else repr(v)


def load_engine_terms(path, base: Efficiency) -> Efficiency:
    """`base` with the engine terms of a TOML written by engine_terms_toml (unknown keys are errors)."""
    from pathlib import Path

    from llumverify.errors import UserError
    from llumverify.files.paths import check_keys, read_toml

    data = read_toml(Path(path), "engine-terms TOML file")
    check_keys(Path(path), data, TERMS)
    for k, v in data.items():
        if k == "kv_per_query_head":
            if not isinstance(v, bool):
                raise UserError(f"{path}: {k} must be true or false, got {v!r}")
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and (k in SHARES or v == int(v))
        if not ok or (k in SHARES and not 0 < v <= 2):
            raise UserError(f"{path}: {k} must be a {'number in (0, 2]' if k in SHARES else 'whole ns >= 0'}, "
                            f"got {v!r}")
    return dataclasses.replace(base, **{k: (v if k == "kv_per_query_head" else float(v) if k in SHARES else int(v))
                                        for k, v in data.items()})
