"""Attention over an fp8 KV cache by kernels that dequantise it: FlashInfer's FA2-template kernels.

An fp8 KV cache halves the bytes attention reads, and first principles price those bytes at the
16-bit kernels' KV efficiency (sim/roofline.py kv_bw, attn_ctx_bw). That holds for kernels that read
fp8 natively (FlashAttention 3 with fp8 queries, FlashInfer's TRT-LLM kernels on Blackwell). FlashInfer's
own "fa2" kernels (its paged prefill, and the tensor-core decode wrapper vLLM always uses, which runs
that prefill kernel) take 16-bit queries and convert each fp8 K and V tile to 16 bits for the same
16-bit MMAs: in the published timings in PUBLISHED they run 1.2-1.3x slower than on a 16-bit cache of
the same tokens, not twice as fast. vLLM runs them on an fp8 cache with its FLASHINFER backend where it
does not use the TRT-LLM kernels (attention_config.use_trtllm_attention false, or, up to vLLM 0.15, a GPU
outside the B200 family; vLLM 0.15's flashinfer.py then also keeps the queries in 16 bits).

DEQUANT_RATIO, the median fp8 / 16-bit time over PUBLISHED's decode rows, is Model.attention_slowdown
where HardwareConfig.attention_backend is "flashinfer-fa2" and the cache is fp8: attention's KV reads
(decode, a prefill chunk's context, a mixed step's padded decode rows) are priced as a 16-bit cache's
times it, and the query-key pair compute (q·k and p·v) of a prefill chunk and of those padded rows times
it too (the prefill row: 1.29 on a compute-bound 8k x 8k prefill); its per-launch and per-sequence terms
are not scaled, so a whole decode kernel comes to less (1.18x at 128 x 1,024 tokens on B200 at TP1, 1.06x
at TP8). "auto" prices the cache's own bytes. NVIDIA GPUs only.

Bounds of the evidence: two decode rows on one GPU (H20, Hopper) and one prefill row (RTX PRO 6000),
none on B200, where the ratio is taken as a property of the kernel template. All predate FlashInfer
v0.6.13 (June 2026), whose PR #3485 stages each dequantised tile once in shared memory: its own
prefill rows (TFLOPS only) put head_dim 128 on RTX PRO 6000 at a median 1.25x before and 1.07x
after; the decode wrapper runs the same kernel, unmeasured. A server on FlashInfer >= 0.6.13 is
priced too slow by this.
"""

from __future__ import annotations

import statistics

from llumverify.errors import UserError

BACKENDS = ("auto", "flashinfer-fa2")  # HardwareConfig.attention_backend's choices

# (source, GPU, phase, batch, query tokens each, KV tokens each, query heads, KV heads, head dim, page size,
#  16-bit-cache ms, fp8-cache ms); queries in bf16 throughout
PUBLISHED = (
    ("flashinfer-ai/flashinfer#1753 (2025-09-22; BatchDecodeWithPagedKVCacheWrapper, use_tensor_cores=True; CUDA "
     "events over 10 calls after 5 warm-ups; the issue's further rows were not readable, its text: 12-35 % slower)",
     "H20", "decode", 128, 1, 1024, 128, 16, 128, 128, 0.339, 0.437),
    ("flashinfer-ai/flashinfer#1753 (same run)", "H20", "decode", 128, 1, 2048, 128, 16, 128, 128, 0.633, 0.760),
    ("flashinfer-ai/flashinfer#3484 (2026-06-01; fa2 BatchPrefillWithPagedKVCacheWrapper, non-causal; "
     "flashinfer_benchmark.py median, CUDA events; fixed by PR #3485 in v0.6.13)",
     "RTX PRO 6000", "prefill", 1, 8192, 8192, 16, 2, 128, 16, 1.714, 2.212),
)
DEQUANT_RATIO = statistics.median(fp8 / bf16 for _, _, phase, *_, bf16, fp8 in PUBLISHED if phase == "decode")


def slowdown(backend: str, kv_format: str) -> float:
    """Model.attention_slowdown of a `kv_format` cache under `backend`'s kernels (1: they read its own bytes)."""
    if backend not in BACKENDS:
        raise UserError(f"attention backend {backend!r} is not modelled (known: {', '.join(BACKENDS)})")
    return DEQUANT_RATIO if backend == "flashinfer-fa2" and kv_format == "fp8" else 1.0
