"""First principles against the only public per-layer kernel profile of an HBM GPU (issue #28).

    python benchmarks/h100_kernel_check.py LSS_H100

LSS_H100: casys-kaist/LLMServingSim at e1b753b (MIT, 2026-05-29), extracted with
    git -C LLMServingSim archive e1b753b profiler/perf/H100 configs/model/Qwen/Qwen3.6-35B-A3B.json | tar -x -C LSS_H100
Its `profiler/perf/H100/Qwen/Qwen3.6-35B-A3B/bf16` times vLLM 0.19's kernels on an H100 SXM (eager
mode, one dummy layer, meta.yaml) at tp1 and at the tp8 shard's shapes: a hybrid model (Gated
DeltaNet `linear_attention` layers, not modelled, and full-attention layers: 16 query heads, 2 KV
heads of 256, a gated q), 256 experts of width 512, 8 per token, a shared expert of 512, vocab 248,320.
The efficiencies (sim/efficiency.toml) were fitted on RTX PRO 6000 (GDDR7) profiles only; on an HBM
GPU they run at the datasheet bandwidth times hbm_bw_scale 1.0 (the transfer rule, sim/roofline.py).
This prices every op the catalog's model terms cover from the profile's config.json and compares:
signed error (first principles / measured - 1), median over the op's rows, split where the op's size
moves it from a fixed time to its bandwidth or FLOPs (`small`: T or sequences <= 16, a decode KV
under 16k tokens; `large`: T or sequences >= 256, a decode KV >= 64k tokens). The MoE block
(benchmarks/moe_kernel_check.py's router, grouped experts and SiLU·mul, plus the shared expert, as
vLLM's FusedMoE runs it) is compared where the profile's
forced routing matches the simulator's uniform-routing rule: the activated experts nearest to
E(1 - (1 - k/E)^T) (sim/roofline.py), and with all 256 experts. Then the mixed chunk + decode
attention rows: what a chunk adds to the decodes against the surcharge fitted on RTX PRO 6000
profiles (mixed_summary). Nothing is fitted.
"""
from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from moe_kernel_check import block_ns
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.sim.catalog import GPU, Model, get_gpu
from llumverify.sim.profile import read_attention, read_moe, read_per_x
from llumverify.sim.roofline import (_by_op, decode_attn_ns, experts_touched, gemm_ns, lm_head_ns, load_efficiency,
                                     mixed_extra_ns, pads_mixed_decodes, prefill_attn_ns, sampler_ns, small_op_ns)

PROFILE = Path("profiler/perf/H100/Qwen/Qwen3.6-35B-A3B/bf16")
CONFIG = Path("configs/model/Qwen/Qwen3.6-35B-A3B.json")
SMALL, LARGE = 16, 256
SMALL_KV, LARGE_KV = 16_384, 65_536
LARGE_EXTRA_US = 20.0  # a surcharge well above the launch a merged call saves (~12 us eager)


def full_attention_model(cfg: dict) -> Model:
    """The full-attention layer and MoE of the hybrid as a catalog Model (layer count: every layer)."""
    return Model(name="Qwen3.6-35B-A3B (full-attention layers)", hf_id="Qwen/Qwen3.6-35B-A3B",
                 layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"],
                 kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"], intermediate=0,
                 vocab=cfg["vocab_size"], dtype_bytes=2, tie_embeddings=cfg["tie_word_embeddings"], params=0,
                 source=str(CONFIG), qk_norm=True, experts=cfg["num_experts"],
                 experts_per_token=cfg["num_experts_per_tok"], moe_intermediate=cfg["moe_intermediate_size"],
                 shared_intermediate=cfg["shared_expert_intermediate_size"])


def _split(xs: np.ndarray, small: np.ndarray, large: np.ndarray, errs: np.ndarray) -> list[str]:
    def med(mask: np.ndarray) -> str:
        return f"{100 * np.median(errs[mask]):+.1f} % ({int(mask.sum())})" if mask.any() else "-"
    return [len(xs), med(np.ones_like(small)), med(small), med(large)]


def per_x_rows(tp: int, table: dict[str, dict[int, float]], ops: dict[str, Callable[[int], float]]) -> list[list]:
    rows = []
    for op, fn in ops.items():
        xs = np.array(sorted(table[op]))
        errs = np.array([fn(int(x)) / table[op][x] - 1 for x in xs])
        rows.append([tp, op, *_split(xs, xs <= SMALL, xs >= LARGE, errs)])
    return rows


def attention_rows(tp: int, model: Model, folder: Path) -> list[list]:
    gpu, eff = get_gpu("H100"), load_efficiency()
    a = read_attention(folder)
    c, n, kv = a[:, 0], a[:, 2], a[:, 2] * a[:, 3]
    rows = []
    for kind, mask, small, large in (("attention decode", (c == 0) & (n > 0), kv < SMALL_KV, kv >= LARGE_KV),
                                     ("attention prefill", (c > 0) & (n == 0), c <= SMALL, c >= LARGE)):
        pred = np.array([(prefill_attn_ns(model, r[0], r[1], gpu, eff, tp) if r[0] else 0.0)
                         + (decode_attn_ns(model, r[2], r[2] * r[3], gpu, eff, tp) if r[2] else 0.0) for r in a[mask]])
        errs = pred / (a[mask, 4] * 1e3) - 1
        rows.append([tp, kind, *_split(a[mask, 0], small[mask], large[mask], errs)])
    return rows


def mixed_summary(tp: int, model: Model, folder: Path, gpu: GPU | None = None) -> str:
    """What a prefill chunk adds to the decodes' attention: each mixed row's extra over its decode-only
    plus chunk-only rows (same shapes), against the surcharge the RTX PRO 6000 fit would charge
    (roofline.mixed_extra_ns; left out on Hopper, roofline.pads_mixed_decodes). A merged call saves a
    launch, so a count of rows at or below the sum cannot tell a small surcharge from none: the slope
    of the measured extra on the predicted surcharge, and the extra where that surcharge is large, can."""
    gpu, eff = gpu or get_gpu("H100"), load_efficiency()
    a = read_attention(folder)
    times = {tuple(r[:4]): r[4] for r in a}
    extra, fa2 = [], []
    for c, kvp, n, kvd, t in a:
        decode, chunk = times.get((0, 0, n, kvd)), times.get((c, kvp, 0, 0))
        if c and n and decode is not None and chunk is not None:
            extra.append(t - decode - chunk)
            fa2.append(mixed_extra_ns(model, n, n * kvd, gpu, eff, tp) / 1e3)
    if not extra:
        return f"tp{tp}: no mixed row with both its decode-only and chunk-only rows"
    e, f = np.array(extra), np.array(fa2)
    slope = float(np.polyfit(f, e, 1)[0]) if np.ptp(f) > 0 else float("nan")
    big = f > LARGE_EXTRA_US
    rule = "charged" if pads_mixed_decodes(gpu) else "left out"
    return (f"tp{tp}: {len(e)} mixed rows, {int((e <= 0).sum())} at or below decode-only + chunk-only; measured extra "
            f"median {np.median(e):+.1f} us; slope on the RTX-fitted surcharge {slope:+.3f} (1 if it were paid); where "
            f"that surcharge exceeds {LARGE_EXTRA_US:.0f} us ({int(big.sum())} rows, median {np.median(f[big]) if big.any() else 0:.1f} us) "
            f"the measured extra is median {np.median(e[big]) if big.any() else 0:+.1f} us; {rule} on {gpu.name} "
            "(roofline.pads_mixed_decodes)")


def moe_rows(model: Model, folder: Path) -> list[list]:
    """The MoE block at tp1 (router, grouped experts, shared expert, the fixed time), nearest uniform
    routing and with every expert read."""
    gpu, eff = get_gpu("H100"), load_efficiency()
    table = read_moe(folder)
    if table is None:
        return []
    rows = []
    for label, pick in (("MoE block, uniform routing", lambda t, pts: min(pts, key=lambda p: abs(p[0] - experts_touched(model, t)))),
                        ("MoE block, all experts", lambda t, pts: next((p for p in pts if p[0] == model.experts), None))):
        points = [(t, *p) for t, pts in sorted(table.items()) if (p := pick(t, pts))]
        xs = np.array([t for t, _, _ in points])
        errs = np.array([block_ns(model, gpu, eff, t, active=a, shared=True) / ns - 1 for t, a, ns in points])
        rows.append([1, label, *_split(xs, xs <= SMALL, xs >= LARGE, errs)])
    return rows


def tp_rows(tp: int, model: Model, folder: Path, attention_folder: Path) -> list[list]:
    """Every dense, per-sequence and attention op of one tp folder."""
    gpu, eff = get_gpu("H100"), load_efficiency()
    h, q, kv = model.hidden, model.q_dim // tp, max(1, model.kv_heads // tp) * model.head_dim
    gemms = {"qkv_proj": h * (2 * q + 2 * kv), "o_proj": q * h}  # the gated q doubles q's rows
    ops: dict[str, Callable[[int], float]] = {op: (lambda t, p=p: gemm_ns(p, t, 2, gpu, eff)) for op, p in gemms.items()}
    ops |= {op: (lambda t, op=op: small_op_ns(model, op, t, gpu, eff, tp))
            for op in ("layernorm", "rotary_emb", "qk_norm", "embedding")}
    per_seq = {"lm_head": lambda s: lm_head_ns(model, s, gpu, eff, tp), "sampler": lambda s: sampler_ns(model, s, gpu, eff)}
    return (per_x_rows(tp, _by_op(read_per_x(folder / "dense.csv", "tokens")), ops)
            + per_x_rows(tp, _by_op(read_per_x(folder / "per_sequence.csv", "sequences")), per_seq)
            + attention_rows(tp, model, attention_folder))


def main(root: Path) -> int:
    profile, config = root / PROFILE, root / CONFIG
    for need in (profile / "tp1", profile / "tp8" / "attention.csv", config):
        if not need.exists():
            print(f"h100_kernel_check: error: {need} not found (extract LLMServingSim as the docstring says)",
                  file=sys.stderr)
            return 2
    try:
        try:
            cfg = json.loads(config.read_text())
        except ValueError as exc:
            raise UserError(f"{config}: not JSON ({exc})") from None
        model = full_attention_model(cfg)
        with tempfile.TemporaryDirectory() as tmp:  # read_attention reads <folder>/tp1/: a view of tp8/ as that
            view = Path(tmp)
            (view / "tp1").mkdir()
            (view / "tp1" / "attention.csv").symlink_to((profile / "tp8" / "attention.csv").resolve())
            rows = tp_rows(1, model, profile / "tp1", profile) + tp_rows(8, model, profile / "tp8", view)
            mixed = [mixed_summary(1, model, profile), mixed_summary(8, model, view)]
        rows += moe_rows(model, profile)
    except KeyError as exc:
        print(f"h100_kernel_check: error: missing {exc} in {config} or the profile's tables", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError, UserError) as exc:  # JSONDecodeError is a ValueError
        print(f"h100_kernel_check: error: {exc}", file=sys.stderr)
        return 2
    print(tabulate(rows, headers=["tp", "op", "rows", "median signed (rows)", f"small (<= {SMALL})",
                                  f"large (>= {LARGE})"], tablefmt="github"))
    print("\nMixed chunk + decode attention rows (a prefill chunk beside the decodes):")
    print("\n".join(f"- {line}" for line in mixed))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python benchmarks/h100_kernel_check.py LSS_H100", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
