"""How a model is served: fp8 or 4-bit weights and an fp8 KV cache, as first principles times them.

Weight formats (`Model.weight_format`), each storing every linear layer's weights (attention and MLP
projections, experts) and leaving the embedding, lm_head, MoE router and norms in 16 bits, as
vLLM's methods do:
- "fp8" (`--quantization fp8`, an FP8 checkpoint such as "...-Instruct-FP8", which
  catalog.get_model reads as the base model with fp8 weights): one byte a weight; on GPUs with FP8
  tensor cores (Ada, Hopper, Blackwell, CDNA3, CDNA4: compute_speedup) the GEMMs run W8A8 at twice the
  16-bit peak, elsewhere (Ampere, CDNA2) as weight-only FP8 (Marlin) at the 16-bit peak.
- "int4" (W4A16: AWQ, GPTQ 4-bit, compressed-tensors w4a16; vLLM runs them with its Marlin or
  Machete kernels): half a byte a weight plus one 16-bit scale per group of 128 (zero points of
  asymmetric checkpoints, 0.8 % more, are left out); the GEMMs dequantise to 16 bits in registers,
  so they compute at the 16-bit peak on every GPU.
- "nvfp4" (NVIDIA's FP4 checkpoints, "...-FP4"/"...-NVFP4", vLLM's modelopt_fp4): half a byte a
  weight plus one fp8 scale per block of 16; on GPUs with FP4 tensor cores (Blackwell, sm_1xx)
  W4A4 at four times the 16-bit peak (the HGX B200 datasheet: FP4 144 PFLOPS against
  BF16 36 per 8 GPUs, both with sparsity; sm_120 is given the same generation's ratio), elsewhere
  weight-only (vLLM's FP4 Marlin kernel) at the 16-bit peak. A W4A4 GEMM streams its weights at
  roofline's fp4_gemm_bw of the bandwidth (an MoE's experts at fp4_grouped_bw) and computes at its fp4_gemm_flops
  of the FP4 peak and pays fp4_gemm_ns and fp4_gemm_ps_per_k per element of its K (not an MoE's experts), fitted on
  published times of FlashInfer's CUTLASS FP4 GEMM, the kernel vLLM runs on sm_100 (reports/validation/w4-kernels).
Weight-only 4-bit GEMMs on Hopper (int4; NVFP4 there: runs_w4a16_hopper) stream their weights at roofline's
w4a16_hopper_bw of the bandwidth (not gemm_bw) and a dense one pays w4a16_hopper_ns, both fitted on published
kernel times of vLLM's Marlin kernel on H200 (the same report): Marlin, built for Ampere, runs its bytes' time on
an A10 and about half the bandwidth on Hopper. vLLM runs Machete there for GPTQ and compressed-tensors int4
checkpoints (and AWQ from 0.19), which no published number times at few tokens; its author expects Marlin to be
faster up to 32-64 tokens, so at few tokens those are likely priced too fast. Both shares are of the datasheet
bandwidth (measured on HBM GPUs: hbm_bw_scale, the transfer rule for GDDR-fitted efficiencies, does not apply).
`--kv-cache-dtype fp8` stores K and V in one byte (twice the tokens in the same memory, half the
bytes decode attention reads); attention still computes in 16 bits. These are datasheet ratios,
with the same kernel efficiencies as 16-bit except the kernel-fitted W4A4 terms and Hopper's W4A16 ones
(roofline's fp4_* and w4a16_hopper_* priors). The one fp8
serving measurement here is four vLLM 0.15.1 runs of Llama-4-Scout FP8-dynamic (an MoE, TP2 on
H100; docs/engines.md): E2E 6-32 % too fast, as the 16-bit MoE runs on H100 are, so the format is
not shown to be the cause. A checkpoint may leave attention in 16 bits (catalog `fp8_attention =
false`). Other formats (int8, MXFP4, bitsandbytes) are refused by name, not priced as 16-bit.
"""

from __future__ import annotations

import dataclasses
import re

from llumverify.errors import UserError
from llumverify.sim.catalog import Model
from llumverify.sim.kv_dequant import slowdown

WEIGHT_FORMATS = ("bf16", "fp8", "int4", "nvfp4")
FOUR_BIT = ("int4", "nvfp4")  # weight formats that run their own kernels (Marlin, FP4 GEMMs), not the 16-bit ones
KV_FORMATS = ("auto", "fp8", "bf16")
# GPU archs with FP8 tensor cores besides Blackwell (sm_1xx, all of which have FP8 and FP4 ones); a
# letter suffix (sm_90a, sm_100a) is the same silicon. gfx950 (CDNA4, MI350X/MI355X): vLLM's ROCm platform
# supports fp8 on gfx94x and gfx95x alike (RocmPlatform.supports_fp8)
FP8_TENSOR_ARCHS = frozenset({"sm_89", "sm_90", "gfx942", "gfx950"})
# vLLM quantization methods (engine_kwargs.quantization) that fix the weight format...
METHOD_FORMATS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "ptpc_fp8": "fp8", "awq": "int4", "awq_marlin": "int4",
                  "modelopt_fp4": "nvfp4"}
# ...and those whose format the checkpoint's name must say (run_engine.served_formats: modelopt alone is ModelOpt FP8)
NAMED_METHODS = {"compressed-tensors": ("fp8", "int4", "nvfp4"), "gptq": ("int4",), "gptq_marlin": ("int4",),
                 "modelopt": ("fp8", "nvfp4")}


def base_arch(arch: str) -> str:
    """`arch` without its letter suffix (sm_90a, sm_100a: the same silicon)."""
    return re.sub(r"(?<=\d)[a-z]$", "", arch)


TRTLLM_ARCHS = ("sm_100", "sm_103")  # vLLM's supports_trtllm_attention: the SM100 family
FA3_ARCHS = ("sm_90",)  # where vLLM's FlashAttention (3) reads an fp8 cache


def reads_fp8(arch: str) -> bool:
    """Whether vLLM has kernels that read an fp8 cache as fp8 ("auto") on an NVIDIA GPU of `arch` (sm_90a and
    sm_100a are sm_90 and sm_100): FlashAttention 3 on Hopper, FlashInfer's TRT-LLM kernels on the SM100 family;
    elsewhere its FlashAttention reads no fp8 cache and vLLM serves one with another backend (FLASHINFER, whose own
    kernels dequantise it). True where it is not decided here: an unknown arch, an AMD GPU."""
    return not arch or arch.startswith("gfx") or base_arch(arch) in FA3_ARCHS + TRTLLM_ARCHS


def _blackwell(arch: str) -> bool:
    return re.fullmatch(r"sm_1\d\d", base_arch(arch)) is not None


def compute_speedup(fmt: str, arch: str) -> float:
    """The GEMM compute peak of weights in `fmt` on a GPU of `arch`, as a multiple of its 16-bit peak."""
    if fmt == "fp8" and (base_arch(arch) in FP8_TENSOR_ARCHS or _blackwell(arch)):
        return 2.0
    if runs_w4a4(fmt, arch):
        return 4.0
    return 1.0


def runs_w4a4(fmt: str, arch: str) -> bool:
    """Whether weights in `fmt` run as W4A4 FP4 GEMMs on `arch` (Blackwell; vLLM's cutlass_fp4_supported:
    compute capability >= 10.0) and so pay roofline's fp4 terms (fp4_gemm_ns, fp4_gemm_ps_per_k, fp4_gemm_bw,
    fp4_gemm_flops)."""
    return fmt == "nvfp4" and _blackwell(arch)


def runs_w4a16_hopper(fmt: str, arch: str) -> bool:
    """Whether weights in `fmt` run as weight-only 4-bit GEMMs on Hopper (sm_90: int4, and NVFP4, which has no
    FP4 tensor cores there) and so stream at roofline's w4a16_hopper_bw and pay w4a16_hopper_ns: int4 Marlin is
    measured on H200 (the fit) and H100 (a check), FP4 Marlin is not (Ampere keeps gemm_bw, as an A10's Marlin
    times say; Blackwell is not measured)."""
    return fmt in FOUR_BIT and base_arch(arch) == "sm_90"


def with_formats(model: Model, weights: str, kv: str, attention: str = "auto") -> Model:
    """`model` (a catalog Model) served with `weights` ("bf16"/"" = its checkpoint's format, or one
    of WEIGHT_FORMATS) and a `kv` cache format ("auto" = the checkpoint's, "fp8" or "bf16"), read by
    `attention`'s kernels (sim/kv_dequant.py BACKENDS). A format the checkpoint's name already
    carries wins over the 16-bit default, and must agree with another."""
    weights = weights or "bf16"
    if weights not in WEIGHT_FORMATS:
        raise UserError(f"weight format {weights!r} is not modelled (known: {', '.join(WEIGHT_FORMATS)})")
    if kv not in KV_FORMATS:
        raise UserError(f"KV cache dtype {kv!r} is not modelled (known: {', '.join(KV_FORMATS)})")
    stored = model.weight_format
    if "bf16" not in (weights, stored) and weights != stored:
        raise UserError(f"{model.name} is an {stored} checkpoint; it cannot be served as {weights}")
    fmt_w = stored if weights == "bf16" else weights
    fmt_kv = model.kv_format if kv == "auto" else kv
    return dataclasses.replace(model, weight_format=fmt_w, kv_format=fmt_kv,
                               attention_slowdown=slowdown(attention, fmt_kv))


def describe(model: Model) -> str:
    """" (fp8 weights, fp8 KV cache; ...)" or "" for a 16-bit model: what a step cost's source adds."""
    parts = [f"{fmt} {what}" for what, fmt in (("weights", model.weight_format), ("KV cache", model.kv_format))
             if fmt != "bf16"]
    if model.attention_slowdown != 1:
        parts.append(f"attention's KV reads and pair compute at {model.attention_slowdown:.3f}x their 16-bit-cache time, "
                     "FlashInfer's FA2 kernels dequantising: sim/kv_dequant.py")
    return f" ({', '.join(parts)}; datasheet ratios: sim/quantization.py)" if parts else ""
