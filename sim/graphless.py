"""The CPU floor under a vLLM step that launches its kernels without a CUDA graph.

vLLM V1 replays CUDA graphs by default (cudagraph_mode FULL_AND_PIECEWISE). Under FULL_DECODE_ONLY
(what a compilation without splitting ops, e.g. with the allreduce+RMSNorm fusion pass, leaves) a step
with a prefill chunk has no graph: the CPU launches every layer's kernels from Python, and where that
takes longer than the GPU's work the step lasts as long as the launches (step = max(GPU time,
layers x GRAPHLESS_LAYER_NS), sim/stepcost.py `graphless_step_ns`). Decode-only steps keep their graph.

GRAPHLESS_LAYER_NS is the median over the published eager-or-compiled-without-graphs decode runs in
PUBLISHED, where the step is CPU-bound (2.9-3.5x its graph-replayed TPOT): TPOT / layers. They are
one MoE model at TP4 in two runs on two hosts (4x RTX 4090D, 4x L20), other hosts than any validated
here: the floor transfers as a per-layer CPU time, untested across CPUs, layer types and TP degrees.
Not modelled: NONE (every step without a graph, decode steps included), refused by validate; steps
above max_cudagraph_capture_size, which run without a graph in every mode, are priced as
graph-replayed (a sensitivity run giving them this floor on the H100 serving runs moved the held-out
medians both ways: docs/measurements.md, session 27); and vLLM's own downgrade of FULL (or
FULL_AND_PIECEWISE without splitting ops) to FULL_DECODE_ONLY where the attention backend cannot
graph mixed batches: a run records the mode it resolved, which decides.
"""

from __future__ import annotations

import statistics

# (source, model, layers, mode without graphs, its TPOT ms, graph-replayed TPOT ms)
PUBLISHED = (
    ("vllm-project/vllm#45709 (zhenwei-intel, 2026-06-15; 4x RTX 4090D, in 3500 / out 1500, concurrency 8)",
     "Qwen3-30B-A3B", 48, "eager", 33.92, 10.03),
    ("vllm-project/vllm#45709 (same run)", "Qwen3-30B-A3B", 48, "compiled, no graphs", 35.20, 10.03),
    ("vllm-project/vllm#45709 (Taimys, 2026-08-28; 4x L20, vLLM 0.28.1rc1, in 3500 / out 1500, concurrency 8)",
     "Qwen3-30B-A3B", 48, "compiled, cudagraph_mode NONE", 34.4, 11.8),
)
GRAPHLESS_LAYER_NS = int(round(statistics.median(tpot * 1e6 / layers for _, _, layers, _, tpot, _ in PUBLISHED), -3))


def graphless_step_ns(mode: str, layers: int) -> int:
    """The floor under a step with a prefill chunk in `mode` (0: such steps replay a graph)."""
    return layers * GRAPHLESS_LAYER_NS if mode == "full_decode_only" else 0
