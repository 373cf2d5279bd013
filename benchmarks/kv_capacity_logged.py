"""The KV capacity llumverify derives (sim/roofline.py kv_capacity_blocks) against the capacity vLLM logged.

    python benchmarks/kv_capacity_logged.py [--out DIR]

Where a run records no KV cache size, `validate` and `simulate --gpu/--model` derive one: memory x
gpu_memory_utilization - weights/tp - a 1.3 GiB reserve, the reserve set on two published capacities (vLLM 0.19 on an
RTX 4090, vLLM 0.2 on an A10). The rows below never entered that constant: vLLM 0.19.0 server logs on H100-80GB
(llm-d-incubation/llm-d-planner at d3121e05, accuracy/results/v0.19.0/logs/, Apache-2.0; numbers cited, nothing
copied), one row per model the catalog holds, TP and KV format (the fp8-KV logs share the 16-bit ones' memory
profile), tensor parallel only (pipeline-parallel
logs left out: not modelled), gpu_memory_utilization 0.95, vLLM's H100 defaults (8,192 batched tokens). Each log
prints its KV cache size in tokens ("GPU KV cache size: N tokens") and, at DEBUG level, what it kept outside the KV
cache: the weights, the activation peak of its profiling pass and the non-torch memory (NCCL and custom all-reduce
buffers among it), out of the 79.19 GiB the CUDA runtime reports (the catalog's H100: 79.65 GiB, what nvidia-smi
reports). Prints the derived against the logged tokens (signed error: derived / logged - 1) and both non-KV sums;
--out writes table.md there. Beside it, published_profiles.csv keeps every published memory profile collected in
session 39 (110 configurations: vLLM 0.2 to 0.20, several GPUs, each row's source and caveats; numbers only, not
read by this script), for fitting the reserve's terms on some rows and checking them on the others.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.files.paths import writable_dir, write_atomic
from llumverify.settings.config import HardwareConfig
from llumverify.sim.catalog import get_gpu
from llumverify.sim.engine_profile import served_model
from llumverify.sim.roofline import DEFAULT_ACTIVATION_RESERVE_BYTES, kv_capacity_blocks

SOURCE = "llm-d-incubation/llm-d-planner@d3121e059da88662db39a926a3ead964be97359b:accuracy/results/v0.19.0/logs/"
GIB = 2**30
UTIL = 0.95
BLOCK = 16
CUDA_TOTAL_GIB = 79.19  # every log's "total_gpu_memory" / requested 75.23 GiB at 0.95


@dataclass(frozen=True)
class Logged:
    """One log's memory profile: the catalog model, its TP and KV format, GiB kept outside the KV cache, KV tokens."""

    log: str
    model: str
    tp: int
    kv_dtype: str
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    kv_tokens: int


ROWS = (
    Logged("meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log", "Llama-3.1-8B", 1, "auto", 14.99, 1.89, 0.25, 476_016),
    Logged("meta-llama---h100-80gb--tp1pp1dp1--8192-dtbf16-kvfp8.log", "Llama-3.1-8B", 1, "fp8", 14.99, 1.89, 0.25, 952_032),
    Logged("meta-llama-llama-3-1-8b---h100-80gb--tp2pp1dp1--8192.log", "Llama-3.1-8B", 2, "auto", 7.51, 1.89, 2.07, 1_044_688),
    Logged("meta-llama-llama-3-1-8b---h100-80gb--tp4pp1dp1--8192.log", "Llama-3.1-8B", 4, "auto", 3.77, 1.89, 2.13, 2_209_792),
    Logged("qwen-qwen2-5-7b-instruct--h100-80gb--tp1pp1dp1--8192.log", "Qwen2.5-7B", 1, "auto", 14.25, 2.21, 0.24, 1_096_000),
    Logged("qwen-qwen2---h100-80gb--tp1pp1dp1--8192-dtbf16-kvfp8.log", "Qwen2.5-7B", 1, "fp8", 14.25, 2.21, 0.24, 2_192_000),
    Logged("qwen-qwen2-5-7b-instruct--h100-80gb--tp2pp1dp1--8192.log", "Qwen2.5-7B", 2, "auto", 7.12, 2.21, 2.06, 2_390_592),
    Logged("qwen-qwen2-5-7b-instruct--h100-80gb--tp4pp1dp1--8192.log", "Qwen2.5-7B", 4, "auto", 3.55, 2.21, 2.13, 5_043_280),
    Logged("qwen-qwen3-8b--h100-80gb--tp1pp1dp1--8192.log", "Qwen3-8B", 1, "auto", 15.27, 2.21, 0.25, 418_688),
    Logged("qwen-qwen2-5-72b-instruc--h100-80gb--tp2pp1dp1--8192.log", "Qwen2-72B", 2, "auto", 67.80, 2.29, 2.09, 19_920),
    Logged("qwen-qwen3-30b-a3b--h100-80gb--tp1pp1dp1--8192.log", "Qwen3-30B-A3B", 1, "auto", 56.88, 2.68, 0.27, 168_288),
    Logged("mistralai-mixtral-8x7b-i--h100-80gb--tp2pp1dp1--8192.log", "Mixtral-8x7B", 2, "auto", 43.51, 1.21, 2.07, 465_936),
    Logged("meta-llama-llama-4-scout--h100-80gb--tp4pp1dp1--8192.log", "Llama-4-Scout", 4, "auto", 53.12, 3.19, 2.17,
           365_968),
)


def compare(row: Logged) -> dict[str, object]:
    """The derived capacity (tokens per GPU group, as vLLM logs it) against the logged one, and the two non-KV sums."""
    hw = HardwareConfig(gpu="H100", model=row.model, tp=row.tp, kv_cache_dtype=row.kv_dtype)
    model, gpu = served_model(row.model, hw), get_gpu("H100")
    derived = kv_capacity_blocks(model, gpu, tp=row.tp, gpu_memory_utilization=UTIL, block_size=BLOCK) * BLOCK
    # vLLM logs blocks x block size, the blocks of one GPU (each holds its share of the KV heads), as derived here
    ours_weights = model.weight_bytes_per_gpu(row.tp) / GIB
    return {"model": row.model, "tp": row.tp, "kv": row.kv_dtype,
            "logged tokens": row.kv_tokens, "derived tokens": derived,
            "signed error": f"{100 * (derived / row.kv_tokens - 1):+.1f} %",
            "free left after weights, logged GiB": round(UTIL * CUDA_TOTAL_GIB - row.weights_gib, 2),
            "non-KV logged: weights + activation + non-torch GiB":
                f"{row.weights_gib:.2f} + {row.activation_gib:.2f} + {row.non_torch_gib:.2f}",
            "non-KV derived: weights + reserve GiB (+ memory gap)":
                f"{ours_weights:.2f} + {DEFAULT_ACTIVATION_RESERVE_BYTES / GIB:.2f} "
                f"(+ {UTIL * (gpu.usable_memory_bytes / GIB - CUDA_TOTAL_GIB):.2f})",
            "log": row.log}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write table.md there")
    args = parser.parse_args(argv)
    try:
        if args.out is not None:
            writable_dir(args.out, "--out")
        rows = [compare(r) for r in ROWS]
    except UserError as e:
        print(f"kv_capacity_logged: error: {e}", file=sys.stderr)
        return 2
    table = tabulate(rows, headers="keys", tablefmt="github")
    text = (f"# Derived KV capacity against vLLM 0.19.0's logged capacity (H100-80GB)\n\n{__doc__.split(chr(10), 3)[3]}\n"
            f"Regenerate: `python benchmarks/kv_capacity_logged.py --out reports/validation/kv-capacity`. Source: "
            f"`{SOURCE}` + each row's log.\n\n{table}\n")
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "table.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
