"""What kernel profiles cannot give first principles, fitted on measured static batches.

The kernel efficiencies (sim/efficiency.toml) come from GDDR kernel profiles of one GPU. The
priors (sim/roofline.py PRIORS) are fitted here on static batches (argonne LLM-Inference-Bench
format, llumverify/validation/static_batch.py), never on the rows they are then judged on:
- hbm_bw_scale, fixed_ns and seq_ns jointly on one-GPU rows: the share of the GDDR-fitted
  bandwidth efficiency an HBM GPU reaches, and the engine's CPU time per step and per sequence
  and step of that vLLM version;
- tp_step_ns on rows of TP groups (the others kept): a TP group's per-step overhead;
- for a stack the NVIDIA terms do not describe (2024 ROCm vLLM on MI250 and MI300X), vendor_fit:
  layer_ns, seq_ns, seq_gparam_ns and tp_step_ns jointly, with kv_bw (read per query head) and
  hbm_bw_scale.
A static batch runs the same steps whatever these constants are (no queueing decisions depend on
time), so its latency is linear in fixed_ns, seq_ns and tp_step_ns: for each candidate
hbm_bw_scale three simulations give every row's latency as a function of the constants, a fine
grid is searched on that, and the chosen point is simulated again to report its error.
`leave_one_gpu_out` fits on every GPU but one and reports the error on the one left out;
`vendor_leave_one_gpu_out` does so across the AMD GPUs (each one's vendor_fit on the other, transferred by
VENDOR_TRANSFER), and `transfer_decomposition` shows which of those terms does not transfer.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

from pathlib import Path

from llumverify.sim.roofline import EFFICIENCY_TOML, PRIORS, Efficiency, step_cost_first_principles
from llumverify.validation.static_batch import Row, price_rows

Rows = Sequence[tuple[Row, str, str]]  # (row, catalog GPU, catalog model), as static_rows gives them
SCALES = np.round(np.arange(0.70, 1.0001, 0.025), 4)
FIXED = np.arange(0, 5_000_001, 50_000)  # ns per step
SEQ = np.arange(0, 100_001, 1_000)  # ns per sequence and step
TP_STEP = np.arange(0, 8_000_001, 50_000)
LAYER = np.arange(0, 1_000_001, 2_500)  # ns per layer and step


def simulate(rows: Rows, eff: Efficiency) -> np.ndarray:
    """Each row's simulated latency (s) from first principles with these efficiencies, at its TP."""
    return np.array(price_rows(rows, lambda row, g, model: step_cost_first_principles(model, g, tp=row.gpus, eff=eff)))


def ape(rows: Rows, eff: Efficiency) -> np.ndarray:
    """Absolute relative error of every row's latency."""
    return np.abs(simulate(rows, eff) / _real(rows) - 1)


def _real(rows: Rows) -> np.ndarray:
    return np.array([r.latency_s for r, _, _ in rows])


def _best_linear(base: np.ndarray, slopes: list[np.ndarray], axes: list[np.ndarray],
                 real: np.ndarray, mean_log: bool = False) -> tuple[tuple[int, ...], float]:
    """The grid point minimising the median APE of base + Σ slope·value (values in the axes' units),
    or with mean_log the mean |log(predicted / real)|, which no group of rows can be given up by."""
    best, best_loss = (0,) * len(axes), np.inf
    first, rest = axes[0], axes[1:]
    grids = np.stack(np.meshgrid(*rest, indexing="ij"), -1).reshape(-1, len(rest)) if rest else np.zeros((1, 0))
    for v in first:
        pred = base[None, :] + slopes[0][None, :] * v
        if rest:
            pred = pred + grids @ np.array(slopes[1:])
        loss = (np.mean(np.abs(np.log(pred / real[None, :])), axis=1) if mean_log
                else np.median(np.abs(pred / real[None, :] - 1), axis=1))
        i = int(np.argmin(loss))
        if loss[i] < best_loss:
            best, best_loss = (int(v), *(int(x) for x in grids[i])), float(loss[i])
    return best, best_loss


def fit_engine_terms(rows: Rows, base: Efficiency) -> tuple[Efficiency, float]:
    """(efficiencies with hbm_bw_scale, fixed_ns and seq_ns fitted, median APE) on one-GPU rows."""
    real = _real(rows)
    best: tuple[float, Efficiency] = (np.inf, base)
    for scale in SCALES:
        eff = dataclasses.replace(base, hbm_bw_scale=float(scale), fixed_ns=0, seq_ns=0)
        t0 = simulate(rows, eff)
        per_step = (simulate(rows, dataclasses.replace(eff, fixed_ns=1_000_000)) - t0) / 1_000_000
        per_seq = (simulate(rows, dataclasses.replace(eff, seq_ns=1_000)) - t0) / 1_000
        (step, seq), loss = _best_linear(t0, [per_step, per_seq], [FIXED, SEQ], real)
        if loss < best[0]:
            best = (loss, dataclasses.replace(eff, fixed_ns=step, seq_ns=seq))
    eff = best[1]
    return eff, float(np.median(ape(rows, eff)))


# the vendor fit's linear terms, searched jointly (coarser grids than the NVIDIA ones: four at once)
# with the measuring step of each slope; and its KV-read (share of the profile-fitted kv_bw) and HBM scales
VENDOR_GRIDS = {"layer_ns": np.arange(0, 400_001, 10_000), "seq_ns": np.arange(0, 200_001, 10_000),
                "seq_gparam_ns": np.arange(0, 100_001, 5_000), "tp_step_ns": np.arange(0, 8_000_001, 500_000)}
VENDOR_UNIT = {"layer_ns": 1_000_000, "seq_ns": 1_000, "seq_gparam_ns": 1_000, "tp_step_ns": 1_000_000}
KV_SCALES = (0.2, 0.3, 0.5, 0.75, 1.0, 1.25)  # above 1: GQA heads' repeated KV reads hit in cache (kv_per_query_head)
VENDOR_HBM_SCALES = (0.675, 0.75, 0.825, 0.9, 1.0)
# kv_bw_v1 as a share of kv_bw (1.0: the same kernel for every batch, kv_bw_v1 = 0)
V1_SHARES = (1.0, 0.75, 0.5, 0.35)


def vendor_fit(rows: Rows, base: Efficiency) -> tuple[Efficiency, float]:
    """(efficiencies, median APE) for a GPU whose serving stack the NVIDIA-fitted terms do not
    describe (MI250's and MI300X's 2024 ROCm vLLM), on its own calibration rows (one-GPU and TP): the
    decode-attention KV-read efficiency (kv_bw, a share of the profile-fitted one, with every query
    head reading its KV head: another vendor's paged-attention kernel), kv_bw_v1 (the same for steps
    where vLLM runs paged-attention V1: a share of kv_bw, or 0 for one kernel), hbm_bw_scale, and jointly
    layer_ns (per layer and step, fixed_ns = 0), seq_ns and seq_gparam_ns (per sequence and step, the
    second per billion weights a token meets on one GPU: decode GEMMs far below the roofline; rows of
    two model sizes tell them apart, rows of two TP degrees the per-GPU part) and tp_step_ns. The loss
    is the mean |log(simulated / real)|: under the median APE the fit gave up the one-sequence rows
    (their per-layer cost) to fit the others."""
    base = dataclasses.replace(base, kv_per_query_head=True, fixed_ns=0, **{t: 0 for t in VENDOR_GRIDS})
    real = _real(rows)
    best: tuple[float, Efficiency] = (np.inf, base)
    for k, v1, scale in itertools.product(KV_SCALES, V1_SHARES, VENDOR_HBM_SCALES):
        kv_bw = round(base.kv_bw * k, 4)
        eff = dataclasses.replace(base, kv_bw=kv_bw, kv_bw_v1=0.0 if v1 == 1.0 else round(kv_bw * v1, 4),
                                  hbm_bw_scale=scale)
        t0 = simulate(rows, eff)
        slopes = [(simulate(rows, dataclasses.replace(eff, **{t: u})) - t0) / u for t, u in VENDOR_UNIT.items()]
        values, loss = _best_linear(t0, slopes, list(VENDOR_GRIDS.values()), real, mean_log=True)
        if loss < best[0]:
            best = (loss, dataclasses.replace(eff, **dict(zip(VENDOR_GRIDS, values))))
    eff = best[1]
    return eff, float(np.median(ape(rows, eff)))


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


LINK_TERMS = ("alpha_ns", "bw_eff", "custom_alpha_ns", "custom_max_bytes")  # an interconnect's fitted or prior terms


def held_out_table(rows: Rows, base: Efficiency, tp_step_ns: int | None = None):
    """Section 4's calibration on CALIB_GPU (engine terms on its one-GPU rows, tp_step_ns on its dense TP
    rows, or tp_step_ns as given) and the median errors of every other row by GPU and TP degree (MoE and
    34B-70B models also on their own): (one-GPU rows, TP rows, terms, their two median APEs, table)."""
    from llumverify.sim.catalog import get_model

    one = [r for r in rows if r[1] == CALIB_GPU and r[0].gpus == 1]
    eff, calib_one = fit_engine_terms(one, base)
    moe = {r[2] for r in rows if get_model(r[2]).moe}
    tp_calib = [r for r in rows if r[1] == CALIB_GPU and r[0].gpus > 1 and r[2] not in moe]
    if tp_step_ns is None:
        eff, calib_tp = fit_tp_step(tp_calib, eff)
    else:
        eff = dataclasses.replace(eff, tp_step_ns=tp_step_ns)
        calib_tp = float(np.median(ape(tp_calib, eff)))
    held = [r for r in rows if r not in one and r not in tp_calib]
    signed = simulate(held, eff) / _real(held) - 1
    groups: dict[str, tuple[list, list]] = {}
    for r, e in zip(held, signed):
        kind = "MoE " if r[2] in moe else ""
        keys = [f"{r[1]} TP{r[0].gpus}"]
        if kind or get_model(r[2]).params > 30e9:
            keys.append(f"{kind}{r[2]} on {r[1]} TP{r[0].gpus}")
        for key in keys:
            groups.setdefault(key, ([], []))[0].append(r)
            groups[key][1].append(e)
    table = {k: _median(rs, np.array(es)) for k, (rs, es) in sorted(groups.items())}
    return one, tp_calib, eff, calib_one, calib_tp, table


def public_report(csv_path, out) -> list[str]:
    """reports/validation section 4 from a public static-batch CSV (vLLM rows only): writes
    out/validation.json and returns the markdown lines."""
    import json
    from pathlib import Path

    from llumverify.settings.config import HardwareConfig
    from llumverify.files.paths import write_atomic
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.roofline import load_efficiency
    from llumverify.validation import rocm_attention
    from llumverify.validation.static_batch import static_rows

    rows, skipped = static_rows(Path(csv_path), HardwareConfig(), tp=None)
    rows = [r for r in rows if r[0].framework == "vLLM"]
    base = load_efficiency()
    logo = leave_one_gpu_out([r for r in rows if r[1] in LOGO_GPUS], base)
    one, tp_calib, eff, calib_one, calib_tp, table = held_out_table(rows, base)
    amd = {g: [r for r in rows if r[1] == g] for g in VENDOR_GPUS}
    vendor: dict[str, object] = {}
    vendor_effs: dict[str, Efficiency] = {}
    vendor_lines: list[str] = []
    for g, g_rows in amd.items():
        vendor[g], vendor_effs[g], lines_g = _vendor_report(g, g_rows, base, eff)
        vendor_lines += lines_g
    amd_logo, amd_logo_lines = vendor_leave_one_gpu_out(amd, vendor_effs)
    amd_terms, amd_terms_lines = transfer_decomposition(amd, vendor_effs)
    siblings = rocm_attention.sibling_ratios(rows, (*VENDOR_GPUS, "H100", "A100-40GB"))
    links = {get_gpu(g).link for g in sorted({r[1] for r in rows if r[0].gpus > 1 and r[1] not in VENDOR_GPUS})}
    interconnects = {x.name: {k: getattr(x, k) for k in LINK_TERMS} for x in sorted(links, key=lambda x: x.name)}
    Path(out).mkdir(parents=True, exist_ok=True)
    write_atomic(Path(out) / "validation.json", json.dumps({
        "schema_version": 1, "csv": str(csv_path), "leave_one_gpu_out": logo,
        "calibration": {"one_gpu_rows": len(one), "one_gpu_median_ape": calib_one, "tp_rows": len(tp_calib),
                        "tp_median_ape": calib_tp, "fixed_ns": eff.fixed_ns, "seq_ns": eff.seq_ns,
                        "hbm_bw_scale": eff.hbm_bw_scale, "tp_step_ns": eff.tp_step_ns,
                        "interconnects": interconnects},
        "held_out": table, **vendor, "amd_leave_one_gpu_out": amd_logo,
        "amd_transfer_decomposition": amd_terms, "llama3_over_llama2": siblings,
        "skipped": len(skipped)}, indent=2, sort_keys=True) + "\n")
    lines = [
        "## 4. Public static batches: other GPUs, tensor parallelism, MoE, 70B",
        "",
        f"vLLM rows of argonne-lcf/LLM-Inference-Bench `Plots/All_results.csv` (BSD-3-Clause, 4211f5d; 2024 vLLM "
        f"versions; `Num of Hardware` = TP degree, except for MI250: boards of two GPUs), regenerated with `llumverify validation-report --public-csv "
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
        *amd_logo_lines,
        *amd_terms_lines,
        f"**TP, MoE, 70B, AMD**: calibration = the {len(one)} one-GPU {CALIB_GPU} rows (fixed_ns "
        f"{eff.fixed_ns:,} ns, seq_ns {eff.seq_ns:,} ns, hbm_bw_scale {eff.hbm_bw_scale}; median APE "
        f"{100 * calib_one:.1f} %) and its {len(tp_calib)} dense TP2/TP4 rows (tp_step_ns {eff.tp_step_ns:,} ns per "
        f"step, median APE {100 * calib_tp:.1f} %). TP collectives (`sim/catalog/gpus.toml`, NCCL terms fitted on "
        "measured NCCL all-reduces by `benchmarks/nccl_fit.py`): "
        + "; ".join(f"{n}: NCCL {v['alpha_ns'] / 1000:g} µs + bytes at {v['bw_eff']:g} of the datasheet bandwidth"
                    + (f", vLLM's custom all-reduce {v['custom_alpha_ns'] / 1000:g} µs below {v['custom_max_bytes'] / 2**20:g} MiB"
                       if v["custom_max_bytes"] else "") for n, v in interconnects.items())
        + ". Every row below is held out (signed error: simulated / real − 1; MoE rows never entered a fit):",
        "",
        "| held-out rows | rows | median APE | median signed error |", "|---|---|---|---|",
        *(f"| {k} | {v['rows']} | {100 * v['median_ape']:.1f} % | {100 * v['median_signed']:+.1f} % |"
          for k, v in table.items()),
        "",
        *vendor_lines,
        *rocm_attention.report_lines(siblings),
    ]
    return lines


# AMD GPUs: argonne ran the same vLLM on both (v0.6.1 on ROCm, vLLM/MI250 and vLLM/MI300X READMEs), a stack the
# NVIDIA terms do not describe. Each is calibrated on its own rows (vendor_fit): VENDOR_CALIB at the smallest TP
# degree the GPU runs the model at (TP1 on MI300X; an MI250 GCD holds no 70B model: Llama-2-70B from TP4) - a GQA and
# an MHA 7-8B model and one 70B model, since the per-weight cost needs two sizes - and VENDOR_TP_CALIB, the widest
# TP degree of one model (against the smallest it separates the per-GPU share of the per-sequence cost from its
# constant; on MI300X with TP2 instead: 12.5 % held out, TP8 rows 14.6 %), all at once
VENDOR_GPUS = ("MI250", "MI300X")
VENDOR_CALIB = ("Llama-3-8B", "Llama-2-7B", "Llama-2-70B")
VENDOR_TP_CALIB = ("Llama-3-8B", 8)
# how each AMD GPU's 2024 ROCm vLLM rows differ from first principles with the NVIDIA terms (measured on the rows)
VENDOR_WHY = {
    "MI300X": "Its 2024 ROCm vLLM rows are overhead- and attention-bound, not weight-bandwidth-bound: Llama-3-8B at "
              "B = 1, L = 1,024 takes 10.3 ms per output token on TP1 and 9.8-10.8 ms on TP2-TP8 (16 GB of weights at "
              "5.3 TB/s is 3.0 ms, and TP does not shorten it), Llama-2-70B 54.7 ms on TP1 (138 GB: 26 ms at peak) and "
              "22.7 ms on TP8; at B = 64, L = 2,048 a step takes 93 ms on MI300X and 23.5 ms on H100 (25 GB of KV read "
              "per step). And each sequence adds to a decode step a cost that grows with the weights a token meets: "
              "from B = 16 to B = 256 at L = 128, Llama-3-8B's time per output token grows 0.43 ms per sequence on TP1 "
              "and 0.15 ms on TP8, Llama-2-70B's 4.2 and 0.71 ms (H100, Llama-3-8B TP1, B = 16 to 64: 0.09 ms); a "
              "per-sequence constant fitted on 7-8B models alone left the 70B rows 21-36 % too fast.",
    "MI250": "`Num of Hardware` counts MI250 boards, each two GCDs that ROCm and vLLM see as two GPUs (the catalog's "
             "MI250 is one GCD: 181 TFLOPS, 1.64 TB/s, 64 GB), so 1, 2 and 4 boards run at TP2, TP4 and TP8 "
             "(llumverify/validation/static_batch.py BOARD_DEVICES: argonne's MI250 script passes "
             "--tensor-parallel-size 4 and 8, and Llama-2-70B has rows on 2 and 4 boards, never on one).",
}


def vendor_calibration_rows(rows: Rows) -> list[tuple[Row, str, str]]:
    """One AMD GPU's calibration rows: VENDOR_CALIB at the smallest TP degree each has rows at, then VENDOR_TP_CALIB."""
    smallest: dict[str, int] = {}
    for r, _, m in rows:
        smallest[m] = min(smallest.get(m, r.gpus), r.gpus)
    return ([x for x in rows if x[2] in VENDOR_CALIB and x[0].gpus == smallest[x[2]]]
            + [x for x in rows if (x[2], x[0].gpus) == VENDOR_TP_CALIB])


def _calib_label(rows: Rows) -> str:
    """'Llama-3-8B TP1, Llama-2-7B TP1, ...': the calibration shapes in VENDOR_CALIB's order, VENDOR_TP_CALIB last."""
    order = {m: i for i, m in enumerate(VENDOR_CALIB)}
    shapes = sorted({(r.gpus == VENDOR_TP_CALIB[1] and m == VENDOR_TP_CALIB[0], order.get(m, len(order)), m, r.gpus)
                     for r, _, m in rows})
    return ", ".join(f"{m} TP{tp}" for *_, m, tp in shapes)


def _vendor_report(gpu: str, rows: Rows, base: Efficiency,
                   nvidia: Efficiency) -> tuple[dict[str, object], Efficiency, list[str]]:
    """An AMD GPU calibrated on its own stated rows (vendor_calibration_rows), every other row of it held out:
    median APE before (the NVIDIA-fitted terms) and after; returns (doc, fitted terms, markdown lines)."""
    calib = vendor_calibration_rows(rows)
    eff, calib_err = vendor_fit(calib, base)
    held = [r for r in rows if r not in calib]
    before = simulate(held, nvidia) / _real(held) - 1
    after = simulate(held, eff) / _real(held) - 1
    groups: dict[str, list[int]] = {}
    for i, (r, _, m) in enumerate(held):
        for key in (f"{gpu} TP{r.gpus}", f"{m} TP{r.gpus}", "all held-out"):
            groups.setdefault(key, []).append(i)
    table = {k: {"before": _median(idx, before[idx]), "after": _median(idx, after[idx])}
             for k, idx in sorted(groups.items())}
    terms = _vendor_terms(eff)
    doc = {"calibration": {"rows": _calib_label(calib), "n_rows": len(calib), "median_ape": calib_err, **terms},
           "held_out": table}
    unseen = sorted({m for _, _, m in held} - {m for _, _, m in calib} - {"Mixtral-8x7B"})
    lines = [
        f"**{gpu}, its own calibration** (the NVIDIA-fitted terms above leave the {gpu} rows "
        f"{100 * table['all held-out']['before']['median_ape']:.0f} % off; median signed "
        f"{100 * table['all held-out']['before']['median_signed']:+.0f} %). {VENDOR_WHY[gpu]} Fitted "
        "(`transfer_fit.vendor_fit`, one joint fit minimising the mean |log(simulated / real)|): layer_ns, a per-layer "
        "per-step overhead (fixed_ns 0), the decode-attention KV efficiency kv_bw with every query head reading its KV "
        "head (no GQA reuse) and kv_bw_v1 in steps where vLLM runs paged-attention V1 (below; 0: one kernel), "
        "hbm_bw_scale, seq_ns (per sequence and step), seq_gparam_ns (per sequence and step per "
        "billion layer weights a token meets on one GPU: decode GEMMs far below the roofline) and tp_step_ns, on "
        f"the {len(calib)} rows of {_calib_label(calib)} (median APE {100 * calib_err:.1f} %): "
        + ", ".join(f"{k} {v:,}" for k, v in terms.items()) + ". Every row below is held out"
        + (f" ({', '.join(unseen)} at every TP degree: models no fit saw; MoE rows never entered a fit):" if unseen
           else " (MoE rows never entered a fit):"),
        "",
        "| held-out rows | rows | median APE before | median APE after | median signed after |",
        "|---|---|---|---|---|",
        *(f"| {k} | {v['after']['rows']} | {100 * v['before']['median_ape']:.1f} % | "
          f"{100 * v['after']['median_ape']:.1f} % | {100 * v['after']['median_signed']:+.1f} % |"
          for k, v in table.items()),
        "",
    ]
    return doc, eff, lines


def _vendor_terms(eff: Efficiency) -> dict[str, object]:
    return {"kv_bw": eff.kv_bw, "kv_bw_v1": eff.kv_bw_v1, "hbm_bw_scale": eff.hbm_bw_scale, "layer_ns": eff.layer_ns,
            "seq_ns": eff.seq_ns,
            "seq_gparam_ns": eff.seq_gparam_ns, "fixed_ns": eff.fixed_ns, "tp_step_ns": eff.tp_step_ns}


# The transfer rule across AMD GPUs (VENDOR_TRANSFER), stated before it was measured and applied the same way in both
# directions; the one before it reused every term unchanged (TRANSFER_TERMS decomposes what that left). The ns terms
# are those of the same vLLM 0.6.1 ROCm stack, kv_bw and hbm_bw_scale shares of the datasheet peaks of the GPU they
# are applied to, and what a decode step's GEMMs add per sequence is kept in absolute time (gemm_row_ns): no number
# is fitted. VENDOR_TRANSFER_WHY gives the evidence for that last part and its caveat.
VENDOR_TRANSFER = ("every term of the other GPU's own calibration reused unchanged (kv_bw and hbm_bw_scale are shares "
                   "of the datasheet peaks of the GPU they are applied to; the ns terms those of the same vLLM 0.6.1 "
                   "ROCm stack), except that the per-sequence decode GEMM cost per billion weights (the roofline's "
                   "compute time of one token row plus seq_gparam_ns) is kept in absolute time, not as a share of "
                   "the compute peak: seq_gparam_ns takes the difference of the two GPUs' row times (no number fitted); "
                   "and hbm_bw_scale is scaled by the ratio of the two GPUs' measured streaming-read shares of their "
                   "datasheet bandwidth (STREAM_READ_SHARE: one benchmark on both)")
# A streaming read's share of the datasheet HBM bandwidth, one method on both AMD GPUs: RRZE-HPC/gpu-benches at
# 1038c5d, gpu-stream's read kernel (numbers cited, not copied: GPL-3.0). MI300X: 4,199 GB/s of 5.3 TB/s. MI250: an
# MI210's 1,397 GB/s of 1.6384 TB/s (one CDNA2 die, 104 CUs, with the same 64 GB of HBM2e at 1.6384 TB/s as one
# MI250 GCD, the GPU the catalog models). Found in session 36, after the AMD leave-one-GPU-out had been printed.
STREAM_READ_SHARE = {"MI300X": 4199 / 5300, "MI250": 1397 / 1638.4}
VENDOR_TRANSFER_WHY = (
    "Why the per-sequence GEMM cost is kept in absolute time: MI250's calibration carries it in the roofline's compute "
    "term (seq_gparam_ns 0), which MI300X's datasheet peak shrinks 7.2x (1,307.4 vs 181.05 TFLOPS), while ROCm's "
    "small GEMMs run far below that peak: hipBLASLt reaches 53 TFLOPS on a 1,024-cube FP8 GEMM on MI300X (1,159 at "
    "8,192; samuel-bohman/AI-benchmarking-guide at 3de0c29, Azure_Results/ND_MI300X_v5_results.md), GEMM tuning "
    "alone raised MI300X vLLM throughput up to 7.2x (nscale, https://www.nscale.com/blog/nscale-benchmarks-updated-"
    "amd-mi300x-gpus-with-gemm-tuning-using-gradlib-and-textprompt, vLLM 0.4.3), and argonne's prefill rows (section "
    "5, another file) take about as long on an MI250 board as on an MI300X. Caveat: the rule was chosen after the "
    "decomposition above pointed at seq_gparam_ns, so it is not a blind test. The 53 TFLOPS is that file's early "
    "revision; its later one (bf209ab) reads 278 TFLOPS at the 1,024 cube, still a fifth of the peak. hbm_bw_scale "
    "transfers by the GPUs' streaming-read shares (RRZE-HPC/gpu-benches 1038c5d, gpu-stream: MI300X 0.792, an MI210, "
    "whose HBM2e is an MI250 GCD's, 0.853), found after the table above was printed: not blind either.")


def gemm_row_ns(gpu: str, eff: Efficiency) -> float:
    """The roofline's compute time (ns) of one token row through a billion weights on `gpu`: 2 FLOPs a weight at
    the datasheet peak times gemm_flops (sim/roofline.py gemm_ns's compute term)."""
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.roofline import flops

    return 2e9 / (flops(get_gpu(gpu), eff) * eff.gemm_flops) * 1e9


def vendor_transfer(eff: Efficiency, source: str, target: str) -> Efficiency:
    """`source`'s own calibration applied to `target` by VENDOR_TRANSFER: seq_gparam_ns + gemm_row_ns is kept, and
    hbm_bw_scale follows the measured streaming-read shares."""
    gparam = eff.seq_gparam_ns + gemm_row_ns(source, eff) - gemm_row_ns(target, eff)
    hbm = eff.hbm_bw_scale * STREAM_READ_SHARE[target] / STREAM_READ_SHARE[source]
    return dataclasses.replace(eff, seq_gparam_ns=max(0, round(gparam)), hbm_bw_scale=round(hbm, 4))


def vendor_leave_one_gpu_out(rows: dict[str, Rows], fitted: dict[str, Efficiency]) -> tuple[dict[str, object], list[str]]:
    """AMD leave-one-GPU-out: each GPU's rows (all of them, MoE too) simulated with the terms calibrated on the
    other GPU alone, transferred by VENDOR_TRANSFER; median and P90 APE per GPU and per TP degree."""
    doc: dict[str, object] = {}
    for gpu, held in rows.items():
        (other,) = [g for g in fitted if g != gpu]
        signed = simulate(held, vendor_transfer(fitted[other], other, gpu)) / _real(held) - 1
        groups: dict[str, list[int]] = {}
        for i, (r, _, _) in enumerate(held):
            for key in ("all", f"TP{r.gpus}"):
                groups.setdefault(key, []).append(i)
        doc[gpu] = {"fitted_on": other, **{k: {**_median(idx, signed[idx]),
                                                "p90_ape": float(np.percentile(np.abs(signed[idx]), 90))}
                                            for k, idx in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0]))}}
    lines = [
        f"**Leave-one-GPU-out across AMD GPUs** ({', '.join(rows)}; the NVIDIA terms do not describe their ROCm "
        f"stack, below): each GPU's rows with the terms of the other GPU's own calibration (its stated rows, below), "
        f"transfer rule: {VENDOR_TRANSFER}. Every row of the GPU left out, MoE included:",
        "",
        "| GPU left out | rows | median APE | P90 APE | median signed | fitted on |", "|---|---|---|---|---|---|",
        *(f"| {g if k == 'all' else f'{g} {k}'} | {v['rows']} | {100 * v['median_ape']:.1f} % | "
          f"{100 * v['p90_ape']:.1f} % | {100 * v['median_signed']:+.1f} % | {d['fitted_on']} own calibration |"
          for g, d in doc.items() for k, v in d.items() if k != "fitted_on"),
        "",
    ]
    return doc, lines


# the diagnosis of a transfer: the vendor_fit terms swapped one at a time from the other GPU's value to the GPU's own
TRANSFER_TERMS = ("kv_bw", "kv_bw_v1", "hbm_bw_scale", "layer_ns", "seq_ns", "seq_gparam_ns", "tp_step_ns")


def transfer_decomposition(rows: dict[str, Rows], fitted: dict[str, Efficiency]) -> tuple[dict[str, object], list[str]]:
    """Which term of the other AMD GPU's calibration does not transfer: each GPU's rows with the other GPU's terms
    reused unchanged, then with one term at a time set to the GPU's own calibrated value, then all of them (its own
    calibration); median signed error per TP degree. Diagnosis only: it scores with the GPU's own terms."""
    doc: dict[str, object] = {}
    tps = sorted({r.gpus for held in rows.values() for r, _, _ in held})
    for gpu, held in rows.items():
        (other,) = [g for g in fitted if g != gpu]
        src, own = fitted[other], fitted[gpu]
        variants = {"none (reused unchanged)": src}
        variants.update({f"{t} {getattr(src, t):,} -> {getattr(own, t):,}":
                         dataclasses.replace(src, **{t: getattr(own, t)})
                         for t in TRANSFER_TERMS if getattr(src, t) != getattr(own, t)})
        variants["all (its own calibration)"] = own
        doc[gpu] = {"fitted_on": other, "swapped": {}}
        for name, eff in variants.items():
            signed = simulate(held, eff) / _real(held) - 1
            groups = {"all": list(range(len(held)))}
            for i, (r, _, _) in enumerate(held):
                groups.setdefault(f"TP{r.gpus}", []).append(i)
            doc[gpu]["swapped"][name] = {k: _median(idx, signed[idx]) for k, idx in groups.items()}
    lines = [
        "Where the error comes from (diagnosis, scored with the held-out GPU's own terms, so not a transfer): the "
        "other GPU's terms reused unchanged, then one term at a time set to the held-out GPU's own calibrated value; "
        "median signed error (simulated / real - 1), median APE of all rows in brackets:",
        "",
        "| GPU left out | term set to its own value | all | " + " | ".join(f"TP{t}" for t in tps) + " |",
        "|---|---|---|" + "---|" * len(tps),
        *(f"| {g} (from {d['fitted_on']}) | {name} | {100 * v['all']['median_signed']:+.1f} % "
          f"({100 * v['all']['median_ape']:.1f} %) | "
          + " | ".join(f"{100 * v[f'TP{t}']['median_signed']:+.1f} %" if f"TP{t}" in v else "-" for t in tps) + " |"
          for g, d in doc.items() for name, v in d["swapped"].items()),
        "",
        VENDOR_TRANSFER_WHY,
        "",
    ]
    return doc, lines


# every term a static-batch fit can set (the priors and the vendor fit's KV-read terms): what
# `calibrate --static-batch` writes and `validate --static-batch --engine-terms` reads back
TERMS = PRIORS + ("kv_bw", "kv_per_query_head", "kv_bw_v1")
SHARES = ("hbm_bw_scale", "kv_bw", "kv_bw_v1")  # fractions of a datasheet peak; every other number is whole ns
OFF_AT_ZERO = ("kv_bw_v1",)  # shares whose 0 means "not this kernel"
# a fitted term at its grid's upper end means the grid could not bracket it: the fit failed
GRID_ENDS = {"fixed_ns": int(FIXED[-1]), "seq_ns": int(SEQ[-1]), "tp_step_ns": int(TP_STEP[-1])}
VENDOR_ENDS = {t: int(grid[-1]) for t, grid in VENDOR_GRIDS.items()}
# the terms each fit searches jointly on its rows: fewer rows than terms fit any values exactly (a degenerate fit)
ENGINE_FIT_TERMS = ("fixed_ns", "seq_ns", "hbm_bw_scale")
VENDOR_FIT_TERMS = (*VENDOR_GRIDS, "kv_bw", "kv_bw_v1", "hbm_bw_scale")


def calibrate_static(rows: Rows, base: Efficiency, vendor: bool = False) -> tuple[Efficiency, str]:
    """The engine terms for first principles fitted on static batches of one hardware: fixed_ns,
    seq_ns and hbm_bw_scale on its one-GPU rows, then tp_step_ns on its dense TP rows (if any); or
    (vendor) vendor_fit's terms on its one-GPU and dense TP rows at once (either may be empty); and a line saying how
    well they fit. A term stuck at its grid's end is a failed fit (UserError)."""
    from llumverify.errors import UserError
    from llumverify.sim.catalog import get_model

    one = [r for r in rows if r[0].gpus == 1]
    tp_rows = [r for r in rows if r[0].gpus > 1 and not get_model(r[2]).moe]
    if not (one or (vendor and tp_rows)):  # a vendor fit also runs on TP rows alone (MI250: every row is TP >= 2)
        raise UserError(f"fit failed: no {'one-GPU or dense TP' if vendor else 'one-GPU'} rows to fit the engine "
                        "terms on")
    fitted, terms, kind = ((one + tp_rows, VENDOR_FIT_TERMS, "one-GPU and dense TP") if vendor
                           else (one, ENGINE_FIT_TERMS, "one-GPU"))
    if len(fitted) < len(terms):
        raise UserError(f"fit failed: {len(fitted)} {kind} row{'' if len(fitted) == 1 else 's'}, fewer rows than the "
                        f"{len(terms)} terms it fits ({', '.join(terms)}), which they cannot determine; give at "
                        f"least {len(terms)} rows")
    if vendor:
        eff, err = vendor_fit(one + tp_rows, base)
        how = (f"{', '.join(VENDOR_GRIDS)}, kv_bw, kv_bw_v1, hbm_bw_scale: median APE {100 * err:.1f} % on {len(one)} one-GPU "
               f"and {len(tp_rows)} dense TP rows")
    else:
        eff, err = fit_engine_terms(one, base)
        how = f"fixed_ns, seq_ns, hbm_bw_scale: median APE {100 * err:.1f} % on {len(one)} one-GPU rows"
        if tp_rows:
            eff, tp_err = fit_tp_step(tp_rows, eff)
            how += f"; tp_step_ns: {100 * tp_err:.1f} % on {len(tp_rows)} dense TP rows"
    stuck = [k for k, end in (VENDOR_ENDS if vendor else GRID_ENDS).items() if getattr(eff, k) >= end]
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


# What `validate --static-batch` applies when given no --engine-terms, by the GPU's vendor: the
# static-batch fits of 2024 vLLM (V0; each file says on which rows). Static batches are what
# benchmark_latency-style runs measure, and these engines spend milliseconds per step outside the
# kernels; the V1 model's zero terms (sim/efficiency.toml) are `--engine-terms none`.
STATIC_DEFAULT_TERMS = {"nvidia": EFFICIENCY_TOML.parent / "engine_terms" / "vllm-0.5.3-nvidia.toml",
                        "amd": EFFICIENCY_TOML.parent / "engine_terms" / "vllm-0.6.1-rocm.toml"}


def static_default_terms(gpu: str) -> Path:
    """The packaged engine terms for a GPU's static batches (its vendor's: AMD by a gfx arch)."""
    from llumverify.sim.catalog import get_gpu

    return STATIC_DEFAULT_TERMS[get_gpu(gpu).vendor]


def load_engine_terms(path, base: Efficiency) -> Efficiency:
    """`base` with the engine terms of a TOML written by engine_terms_toml (unknown keys are errors)."""
    from pathlib import Path

    from llumverify.errors import UserError
    from llumverify.files.paths import check_keys, read_toml
    from llumverify.settings.config import STEP_TERM_MAX_NS

    data = read_toml(Path(path), "engine-terms TOML file")
    check_keys(Path(path), data, TERMS, empty_ok=False)
    for k, v in data.items():
        if k == "kv_per_query_head":
            if not isinstance(v, bool):
                raise UserError(f"{path}: {k} must be true or false, got {v!r}")
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and (k in SHARES or v == int(v))
        # an ns term past a minute is a units slip, and a static batch of such steps would run for hours
        if not ok or (k in SHARES and not (0 < v <= 2 or (k in OFF_AT_ZERO and v == 0))) \
                or (k not in SHARES and v > STEP_TERM_MAX_NS):
            what = ("0 or a number in (0, 2]" if k in OFF_AT_ZERO else "a number in (0, 2]" if k in SHARES
                    else f"a whole ns in [0, {STEP_TERM_MAX_NS:,}] (a minute)")
            raise UserError(f"{path}: {k} must be {what}, got {v!r}")
    return dataclasses.replace(base, **{k: (v if k == "kv_per_query_head" else float(v) if k in SHARES else int(v))
                                        for k, v in data.items()})
