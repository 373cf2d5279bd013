"""First principles against Vidur's measured H100/A100 GEMM kernels (issue #28 cross-check).

    python benchmarks/vidur_check.py VIDUR_CHECKOUT [--flops-scale S] [--lss LSS_DIR]
        # VIDUR_CHECKOUT: a clone of microsoft/vidur (MIT), e.g. the `fetch` tool's
        # /work/.mirror/microsoft+vidur/repo; S: also price each GPU's generation at compute scale S
        # (0.81: what argonne's 2024 Hopper prefills would fit, llumverify/validation/prefill.py);
        # LSS_DIR: casys-kaist/LLMServingSim's profiler/perf layer profiles (MIT), for part 2's fit
        # on GPUs without ECC (RTX 4090, RTX PRO 6000)

1. Llama-2-7B's four GEMMs at TP1 (data/profiling/compute/<gpu>/meta-llama/Llama-2-7b-hf/mlp.csv,
   the medians of attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj) against
   roofline.gemm_ns, at the shipped flops_scale and, with --flops-scale, at S.
2. Small GEMMs: every model and TP degree Vidur profiled on each GPU, the four GEMMs at 1-16 tokens
   (weight reads), fitted as a fixed time per kernel plus the weight bytes at a share of the
   datasheet bandwidth (relative least squares), beside roofline.gemm_ns's signed error at one
   token per TP degree. With --lss, the same fit on LLMServingSim's layer profiles (the four GEMMs at
   1-16 tokens): GDDR GPUs without ECC, beside Vidur's A40, whose GDDR6 carries inline ECC
   (Efficiency.inline_ecc_kernels).
3. Whole layers: every op Vidur profiled in a decoder layer but attention (its attention tables are
   not in the public snapshot), summed at 8 tokens per TP degree, against roofline.layer_dense_ns.
Vidur's NCCL all-reduce timings are read and fitted by benchmarks/nccl_fit.py (the NVLink terms).
Reads the files with `git show HEAD:...` when the checkout has no work tree. Not a test: a second.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np

from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.profile import nnls
from llumverify.sim.roofline import gemm_ns, gemm_params, layer_dense_ns, load_efficiency
from llumverify.validation.prefill import with_scale

OPS = {"attn_pre_proj": "qkv_proj", "attn_post_proj": "o_proj", "mlp_up_proj": "gate_up_proj",
       "mlp_down_proj": "down_proj"}
GPUS = {"h100": "H100", "a100": "A100-80GB"}
SMALL_GPUS = {"h100": "H100", "a100": "A100-80GB", "a40": "A40"}
MODELS = {"meta-llama/Llama-2-7b-hf": "Llama-2-7B", "meta-llama/Meta-Llama-3-8B": "Llama-3-8B",
          "codellama/CodeLlama-34b-Instruct-hf": "CodeLlama-34B", "meta-llama/Llama-2-70b-hf": "Llama-2-70B",
          "meta-llama/Meta-Llama-3-70B": "Llama-3-70B"}


def _rows(repo: Path, rel: str) -> list[dict[str, str]]:
    path = repo / rel
    text = path.read_text() if path.is_file() else subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{rel}"], check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def main(repo: Path, scale: float | None) -> None:
    model = get_model("Llama-2-7B")
    shipped = load_efficiency()
    for key, name in GPUS.items():
        gpu = get_gpu(name)
        rows = [r for r in _rows(repo, f"data/profiling/compute/{key}/meta-llama/Llama-2-7b-hf/mlp.csv")
                if r["num_tensor_parallel_workers"] == "1" and int(r["num_tokens"]) in (1, 256, 1024, 2048, 4096)]
        runs = [("shipped", shipped)] + ([(f"{gpu.arch} at {scale}", with_scale(shipped, gpu.arch, scale))]
                                          if scale is not None else [])
        for label, eff in runs:
            cells = []
            for r in sorted(rows, key=lambda r: int(r["num_tokens"])):
                t = int(r["num_tokens"])
                real = sum(float(r[f"time_stats.{op}.median"]) for op in OPS) * 1e6
                sim = sum(gemm_ns(gemm_params(model)[op], t, model.dtype_bytes, gpu, eff) for op in OPS.values())
                cells.append(f"T{t} {sim / real - 1:+.0%}")
            print(f"{name} GEMMs, {label}: {', '.join(cells)}")


def small_gemms(repo: Path) -> None:
    """Part 2: fixed time + bytes / (share x datasheet bandwidth) on the decode rows of every model."""
    eff = load_efficiency()
    for key, name in SMALL_GPUS.items():
        gpu, bytes_ns, real, by_tp = get_gpu(name), [], [], {}
        for hf, catalog in MODELS.items():
            try:
                rows = _rows(repo, f"data/profiling/compute/{key}/{hf}/mlp.csv")
            except subprocess.CalledProcessError:
                continue  # not profiled on this GPU
            model = get_model(catalog)
            for r in rows:
                t, tp = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
                if t > 16:
                    continue
                gp = gemm_params(model, tp)
                for op, ours in OPS.items():
                    bytes_ns.append(gp[ours] * model.dtype_bytes / gpu.mem_bw * 1e9)
                    real.append(float(r[f"time_stats.{op}.median"]) * 1e6)
                    if t == 1:
                        by_tp.setdefault(tp, []).append(gemm_ns(gp[ours], 1, model.dtype_bytes, gpu, eff) / real[-1] - 1)
        errs = ", ".join(f"TP{tp} {np.median(e):+.0%}" for tp, e in sorted(by_tp.items()))
        print(f"{_fit_line(name, gpu.mem_bw, bytes_ns, real)}; gemm_ns at 1 token, median signed: {errs}")


def _fit_line(name: str, mem_bw: float, bytes_ns: list[float], real: list[float]) -> str:
    """Fixed time + bytes at a share of the datasheet bandwidth, fitted by relative least squares."""
    x, y = np.array(bytes_ns), np.array(real)
    fixed, inv_share = nnls(np.column_stack([np.ones_like(x), x]) / y[:, None], np.ones_like(y))
    return (f"{name} small GEMMs ({len(y)} kernels): {fixed / 1e3:.1f} us + bytes at {1 / inv_share:.3f} of "
            f"{mem_bw / 1e12:.2f} TB/s")


def lss_small_gemms(lss: Path) -> None:
    """Part 2 on LLMServingSim's layer profiles (profiler/perf/<GPU>/<org>/<model>/bf16/tp<N>/dense.csv)."""
    for path in sorted(lss.glob("profiler/perf/*/*/*/bf16/tp*/dense.csv")):
        gpu_dir, model_dir, tp_dir = path.parts[-6], path.parts[-4], path.parts[-2]
        gpu, model, tp = get_gpu(gpu_dir), get_model(model_dir), int(tp_dir[2:])
        if model.experts:
            continue  # expert GEMMs are priced per layer (moe_layer_ns), not here
        gp, bytes_ns, real = gemm_params(model, tp), [], []
        for r in csv.DictReader(path.open()):
            if r["layer"] in gp and int(r["tokens"]) <= 16:
                bytes_ns.append(gp[r["layer"]] * model.dtype_bytes / gpu.mem_bw * 1e9)
                real.append(float(r["time_us"]) * 1e3)
        ecc = "inline ECC" if gpu.inline_ecc else "no inline ECC"
        print(f"{_fit_line(f'{gpu.name} ({ecc}) {model.name} TP{tp}', gpu.mem_bw, bytes_ns, real)}")


LAYER_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")


def layer_sums(repo: Path, tokens: int = 8) -> None:
    """Part 3: a decoder layer's ops but attention, Vidur's medians summed, over roofline.layer_dense_ns."""
    eff = load_efficiency()
    for key, name in GPUS.items():
        gpu = get_gpu(name)
        for hf, catalog in MODELS.items():
            try:
                rows = _rows(repo, f"data/profiling/compute/{key}/{hf}/mlp.csv")
            except subprocess.CalledProcessError:
                continue
            model, cells = get_model(catalog), []
            for tp in (1, 2, 4, 8):
                row = next((r for r in rows if int(r["num_tokens"]) == tokens
                            and int(r["num_tensor_parallel_workers"]) == tp), None)
                if row is not None:
                    real = sum(float(row[f"time_stats.{op}.median"]) for op in LAYER_OPS) * 1e6
                    cells.append(f"TP{tp} {layer_dense_ns(model, tokens, gpu, eff, tp) / real:.2f}")
            print(f"{name} {catalog} layer at {tokens} tokens, ours / Vidur: {', '.join(cells)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="First principles against Vidur's measured GEMM kernels.")
    ap.add_argument("repo", type=Path, help="a microsoft/vidur checkout (a folder)")
    ap.add_argument("--flops-scale", type=float, help="also price each GPU's generation at this compute scale")
    ap.add_argument("--lss", type=Path, help="a casys-kaist/LLMServingSim checkout: fit its layer profiles' GEMMs too")
    args = ap.parse_args()
    for folder in (args.repo, args.lss):
        if folder is not None and not folder.is_dir():
            sys.exit(f"vidur_check: {folder}: not a folder")
    if args.flops_scale is not None and not 0 < args.flops_scale <= 2:
        sys.exit(f"vidur_check: --flops-scale must be in (0, 2], got {args.flops_scale}")
    main(args.repo, args.flops_scale)
    small_gemms(args.repo)
    if args.lss is not None:
        lss_small_gemms(args.lss)
    layer_sums(args.repo)
