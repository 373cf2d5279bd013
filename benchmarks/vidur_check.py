"""First principles against Vidur's measured H100/A100 kernels and all-reduces (issue #28 cross-check).

    python benchmarks/vidur_check.py VIDUR_CHECKOUT   # a clone of microsoft/vidur (MIT), e.g. the
                                                      # `fetch` tool's /work/.mirror/microsoft+vidur/repo

1. Llama-2-7B's four GEMMs at TP1 (data/profiling/compute/<gpu>/meta-llama/Llama-2-7b-hf/mlp.csv,
   the medians of attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj) against
   roofline.gemm_ns, at the shipped flops_scale and at scale 1.
2. NCCL all-reduce within one node (data/profiling/network/<gpu>_dgx/all_reduce.csv, rank 0, `size` read as
   fp16 elements) against collectives.allreduce_ns over the GPU's catalog interconnect: median signed
   error per TP degree over every size.
Reads the files with `git show HEAD:...` when the checkout has no work tree. Not a test: a second.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import subprocess
import sys
from pathlib import Path

import numpy as np

from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.collectives import allreduce_ns
from llumverify.sim.roofline import gemm_ns, gemm_params, load_efficiency

OPS = {"attn_pre_proj": "qkv_proj", "attn_post_proj": "o_proj", "mlp_up_proj": "gate_up_proj",
       "mlp_down_proj": "down_proj"}
GPUS = {"h100": "H100", "a100": "A100-80GB"}


def _rows(repo: Path, rel: str) -> list[dict[str, str]]:
    path = repo / rel
    text = path.read_text() if path.is_file() else subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{rel}"], check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def main(repo: Path) -> None:
    model = get_model("Llama-2-7B")
    shipped = load_efficiency()
    for key, name in GPUS.items():
        gpu = get_gpu(name)
        rows = [r for r in _rows(repo, f"data/profiling/compute/{key}/meta-llama/Llama-2-7b-hf/mlp.csv")
                if r["num_tensor_parallel_workers"] == "1" and int(r["num_tokens"]) in (1, 256, 1024, 2048, 4096)]
        for label, eff in (("shipped", shipped), ("scale 1", dataclasses.replace(shipped, flops_scale=()))):
            cells = []
            for r in sorted(rows, key=lambda r: int(r["num_tokens"])):
                t = int(r["num_tokens"])
                real = sum(float(r[f"time_stats.{op}.median"]) for op in OPS) * 1e6
                sim = sum(gemm_ns(gemm_params(model)[op], t, model.dtype_bytes, gpu, eff) for op in OPS.values())
                cells.append(f"T{t} {sim / real - 1:+.0%}")
            print(f"{name} GEMMs, {label}: {', '.join(cells)}")
        rows = [r for r in _rows(repo, f"data/profiling/network/{key}_dgx/all_reduce.csv")
                if r["rank"] == "0" and int(r["devices_per_node"]) >= int(r["num_workers"])]  # one node: NVLink
        for n in sorted({int(r["num_workers"]) for r in rows}):
            errs = [allreduce_ns(int(r["size"]) * 2, n, gpu.link) / (float(r["time_stats.all_reduce.median"]) * 1e6) - 1
                    for r in rows if int(r["num_workers"]) == n]
            print(f"{name} all-reduce over {gpu.interconnect}, TP {n}: median signed error "
                  f"{np.median(errs):+.0%} over {len(errs)} sizes")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python benchmarks/vidur_check.py VIDUR_CHECKOUT (a folder)")
    main(Path(sys.argv[1]))
