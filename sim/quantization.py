"""How a model is served: fp8 weights and an fp8 KV cache, as first principles times them.

vLLM's fp8 methods (`--quantization fp8`, or an FP8 checkpoint such as "...-Instruct-FP8",
which catalog.get_model reads as the base model with fp8 weights)
store every linear layer's weights in one byte and leave the embedding, lm_head, MoE router and
norms in 16 bits; on GPUs with FP8 tensor cores (FP8_TENSOR_ARCHS: Ada, Hopper, Blackwell, CDNA3)
the GEMMs run W8A8 at twice the 16-bit peak, elsewhere (Ampere, CDNA2) as weight-only FP8 (Marlin)
at the 16-bit peak: half the weight bytes, the same compute. `--kv-cache-dtype fp8` stores K and V
in one byte (twice the tokens in the same memory, half the bytes decode attention reads);
attention still computes in 16 bits. These are the datasheet ratios, with the same kernel
efficiencies as 16-bit, which the step cost's source line says. The one fp8 measurement here is four
vLLM 0.15.1 serving runs of Llama-4-Scout FP8-dynamic (an MoE, TP2 on H100; docs/engines.md): E2E
6-32 % too fast, as the 16-bit MoE runs on H100 are, so the format is not shown to be the cause.
A checkpoint may leave attention in 16 bits (catalog `fp8_attention = false`). 4-bit weight
formats (AWQ, GPTQ, W4A16) are not modelled.
"""

from __future__ import annotations

import dataclasses

from llumverify.errors import UserError
from llumverify.sim.catalog import Model

WEIGHT_FORMATS = ("bf16", "fp8")
KV_FORMATS = ("auto", "fp8")
FP8_TENSOR_ARCHS = frozenset({"sm_89", "sm_90", "sm_100", "sm_120", "gfx942"})
# vLLM quantization method names (engine_kwargs.quantization) that mean fp8 weights.
FP8_METHODS = frozenset({"fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt"})


def with_formats(model: Model, weights: str, kv: str) -> Model:
    """`model` (a catalog Model) served with `weights` ("bf16"/"" = its checkpoint's 16 bits, or
    "fp8") and a `kv` cache format ("auto" = the model's dtype, or "fp8")."""
    weights = weights or "bf16"
    if weights not in WEIGHT_FORMATS:
        raise UserError(f"weight format {weights!r} is not modelled (known: {', '.join(WEIGHT_FORMATS)})")
    if kv not in KV_FORMATS:
        raise UserError(f"KV cache dtype {kv!r} is not modelled (known: {', '.join(KV_FORMATS)})")
    fmt_w = "fp8" if "fp8" in (weights, model.weight_format) else "bf16"
    fmt_kv = "fp8" if "fp8" in (kv, model.kv_format) else "bf16"
    return dataclasses.replace(model, weight_format=fmt_w, kv_format=fmt_kv)


def describe(model: Model) -> str:
    """" (fp8 weights, fp8 KV cache; ...)" or "" for a 16-bit model: what a step cost's source adds."""
    parts = [f"fp8 {what}" for what, fmt in (("weights", model.weight_format), ("KV cache", model.kv_format))
             if fmt == "fp8"]
    return f" ({', '.join(parts)}; datasheet ratios: sim/quantization.py)" if parts else ""
