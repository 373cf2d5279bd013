"""A first-principles StepCost: datasheet peaks (sim/catalog) × efficiencies fitted once on kernels.

Every op is timed from the bytes it moves and the FLOPs it does on one GPU of a tp-way group
(BW, FLOPS: the GPU's datasheet peaks; eff.*: sim/efficiency.toml):

- a GEMM with P weights over T tokens: memory time m = P·dtype/(BW·gemm_bw), compute time
  c = 2·P·T/(FLOPS·gemm_flops), joined as the p-norm (m^p + c^p)^(1/p) with p = gemm_p: the
  roofline's max, rounded at the knee where measured GEMMs are slower than either bound;
- a small op (RMSNorm, rotary, SiLU·mul, embedding): small_op_ns + T·bytes/(BW·elementwise_bw);
- prefill attention of a chunk of c tokens over ctx cached ones: attn_chunk_ns + c·(q, o, k, v
  bytes)/(BW·elementwise_bw) + ctx·(k, v bytes)/(BW·attn_ctx_bw)
  + pairs·4·heads·head_dim/(FLOPS·attn_flops), pairs = c·(2ctx + c + 1)/2;
- decode attention of n sequences over Σcontext KV tokens: decode_ns + n·decode_seq_ns
  + Σcontext·2·kv_heads·head_dim·dtype/(BW·kv_bw); when the step also has a prefill chunk the
  decodes go through the prefill kernel, which pads each decode's single query row to a tile:
  + n·mixed_seq_ns + Σcontext·mixed_rows·4·heads·head_dim/(FLOPS·attn_flops), except on sm_9x
  and sm_10x (pads_mixed_decodes: there vLLM runs FlashAttention 3, whose H100 profile shows none,
  and FlashInfer, which runs the decodes apart);
- lm_head: a GEMM of vocab×hidden weights over S sequences; sampler: sampler_ns
  + S·vocab·4 bytes of fp32 logits/(BW·sampler_bw);
- mixture of experts (model.experts > 0): the MLP's gate_up/down GEMMs over T tokens read the
  weights of the experts the step touches and compute T·k expert rows. Routing rule: uniform and
  independent per token (each token picks k of E experts), so the expected distinct experts of a
  step is E·(1 − (1 − k/E)^T): weight reads grow with the batch until every expert is read
  (decode steps of Mixtral (E 8, k 2) touch 2 experts at T = 1, 7.1 at T = 8, all 8 from T ≈ 32).
  Imbalance: real routers are skewed; the grouped GEMM's time follows its busiest expert, which
  this mean-load model does not see (its compute term is the mean, T·k/E rows per expert), so MoE
  prefill is a lower bound; decode, dominated by the distinct-expert weight reads, is not affected.
  The router (a hidden × E GEMM) is one more GEMM. On an NVIDIA HBM GPU each MoE layer also pays
  moe_layer_ns per step: published kernel times of vLLM's fused-MoE call (graph-replayed, so no
  launch cost) exceed the bandwidth and FLOP terms by 22-51 µs at one token on H100,
  H200 and A100 (reports/validation/moe-kernels), the chain of small dependent kernels the call
  runs; the GDDR profiles the efficiencies come from show none (benchmarks/moe_kernel_check.py); no
  AMD kernel time was found, so AMD GPUs do not pay it (untested). sim/tensor_parallel.py's scaling of
  a one-GPU profile by first principles' tp/1 ratio includes it on both sides: the fixed time does
  not shrink with TP;
- quantised weights (sim/quantization.py): fp8, int4 and NVFP4 weights read their stored bytes and
  compute at their format's peak; a W4A4 NVFP4 GEMM on Blackwell streams its weights at fp4_gemm_bw
  of the bandwidth (not gemm_bw), computes at fp4_gemm_flops of the FP4 peak (not gemm_flops) and pays
  fp4_gemm_ns, a fixed time, plus fp4_gemm_ps_per_k for each element of its reduction length K (its K
  loop), the four fitted together on published kernel times of the dense FP4 GEMM vLLM runs on sm_100
  (FlashInfer's CUTLASS kernel; reports/validation/w4-kernels); an MoE's grouped expert GEMMs stream at
  fp4_grouped_bw and pay neither fixed time; a weight-only 4-bit GEMM on Hopper (int4, NVFP4) streams its
  weights at w4a16_hopper_bw and a dense one pays w4a16_hopper_ns, fitted on published times of vLLM's
  Marlin kernel on H200 (the same report);
- tensor parallelism (tp): weights, heads (KV heads at least 1), intermediate sizes (every expert's
  too) and vocab are divided by tp, and the step's collectives come from sim/collectives.py (the
  alpha-beta model of the GPU's interconnect in sim/catalog/gpus.toml).
- data parallelism of an MoE engine (dp ranks, each an instance with its own scheduler and KV
  cache; vLLM's FusedMoE): the experts are spread over all dp x tp GPUs, whole experts per GPU with
  expert parallelism (ep), every expert sharded otherwise; each MoE layer gathers the ranks' tokens
  (vLLM's default all-to-all, allgather_reducescatter: an all-gather of hidden states and router
  logits, a reduce-scatter of the outputs) and runs its experts on all of them. vLLM pads every
  rank's step to the largest rank's token count, so a rank's step of T tokens is priced as dp·T
  tokens through the MoE layers (the other ranks assumed as busy); attention and everything else
  stay per rank. That a step lasts as long as the slowest rank's is the cluster's (sim/lockstep.py).

Transfer rule (GPUs without a profile): every fitted efficiency is reused on any GPU, scaled by its
datasheet peaks; kernel profiles exist only for GDDR parts (RTX PRO 6000, RTX 4090), so on an HBM
GPU the bandwidth efficiencies are multiplied by one more factor, hbm_bw_scale, fitted on measured
static batches of HBM GPUs (never on the GPU under test when validating: leave-one-GPU-out,
llumverify/validation/transfer_fit.py). The engine's own time is two named terms the kernels do not see:
fixed_ns per step and seq_ns per sequence and step (scheduling and output processing, sampling,
detokenisation: vLLM's CPU work, which grows with the batch); a TP group's per-step overhead (the
driver broadcasting each step's inputs to the other workers) is tp_step_ns. layer_ns is a per-step
cost per layer: a serving stack that launches each layer's kernels from the CPU (no graph replay)
pays it; the NVIDIA rows fit none (0), the 2024 ROCm vLLM rows of MI300X need it (their step time
is per-layer overhead bound: reports/validation/index.md section 4, transfer_fit.vendor_fit).
seq_gparam_ns is a cost per sequence and step per billion layer weights a token meets on one GPU
(token_gemm_params): decode GEMMs running far below the roofline, which the same MI300X rows show
(a decode step grows ~10x faster with the batch on Llama-2-70B than on Llama-3-8B); 0 elsewhere.
kv_bw_v1 is the decode-attention KV efficiency of steps of more than 512 / (query heads per GPU)
decodes, where ROCm vLLM runs paged-attention V1 instead of V2 (vLLM's `use_v1` rule; its other
condition, contexts over one 512-token partition, is not modelled); 0 (one kernel) elsewhere.

`fit_efficiency` fits the efficiencies on per-layer kernel profiles (LLMServingSim format, read
as sim/profile.py documents it) and `profile_errors` measures any profile against them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.paths import check_keys, read_toml
from llumverify.sim.catalog import GPU, Model, get_gpu, get_model
from llumverify.sim.collectives import kernel_switch_tokens, logits_gather_ns, moe_exchange_ns, step_allreduce_ns
from llumverify.sim.profile import nnls, profile_meta, read_attention, read_per_x
from llumverify.sim.quantization import FOUR_BIT, compute_speedup, runs_w4a16_hopper, runs_w4a4
from llumverify.sim.quantization import describe as describe_formats
from llumverify.sim.stepcost import StepCost

EFFICIENCY_TOML = Path(__file__).resolve().parent / "efficiency.toml"
# Non-KV, non-weight memory per GPU (vLLM's profiling-pass activation peak, CUDA graphs,
# workspaces, driver-reserved memory): one constant, the mean of the reserves that the two
# published capacities imply (kv_capacity_blocks); tests/test_roofline.py measures both errors.
DEFAULT_ACTIVATION_RESERVE_BYTES = int(1.3 * 2**30)
GEMMS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
ONCE_PER_STEP = ("embedding", "final_layernorm")
LOGIT_BYTES = 4  # the sampler works on fp32 logits
PRIORS = ("fixed_ns", "seq_ns", "hbm_bw_scale", "tp_step_ns", "layer_ns", "seq_gparam_ns")
# priors fitted on published kernel times (the top-p sort: on published serving runs), not by a static-batch fit:
# written to sim/efficiency.toml, not to engine terms
KERNEL_PRIORS = ("moe_layer_ns", "fp4_gemm_ns", "fp4_gemm_ps_per_k", "fp4_gemm_bw", "fp4_gemm_flops", "fp4_grouped_bw",
                 "w4a16_hopper_bw", "w4a16_hopper_ns", "topp_sort_ns")
V1_SEQ_HEADS = 512  # vLLM runs paged-attention V1 when decodes x query heads on one GPU exceed this (kv_bw_v1)
FIT_SUMMARY = ("dense_layer", "attention_prefill", "attention_decode", "attention_mixed", "lm_head", "sampler")


@dataclass(frozen=True)
class Efficiency:
    """Fractions of datasheet peaks (and fixed kernel times, ns) that real kernels reach."""

    gemm_bw: float
    gemm_flops: float
    gemm_p: float
    small_op_ns: float
    elementwise_bw: float
    attn_chunk_ns: float
    attn_ctx_bw: float
    attn_flops: float
    kv_bw: float
    decode_ns: float
    decode_seq_ns: float
    mixed_seq_ns: float
    mixed_rows: float
    sampler_ns: float
    sampler_bw: float
    # not fitted on kernel profiles (they see neither the engine's CPU time, nor other memory
    # families, nor TP groups): fitted on static batches (llumverify/validation/transfer_fit.py); links are
    # the interconnect catalog's (sim/collectives.py)
    fixed_ns: int = 0
    seq_ns: int = 0  # the engine's CPU time per sequence and step (bookkeeping, sampling, detokenisation)
    hbm_bw_scale: float = 1.0
    tp_step_ns: int = 0
    layer_ns: int = 0  # the engine's time per layer and step (a stack launching every layer's kernels from the CPU)
    # ns per sequence and step per billion layer weights a token meets on one GPU (skinny decode GEMMs far below
    # the roofline: MI300X's 2024 ROCm vLLM, transfer_fit.vendor_fit); 0 on every other stack
    seq_gparam_ns: int = 0
    # a fixed time per MoE layer and step on an NVIDIA HBM GPU: the fused-MoE call's chain of small dependent
    # kernels, which the bandwidth and FLOP terms miss where a step reads few expert bytes; fitted on published
    # graph-timed kernel rows (benchmarks/moe_kernels_published.py; its rule set after a 25 us sensitivity run on
    # the H100 serving runs, reports/validation/moe-kernels/README.md)
    moe_layer_ns: int = 0
    # a fixed time per dense W4A4 NVFP4 GEMM on FP4 tensor cores: CUTLASS-based FP4 GEMMs of 2025-26 take 9-11 us
    # up to 14 MB of weights, where a 16-bit GEMM takes its bytes' time; fitted with the two shares on published
    # graph-timed kernel rows (benchmarks/w4_kernels_published.py; reports/validation/w4-kernels)
    fp4_gemm_ns: int = 0
    # and a time per element of the GEMM's reduction (K) dimension, ps: FlashInfer's CUTLASS FP4 GEMM at 1-64 tokens
    # takes 4.3 us at K = 256-1,024 and 40 us at K = 28,672 (flashinfer#2540), a K loop no split-K shortens
    fp4_gemm_ps_per_k: int = 0
    # the share of the memory bandwidth a dense W4A4 NVFP4 GEMM streams its weights at, in place of gemm_bw, beside
    # the fixed and per-K times; 0: gemm_bw
    fp4_gemm_bw: float = 0.0
    # the share an MoE's grouped W4A4 NVFP4 expert GEMM streams its weights at (no fixed or per-K time): about 3 TB/s
    # at m = 16 and 4 tuned on B200 (cutlass#2266); 0: fp4_gemm_bw
    fp4_grouped_bw: float = 0.0
    # the share of the FP4 peak a W4A4 NVFP4 GEMM computes at, in place of gemm_flops: the same kernels reach 3.9
    # of B200's 9 dense FP4 PFLOPS at 16k tokens (vllm#20578); fitted with the other two; 0: gemm_flops
    fp4_gemm_flops: float = 0.0
    # the share of the memory bandwidth a weight-only 4-bit GEMM (int4; NVFP4 off Blackwell) streams its weights at on
    # Hopper, in place of gemm_bw: vLLM's Marlin kernel on H200 takes 20 us for an 8192 x 8192 matrix at one token,
    # where its bytes take 7 (TileOPs#1874); 0: gemm_bw
    w4a16_hopper_bw: float = 0.0
    # and a fixed time per dense such GEMM there, fitted with the share (an MoE's experts pay moe_layer_ns instead)
    w4a16_hopper_ns: int = 0
    # the sampler's full-vocabulary sort per sequence and step where requests sample with top-p (vLLM 0.11.1-0.16 on
    # CUDA), on an H100 SXM for a 131,072-token vocabulary (sim/sampling.py scales it to the GPU and the model);
    # fitted on public vLLM 0.15.1 serving runs (llumverify/validation/public_serving.py fit_sort_ns)
    topp_sort_ns: int = 0
    # decode attention reads each KV head once per query head (no GQA reuse: MI300X's ROCm paged attention,
    # transfer_fit.vendor_fit); set by a vendor fit only, never written to sim/efficiency.toml
    kv_per_query_head: bool = False
    # decode-attention KV efficiency (like kv_bw) of a step whose decodes x query heads per GPU exceed 512: vLLM's
    # paged-attention V1 kernel, which ROCm vLLM runs there instead of V2 (llumverify/validation/rocm_attention.py;
    # transfer_fit.vendor_fit); 0: one kernel for every batch, kv_bw
    kv_bw_v1: float = 0.0
    # (GPU arch, fixed ns, bandwidth share) triples: a dense 16-bit or fp8 GEMM kernel on a tensor-core generation
    # whose small GEMMs were measured (Vidur's kernels, benchmarks/vidur_check.py part 2): a fixed time per kernel
    # plus the weights at that share of the datasheet bandwidth, in place of gemm_bw (fitted on the profiled GPU,
    # whose kernels carry their fixed time in it); a generation not listed keeps gemm_bw and no fixed time
    gemm_kernels: tuple[tuple[str, int, float], ...] = ()
    # the gemm_kernels generation whose terms a GPU with inline ECC (GPU.inline_ecc) takes when its own generation
    # has none: every weight read also fetches its ECC bits from the same memory, so the measured inline-ECC GPU's
    # share (A40, sm_86) transfers better than gemm_bw, fitted on a GPU without it; "": none
    inline_ecc_kernels: str = ""
    # (GPU arch, scale) pairs: the share of the profiled GPU's compute efficiency (gemm_flops,
    # attn_flops) another tensor-core generation reaches with the same software, fitted on measured
    # prefills of that generation (llumverify/validation/prefill.py); 1 for a generation not listed
    flops_scale: tuple[tuple[str, float], ...] = ()
    fitted_on: tuple[str, ...] = ()
    fit_error: str = ""


FITTED = tuple(f.name for f in fields(Efficiency) if f.default is MISSING)


def load_efficiency(path: str | Path = EFFICIENCY_TOML) -> Efficiency:
    """The efficiency factors from a TOML file (default: the packaged sim/efficiency.toml)."""
    data = read_toml(Path(path), "efficiency TOML file")
    fit = {k: v for k, v in data.get("fit", {}).items() if k != "errors"}
    values = {**data.get("factors", {}), **data.get("priors", {}), **fit}
    check_keys(Path(path), values, (f.name for f in fields(Efficiency)))
    if missing := set(FITTED) - set(values):
        raise UserError(f"{path}: missing factors {sorted(missing)}")
    values["fitted_on"] = tuple(values.get("fitted_on", ()))
    scales = values.get("flops_scale", {})
    if not isinstance(scales, dict) or not all(isinstance(v, (int, float)) and 0 < v <= 2 for v in scales.values()):
        raise UserError(f"{path}: flops_scale must be a table of GPU arch = scale in (0, 2]")
    values["flops_scale"] = tuple(sorted((str(k), float(v)) for k, v in scales.items()))
    kernels = values.get("gemm_kernels", {})
    if not isinstance(kernels, dict) or not all(
            isinstance(v, dict) and set(v) == {"fixed_ns", "bw"} and isinstance(v["fixed_ns"], int)
            and not isinstance(v["fixed_ns"], bool) and 0 <= v["fixed_ns"] <= 1_000_000
            and isinstance(v["bw"], (int, float)) and not isinstance(v["bw"], bool) and 0 < v["bw"] <= 1
            for v in kernels.values()):
        raise UserError(f"{path}: gemm_kernels must be a table of GPU arch = {{ fixed_ns = 0..1000000, bw = (0, 1] }}")
    values["gemm_kernels"] = tuple(sorted((str(a), v["fixed_ns"], float(v["bw"])) for a, v in kernels.items()))
    if values.get("inline_ecc_kernels", "") not in ("", *kernels):
        raise UserError(f"{path}: inline_ecc_kernels must name a gemm_kernels generation ({', '.join(kernels)}) "
                        f"or be \"\", got {values['inline_ecc_kernels']!r}")
    for name, of in (("fp4_gemm_bw", "the bandwidth in [0, 1] (0: gemm_bw)"), ("fp4_gemm_flops", "the FP4 peak in [0, 1] (0: gemm_flops)"),
                     ("fp4_grouped_bw", "the bandwidth in [0, 1] (0: fp4_gemm_bw)"),
                     ("w4a16_hopper_bw", "the bandwidth in [0, 1] (0: gemm_bw)")):
        share = values.get(name, 0.0)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise UserError(f"{path}: {name} must be a share of {of}, got {share!r}")
    return Efficiency(**values)


def efficiency_toml(eff: Efficiency, errors: dict[str, dict[str, dict[str, float]]] | None = None) -> str:
    """sim/efficiency.toml text for `eff`, with an error table per profile if given."""
    lines = ["# Efficiency factors of the first-principles step cost (sim/roofline.py): fractions of the",
             "# datasheet peaks (sim/catalog/gpus.toml) that kernels reach, and fixed kernel times in ns.",
             "# Written by roofline.write_efficiency (re-run by `llumverify calibrate`); do not edit by hand.",
             "", "[factors]"]
    lines += [f"{name} = {getattr(eff, name)!r}" for name in FITTED]
    lines += ["", "# Not fitted on kernel profiles (sim/roofline.py docstring): the engine's CPU time per step",
              "# (fixed_ns) and per sequence and step (seq_ns), the HBM transfer scale, a TP group's",
              "# per-step overhead, a per-layer per-step overhead, an MoE layer's fixed time on NVIDIA",
              "# HBM GPUs (moe_layer_ns: benchmarks/moe_kernels_published.py) and an NVFP4 GEMM's on FP4 tensor",
              "# cores with its K-loop time and shares (fp4_gemm_ns, fp4_gemm_ps_per_k, fp4_gemm_bw, fp4_gemm_flops:",
              "# benchmarks/w4_kernels_published.py; fp4_grouped_bw for an MoE's experts: cutlass#2266) and a",
              "# weight-only 4-bit GEMM's share and fixed time on Hopper (w4a16_hopper_bw, w4a16_hopper_ns: the",
              "# same script), the sampler's top-p sort per sequence (topp_sort_ns: sim/sampling.py);",
              "# GPU links are the interconnect catalog's (sim/catalog/gpus.toml).", "[priors]"]
    lines += [f"{name} = {getattr(eff, name)!r}" for name in PRIORS + KERNEL_PRIORS]
    lines += ["# the compute transfer rule per GPU arch (Efficiency.flops_scale)",
              "flops_scale = { " + ", ".join(f"{_q(a)} = {v!r}" for a, v in eff.flops_scale) + " }",
              "# measured dense GEMM kernels per GPU arch (Efficiency.gemm_kernels)",
              "gemm_kernels = { " + ", ".join(f"{_q(a)} = {{ fixed_ns = {f}, bw = {b!r} }}"
                                              for a, f, b in eff.gemm_kernels) + " }",
              "# the measured generation a GPU with inline ECC takes when its own has none (Efficiency.inline_ecc_kernels)",
              f"inline_ecc_kernels = {_q(eff.inline_ecc_kernels)}"]
    lines += ["", "[fit]", f"fitted_on = [{', '.join(_q(s) for s in eff.fitted_on)}]",
              f"fit_error = {_q(eff.fit_error)}"]
    for name, groups in (errors or {}).items():
        lines += ["", f"# absolute % error per op group on {name}: attention_prefill_small (chunks < 128",
                  "# tokens) is a subset of attention_prefill", f"[fit.errors.{_q(name)}]"]
        lines += [f"{k} = {{ median_ape = {v['median_ape']}, p90_ape = {v['p90_ape']}, rows = {v['rows']} }}"
                  for k, v in groups.items()]
    return "\n".join(lines) + "\n"


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------- op times (ns)
def _kv_heads(model: Model, tp: int) -> int:
    return max(1, model.kv_heads // tp)


@dataclass(frozen=True)
class MoEGroup:
    """How an MoE engine's expert layers are spread (module docstring): over the tp GPUs of one
    engine (dp 1), or of dp data-parallel ranks, whole experts per GPU with expert parallelism."""

    dp: int = 1
    expert_parallel: bool = False

    def expert_width(self, model: Model, tp: int) -> int:
        """One expert's intermediate size on one GPU."""
        return model.moe_intermediate if self.expert_parallel else model.moe_intermediate // (tp * self.dp)

    def expert_share(self, model: Model, tp: int) -> float:
        """The share of the experts the busiest GPU holds whole (1: every expert, sliced): vLLM
        gives the first E mod N of N expert-parallel ranks one expert more (determine_expert_map),
        and a lockstep step lasts as long as the busiest rank's."""
        return math.ceil(model.experts / (tp * self.dp)) / model.experts if self.expert_parallel else 1.0

    def expert_bytes_share(self, model: Model, tp: int) -> float:
        """The share of the experts' weight bytes on the busiest GPU."""
        return self.expert_share(model, tp) if self.expert_parallel else 1.0 / (tp * self.dp)


ONE_ENGINE = MoEGroup()


def gemm_params(model: Model, tp: int = 1, group: MoEGroup = ONE_ENGINE) -> dict[str, int]:
    """Weights of each projection of one layer on one GPU (of one expert, for an MoE's MLP)."""
    h, q_dim, kv_dim = model.hidden, model.q_dim // tp, _kv_heads(model, tp) * model.head_dim
    inter = group.expert_width(model, tp) if model.moe else model.intermediate // tp
    out = {"qkv_proj": h * (q_dim + 2 * kv_dim), "o_proj": q_dim * h, "gate_up_proj": h * 2 * inter,
           "down_proj": inter * h}
    if model.shared_intermediate:  # a dense MLP beside the experts: sharded over tp, whole on every DP rank
        shared = model.shared_intermediate // tp
        out |= {"shared_gate_up_proj": h * 2 * shared, "shared_down_proj": shared * h}
    return out


def gemm_k(model: Model, op: str, tp: int = 1) -> int:
    """The reduction length of a dense projection on one GPU: the hidden size into the column-parallel ones (qkv,
    gate_up), the sharded width into the row-parallel ones (o, down)."""
    return {"qkv_proj": model.hidden, "gate_up_proj": model.hidden, "shared_gate_up_proj": model.hidden,
            "o_proj": model.q_dim // tp, "down_proj": model.intermediate // tp,
            "shared_down_proj": model.shared_intermediate // tp}[op]


def experts_touched(model: Model, tokens: float) -> float:
    """Expected distinct experts a step of `tokens` tokens routes to, under uniform routing:
    E·(1 − (1 − k/E)^T) (module docstring)."""
    e, k = model.experts, model.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** tokens) if tokens > 0 else 0.0


def token_gemm_params(model: Model, tp: int = 1) -> int:
    """Layer weights one token is multiplied by on one GPU (every layer; an MoE token's k experts)."""
    gp = gemm_params(model, tp)
    mlp = (gp["gate_up_proj"] + gp["down_proj"]) * (model.experts_per_token if model.moe else 1)
    shared = gp.get("shared_gate_up_proj", 0) + gp.get("shared_down_proj", 0)
    return model.layers * (gp["qkv_proj"] + gp["o_proj"] + mlp + shared)


def small_op_elements(model: Model, op: str, tp: int = 1) -> int:
    """Elements one call of an elementwise op reads plus writes per token: fused add+RMSNorm reads
    and writes the hidden state and the residual; q_norm and k_norm (profiled as one mean
    `qk_norm`) read and write q or k; SiLU·mul reads 2·I and writes I."""
    q_dim, kv_dim = model.q_dim // tp, _kv_heads(model, tp) * model.head_dim
    return {"embedding": 2 * model.hidden, "layernorm": 4 * model.hidden, "final_layernorm": 4 * model.hidden,
            "rotary_emb": 2 * (q_dim + kv_dim), "qk_norm": q_dim + kv_dim,
            "act_fn": 3 * (model.moe_intermediate * model.experts_per_token if model.moe
                           else model.intermediate) // tp,
            "shared_act_fn": 3 * model.shared_intermediate // tp}[op]


def layer_small_ops(model: Model) -> tuple[str, ...]:
    """The small kernels one decoder layer calls: two RMSNorms, rotary, SiLU·mul (a shared expert's
    too), q_norm/k_norm."""
    return (("layernorm", "layernorm", "rotary_emb", "act_fn") + (("shared_act_fn",) if model.shared_intermediate else ())
            + (("qk_norm", "qk_norm") if model.qk_norm else ()))


def bw(gpu: GPU, eff: Efficiency) -> float:
    """The memory bandwidth the efficiencies apply to: the datasheet peak, times hbm_bw_scale on an
    HBM GPU (the transfer rule: the efficiencies are fitted on GDDR profiles, module docstring)."""
    return gpu.mem_bw * (eff.hbm_bw_scale if gpu.hbm else 1.0)


def flops(gpu: GPU, eff: Efficiency) -> float:
    """The compute peak the efficiencies apply to: the datasheet peak, times flops_scale for the
    GPU's tensor-core generation (the transfer rule for compute, as bw() is for memory)."""
    return gpu.flops * dict(eff.flops_scale).get(gpu.arch, 1.0)


def kernel_terms(gpu: GPU, eff: Efficiency) -> tuple[int, float] | None:
    """(fixed ns, bandwidth share) of a dense 16-bit or fp8 GEMM kernel measured on `gpu`'s generation or, for a
    GPU with inline ECC whose generation has none, on the measured inline-ECC GPU's (inline_ecc_kernels)."""
    table = {a: (f, b) for a, f, b in eff.gemm_kernels}
    if gpu.arch in table:
        return table[gpu.arch]
    return table.get(eff.inline_ecc_kernels) if gpu.inline_ecc and eff.inline_ecc_kernels else None


def gemm_ns(params: float, tokens: float, dtype_bytes: float, gpu: GPU, eff: Efficiency,
            read_params: float | None = None, fmt: str = "bf16", grouped: bool = False, k: int = 0) -> float:
    """A GEMM of `params` weights of `dtype_bytes` each applied to `tokens` rows, streaming read_params
    weights (default all), reducing over `k` (gemm_k; a dense W4A4 GEMM needs it): its fixed time plus the
    p-norm of its memory and compute times (gemm_terms)."""
    fixed, mem, comp = gemm_terms(params, tokens, dtype_bytes, gpu, eff, read_params, fmt, grouped, k)
    return fixed + (mem**eff.gemm_p + comp**eff.gemm_p) ** (1.0 / eff.gemm_p)


def gemm_terms(params: float, tokens: float, dtype_bytes: float, gpu: GPU, eff: Efficiency,
               read_params: float | None = None, fmt: str = "bf16", grouped: bool = False,
               k: int = 0) -> tuple[float, float, float]:
    """(fixed, memory, compute) ns of gemm_ns's GEMM, the compute at the peak of the weights' format `fmt`
    (sim/quantization.py: fp8 twice the 16-bit peak on FP8 tensor cores...). A W4A4 GEMM streams its weights at
    fp4_gemm_bw and computes at fp4_gemm_flops of the FP4 peak and adds fp4_gemm_ns plus fp4_gemm_ps_per_k for each
    of its `k` reduction elements, fitted on dense GEMMs; an MoE's `grouped` expert GEMM streams at fp4_grouped_bw
    (cutlass#2266's grouped FP4 GEMM) and pays no fixed time here: moe_layer_ns prices it per layer (NVFP4 experts
    are not validated). A weight-only 4-bit GEMM on Hopper (int4, NVFP4) streams at w4a16_hopper_bw and, dense, adds
    w4a16_hopper_ns (vLLM's Marlin kernel on H200). Any other dense GEMM on a generation in gemm_kernels streams at
    its measured share and adds its fixed time (kernel_terms: a GPU with inline ECC whose generation has none
    takes the measured inline-ECC GPU's). Those kernel-fitted shares are of the datasheet bandwidth: they were measured on the GPUs themselves, so hbm_bw_scale (bw(), the transfer rule for GDDR-fitted efficiencies)
    does not scale them."""
    w4a4 = runs_w4a4(fmt, gpu.arch)
    if w4a4 and not grouped and k < 1:
        raise ValueError("a dense W4A4 GEMM is priced with its reduction length: pass k (gemm_k)")
    w4a16 = runs_w4a16_hopper(fmt, gpu.arch)
    kernel_share = (eff.fp4_grouped_bw if grouped and eff.fp4_grouped_bw else eff.fp4_gemm_bw) if w4a4 else 0.0
    kernel_share = kernel_share or (eff.w4a16_hopper_bw if w4a16 else 0.0)
    # 4-bit weights run their own kernels everywhere (Marlin, FP4 GEMMs): only dense 16-bit and fp8 GEMMs take the
    # measured kernels' terms
    measured = None if fmt in FOUR_BIT or grouped else kernel_terms(gpu, eff)
    kernel_fixed, kernel_share = measured or (0, kernel_share)
    stream = gpu.mem_bw * kernel_share if kernel_share else bw(gpu, eff) * eff.gemm_bw  # bytes/s
    mem = (params if read_params is None else read_params) * dtype_bytes / stream * 1e9
    peak = flops(gpu, eff) * compute_speedup(fmt, gpu.arch)
    comp = 2.0 * params * tokens / (peak * (eff.fp4_gemm_flops if w4a4 and eff.fp4_gemm_flops else eff.gemm_flops)) * 1e9
    fixed = kernel_fixed + (eff.fp4_gemm_ns + k * eff.fp4_gemm_ps_per_k / 1e3 if w4a4 and not grouped else 0)
    fixed += eff.w4a16_hopper_ns if w4a16 and not grouped else 0
    return fixed, mem, comp


def moe_gemm_ns(params: float, tokens: float, model: Model, gpu: GPU, eff: Efficiency, share: float = 1.0,
                active: float | None = None) -> float:
    """One expert projection of `params` weights (per expert, on this GPU) over a step of `tokens`
    tokens routed to the experts, of which this GPU holds `share`: the touched experts' weights are
    read (`active` of them, default uniform routing's expectation), T·k expert rows computed (their
    share here)."""
    k = model.experts_per_token
    touched = experts_touched(model, tokens) if active is None else active
    return gemm_ns(params, tokens * k * share, model.linear_bytes, gpu, eff,
                   read_params=params * touched * share, fmt=model.weight_format, grouped=True)


def pays_moe_fixed(gpu: GPU) -> bool:
    """Whether an MoE layer pays moe_layer_ns on this GPU: NVIDIA HBM GPUs, where the fused-MoE kernel
    times it is fitted on were measured (module docstring); GDDR profiles show none; AMD is untested."""
    return gpu.hbm and gpu.vendor == "nvidia"


def pads_mixed_decodes(gpu: GPU) -> bool:
    """Whether a mixed step's decodes pay the padded-tile surcharge (mixed_seq_ns, mixed_rows) on this GPU.

    vLLM's FLASH_ATTN backend runs FlashAttention 3 on compute capability 9.x and FlashAttention 2
    elsewhere (vllm/attention/utils/fa_utils.py, get_flash_attn_version). The surcharge is fitted on
    RTX PRO 6000 profiles (the held-out RTX 4090 one shows +52 to +116 % over decode-only plus
    chunk-only). LLMServingSim's H100 profile (vLLM 0.19) shows none: its mixed rows' extra over
    decode-only plus chunk-only does not grow with the surcharge the RTX fit predicts, and 719 of its
    720 mixed rows are at or below that sum (`python benchmarks/h100_kernel_check.py LSS_H100`). Why is
    not measured (FlashAttention 3's warp specialisation or its GQA packing are candidates), and that
    profile is one model (head_dim 256, 8 query heads per KV head, eager, up to 1,024 KV tokens a
    sequence). The attention backend is read from vLLM's code, not recorded by either profile.
    On compute capability 10.x (B200, GB200, B300) vLLM's first choice is FLASHINFER, not FLASH_ATTN
    (vllm/platforms/cuda.py `_get_backend_priorities`, v0.15), and its FlashInfer backend reorders a
    mixed batch decodes first and runs them through its decode wrapper, apart from the prefill rows
    (vllm/v1/attention/backends/flashinfer.py: reorder_batch_threshold 1, split_decodes_and_prefills):
    no decode is padded to a query tile. The one B200 measurement agrees: at 512 clients a step admitting
    a request took about as long as a decode-only step (reports/validation/inferencex-b200, `step_split`).
    Not modelled: sm_10x servers that do not run FlashInfer (a head size it lacks, or FLASH_ATTN chosen by
    hand: FlashAttention 2 there, which would pad), and FlashInfer chosen by hand elsewhere
    (--attention-backend flashinfer-fa2 off compute capability 10.x, which keeps the surcharge).
    Other GPUs, AMD's included, keep the surcharge (untested off the RTX GPUs).
    """
    return not re.fullmatch(r"sm_(9|10)\d[a-z]?", gpu.arch)


def moe_fixed_ns(gpu: GPU, eff: Efficiency) -> int:
    """An MoE layer's fixed time per step: moe_layer_ns where pays_moe_fixed, else 0."""
    return eff.moe_layer_ns if pays_moe_fixed(gpu) else 0


def small_op_ns(model: Model, op: str, tokens: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """One call of a small memory-bound kernel: a fixed time plus its activation traffic."""
    traffic = tokens * small_op_elements(model, op, tp) * model.dtype_bytes
    return eff.small_op_ns + traffic / (bw(gpu, eff) * eff.elementwise_bw) * 1e9


def layer_dense_ns(model: Model, tokens: float, gpu: GPU, eff: Efficiency, tp: int = 1,
                   group: MoEGroup = ONE_ENGINE) -> float:
    """Every token-proportional op of one decoder layer (GEMMs and small kernels), no attention;
    an MoE's experts see the tokens of all `group.dp` ranks (module docstring)."""
    t = 0.0
    for op, p in gemm_params(model, tp, group).items():
        expert = model.moe and op in ("gate_up_proj", "down_proj")
        attention = op in ("qkv_proj", "o_proj")
        t += (moe_gemm_ns(p, tokens * group.dp, model, gpu, eff, group.expert_share(model, tp)) if expert
              else gemm_ns(p, tokens, model.op_bytes(attention), gpu, eff, fmt=model.op_format(attention),
                           k=gemm_k(model, op, tp)))
    if model.moe:  # the router, replicated on every GPU; the fused-MoE call's fixed time on NVIDIA HBM GPUs
        t += gemm_ns(model.hidden * model.experts, tokens, model.dtype_bytes, gpu, eff)
        t += moe_fixed_ns(gpu, eff)
    return t + sum(small_op_ns(model, op, tokens, gpu, eff, tp) for op in layer_small_ops(model))


def attn_token_bytes(model: Model, tp: int = 1) -> int:
    """Per chunk token and layer: read q, write o, write k and v into the cache."""
    return 2 * (model.q_dim // tp) * model.dtype_bytes + 2 * _kv_heads(model, tp) * model.head_dim * model.kv_dtype_bytes


def kv_token_bytes(model: Model, tp: int = 1) -> int:
    """K and V of one cached token in one layer on one GPU."""
    return 2 * _kv_heads(model, tp) * model.head_dim * model.kv_dtype_bytes


def kv_read_bytes(model: Model, tp: int = 1) -> float:
    """What attention pays to read one cached token in one layer on one GPU, in bytes at its KV
    efficiency: the cache's own bytes, or where the kernels dequantise an fp8 cache, a 16-bit cache's
    times their slowdown (sim/kv_dequant.py)."""
    if model.attention_slowdown == 1:
        return kv_token_bytes(model, tp)
    return kv_token_bytes(model, tp) * model.dtype_bytes / model.kv_dtype_bytes * model.attention_slowdown


def decode_kv_bytes(model: Model, tp: int, eff: Efficiency) -> float:
    """KV bytes decode attention reads per cached token and layer: once per KV head, or once per
    query head where the kernel does not share a KV head's reads across its query group (a GPU's
    heads // tp query heads over its KV heads: the model's group, or fewer where KV heads are
    replicated, tp > kv_heads)."""
    if not eff.kv_per_query_head:
        return kv_read_bytes(model, tp)
    return kv_read_bytes(model, tp) * max(1, model.heads // tp) / _kv_heads(model, tp)


def pair_flops(model: Model, tp: int = 1) -> int:
    """FLOPs of one query-key pair in one layer: q·k and p·v over every head, 2 FLOPs a MAC."""
    return 4 * (model.heads // tp) * model.head_dim


def prefill_attn_ns(model: Model, chunk: float, ctx: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """One layer's causal attention of a chunk over ctx cached tokens."""
    pairs = chunk * (2 * ctx + chunk + 1) / 2
    return (eff.attn_chunk_ns + chunk * attn_token_bytes(model, tp) / (bw(gpu, eff) * eff.elementwise_bw) * 1e9
            + ctx * kv_read_bytes(model, tp) / (bw(gpu, eff) * eff.attn_ctx_bw) * 1e9
            + pairs * pair_flops(model, tp) * model.attention_slowdown / (flops(gpu, eff) * eff.attn_flops) * 1e9)


def mixed_extra_ns(model: Model, n: float, context: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    """One layer's surcharge on n decodes over `context` KV tokens that share a step with a prefill
    chunk, as the RTX-fitted padded-tile terms price it (charged where pads_mixed_decodes)."""
    return n * eff.mixed_seq_ns + (context * eff.mixed_rows * pair_flops(model, tp) * model.attention_slowdown
                                   / (flops(gpu, eff) * eff.attn_flops) * 1e9)


def decode_attn_ns(model: Model, n: float, context: float, gpu: GPU, eff: Efficiency, tp: int = 1,
                   mixed: bool = False) -> float:
    """One layer's attention of n decoding sequences holding `context` KV tokens in all
    (`mixed`: the step also has a prefill chunk; its surcharge only where pads_mixed_decodes)."""
    kv_ns = context * decode_kv_bytes(model, tp, eff) / (bw(gpu, eff) * eff.kv_bw) * 1e9
    t = eff.decode_ns + n * eff.decode_seq_ns + kv_ns
    return t + (mixed_extra_ns(model, n, context, gpu, eff, tp) if mixed and pads_mixed_decodes(gpu) else 0.0)


def lm_head_ns(model: Model, seqs: float, gpu: GPU, eff: Efficiency, tp: int = 1) -> float:
    return gemm_ns(model.vocab // tp * model.hidden, seqs, model.dtype_bytes, gpu, eff)


def sampler_ns(model: Model, seqs: float, gpu: GPU, eff: Efficiency) -> float:
    return eff.sampler_ns + seqs * model.vocab * LOGIT_BYTES / (bw(gpu, eff) * eff.sampler_bw) * 1e9


# ---------------------------------------------------------------------------------- StepCost
def check_tp(model: Model, tp: object) -> None:
    """tp must shard the model evenly: heads and every intermediate size divisible by it."""
    inter = model.moe_intermediate if model.moe else model.intermediate
    if (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or model.heads % tp or inter % tp
            or model.shared_intermediate % tp):
        raise UserError(f"tp={tp!r} must be an integer >= 1 dividing {model.name}'s {model.heads} heads "
                        f"and intermediate size {inter}"
                        + (f" and shared-expert size {model.shared_intermediate}" if model.shared_intermediate else ""))


def check_group(model: Model, tp: int, group: MoEGroup) -> None:
    """dp must be a whole number of ranks; expert parallelism needs an expert for every GPU, sliced
    experts a width the dp x tp GPUs divide (vLLM's own conditions)."""
    dp = group.dp
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
        raise UserError(f"data_parallel_size={dp!r} must be an integer >= 1")
    if model.moe and dp * tp > 1:
        if group.expert_parallel and model.experts < dp * tp:
            raise UserError(f"expert parallelism over {dp * tp} GPUs needs at least as many experts ({model.name}: "
                            f"{model.experts})")
        if not group.expert_parallel and model.moe_intermediate % (dp * tp):
            raise UserError(f"{dp * tp} GPUs must divide {model.name}'s expert width {model.moe_intermediate}")


def describe_group(model: Model, group: MoEGroup) -> str:
    """The step cost's source words for an MoE engine's data-parallel group ("" for none)."""
    if group.dp == 1 and not group.expert_parallel:
        return ""
    how = "whole experts per GPU (expert parallelism)" if group.expert_parallel else "every expert sharded"
    return f", dp={group.dp}" + (f" ({how}; MoE tokens of all ranks, sim/roofline.py)" if model.moe else "")


def _knots(limit: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, ... up to limit: two knots per octave keep chords within 0.3 %."""
    xs, k = {1}, 1
    while k <= limit:
        xs.update((k, k + k // 2))
        k *= 2
    return sorted(x for x in xs if x <= limit)


def step_cost_first_principles(model: str | Model, gpu: str | GPU, tp: int = 1, eff: Efficiency | None = None,
                               fixed_ns: int | None = None, max_tokens: int = 16_384,
                               max_seqs: int = 1_024, comm_terms: bool = True,
                               group: MoEGroup = ONE_ENGINE) -> StepCost:
    """The StepCost of `model` on `gpu` (tp GPUs) from FLOPs, bytes and the efficiency factors.

    fixed_ns (engine CPU time per step) defaults to the efficiency file's prior; linear and
    per_seq have knots up to max_tokens and max_seqs and extrapolate linearly past them; a TP group
    (tp > 1) adds the prior tp_step_ns to the per-step constant, and every layer adds layer_ns;
    comm_terms=False leaves out the collectives (sim/tensor_parallel.py scales profiles with it);
    `group`: the data-parallel ranks an MoE's experts are spread over (one engine: none).
    """
    model, gpu = get_model(model), get_gpu(gpu)
    eff = eff or load_efficiency()
    check_tp(model, tp)
    check_group(model, tp, group)
    L, link = model.layers, gpu.link
    gparams = token_gemm_params(model, tp) / 1e9

    def linear(t: int) -> int:
        once = sum(small_op_ns(model, op, t, gpu, eff, tp) for op in ONCE_PER_STEP)
        comm = (step_allreduce_ns(model, t, tp, link) + moe_exchange_ns(model, t, group.dp, link)) if comm_terms else 0.0
        return round(L * layer_dense_ns(model, t, gpu, eff, tp, group) + once + comm)

    def per_seq(s: int) -> int:
        gather = logits_gather_ns(model, s, tp, link) if comm_terms else 0.0
        return round(lm_head_ns(model, s, gpu, eff, tp) + sampler_ns(model, s, gpu, eff) + gather + eff.seq_ns * s
                     + eff.seq_gparam_ns * s * gparams)

    per_pair = pair_flops(model, tp) * model.attention_slowdown / (flops(gpu, eff) * eff.attn_flops)  # seconds
    pads = pads_mixed_decodes(gpu)
    cost = StepCost(
        fixed_ns=((eff.fixed_ns if fixed_ns is None else fixed_ns) + (eff.tp_step_ns if tp > 1 else 0)
                  + L * eff.layer_ns),
        linear=tuple((t, linear(t)) for t in sorted({*_knots(max_tokens), *(
            x for x in kernel_switch_tokens(model, tp, link) if comm_terms and x <= max_tokens)})),
        per_seq=tuple((s, per_seq(s)) for s in _knots(max_seqs)),
        prefill_attn_ns=round(L * eff.attn_chunk_ns),
        prefill_attn_ps_per_token=round(L * attn_token_bytes(model, tp) / (bw(gpu, eff) * eff.elementwise_bw) * 1e12),
        prefill_attn_ps_per_ctx_token=round(L * kv_read_bytes(model, tp) / (bw(gpu, eff) * eff.attn_ctx_bw) * 1e12),
        prefill_attn_fs_per_pair=round(L * per_pair * 1e15),
        decode_attn_ns=round(L * eff.decode_ns),
        decode_attn_ns_per_seq=round(L * eff.decode_seq_ns),
        decode_attn_ns_per_token=round(L * decode_kv_bytes(model, tp, eff) / (bw(gpu, eff) * eff.kv_bw) * 1e9),
        mixed_decode_attn_ns_per_seq=round(L * mixed_extra_ns(model, 1, 0, gpu, eff, tp)) if pads else 0,
        mixed_decode_attn_ns_per_token=round(L * mixed_extra_ns(model, 0, 1, gpu, eff, tp)) if pads else 0,
        decode_attn_v1_seqs=V1_SEQ_HEADS // (model.heads // tp) if eff.kv_bw_v1 else 0,
        decode_attn_v1_ns_per_token=(round(L * decode_kv_bytes(model, tp, eff) / (bw(gpu, eff) * eff.kv_bw_v1) * 1e9)
                                     if eff.kv_bw_v1 else 0),
        gpu=gpu.config_file or gpu.name, model=model.config_file or model.name, tp=tp,
        source=(f"first principles (sim/roofline.py): {gpu.name} datasheet peaks, {model.name} shapes"
                f"{describe_formats(model)}, tp={tp}{describe_group(model, group)}, "
                f"kernel efficiencies fitted on {', '.join(eff.fitted_on) or 'nothing'} (sim/efficiency.toml)"),
    )
    cost.validate()
    return cost


def _tp_ok(model: Model, tp: int) -> bool:
    """Whether `tp` GPUs can shard the model (check_tp), for a suggestion that is not then refused."""
    try:
        check_tp(model, tp)
    except UserError:
        return False
    return True


def kv_capacity_blocks(model: str | Model, gpu: str | GPU, tp: int = 1, gpu_memory_utilization: float = 0.9,
                       block_size: int = 16,
                       activation_reserve_bytes: int = DEFAULT_ACTIVATION_RESERVE_BYTES,
                       group: MoEGroup = ONE_ENGINE) -> int:
    """KV blocks per GPU as vLLM sizes them: (memory × utilization − weights − reserve) / block bytes.

    memory is the total the driver reports (catalog visible_memory_bytes, else the datasheet
    size), weights are split evenly over tp GPUs (an MoE's experts over the dp x tp GPUs of the
    group's data-parallel ranks, the busiest GPU's share: MoEGroup.expert_bytes_share). The reserve stands for everything else vLLM
    keeps outside the KV cache; it depends on the vLLM version's profiling pass, so it is one
    constant: 1.3 GiB, the mean of the reserves implied by the two published capacities, 1.58 GiB
    (RTX 4090, Llama-3.1-8B, vLLM 0.19: 2,588 blocks) and 1.04 GiB (A10, LLaMA-7B, vLLM 0.2: 851).
    """
    model, gpu = get_model(model), get_gpu(gpu)

    def free_bytes(tp: int) -> float:
        share = group.expert_bytes_share(model, tp) if model.moe and group.dp > 1 else None
        return (gpu.usable_memory_bytes * gpu_memory_utilization - model.weight_bytes_per_gpu(tp, share)
                - activation_reserve_bytes)

    free = free_bytes(tp)
    blocks = int(free // (block_size * model.kv_bytes_per_token(tp)))
    if blocks <= 0:
        fits = next((t for t in (2, 4, 8, 16) if t > tp and _tp_ok(model, t)
                     and free_bytes(t) > block_size * model.kv_bytes_per_token(t)), None)
        raise UserError(f"{model.name} does not fit on {tp} × {gpu.name} at gpu_memory_utilization "
                        f"{gpu_memory_utilization}: {free / 2**30:.2f} GiB left for the KV cache"
                        + (f" (it fits at TP {fits})" if fits else ""))
    return blocks


# ---------------------------------------------------------------------------------- profiles
@dataclass(frozen=True)
class Profile:
    """One per-layer kernel profile (tp1) of a catalog model on a catalog GPU, times in ns."""

    name: str
    model: Model
    gpu: GPU
    dense: dict[str, dict[int, float]]  # op -> tokens -> ns (per-call means, sim/profile.py)
    attention: np.ndarray  # rows of chunk, kv_prefill, n_decode, kv_decode (per sequence), ns
    per_seq: dict[str, dict[int, float]]  # lm_head / sampler -> sequences -> ns


def _by_op(table: dict[int, dict[str, float]]) -> dict[str, dict[int, float]]:
    """{x: {op: us}} as {op: {x: ns}}."""
    out: dict[str, dict[int, float]] = {}
    for x, ops in table.items():
        for op, us in ops.items():
            out.setdefault(op, {})[x] = us * 1e3
    return out


def load_profile(folder: str | Path) -> Profile:
    """A profile folder <GPU>/<model>/ with meta.yaml (`model`, `hardware`) and tp1/*.csv, read by
    sim/profile.py's checked readers (one parser of the format)."""
    folder = Path(folder)
    meta = profile_meta(folder)
    model, gpu = get_model(meta.get("model", folder.name)), get_gpu(meta.get("hardware", folder.parent.name))
    dense = _by_op(read_per_x(folder / "tp1" / "dense.csv", "tokens"))
    per_seq = _by_op(read_per_x(folder / "tp1" / "per_sequence.csv", "sequences"))
    attn = read_attention(folder)
    attn[:, 4] *= 1e3  # us -> ns
    if any(op not in dense for op in GEMMS):
        raise UserError(f"{folder}: profile lacks {', '.join(GEMMS)}")
    return Profile(f"{folder.parent.name}/{folder.name}", model, gpu, dense, attn, per_seq)


def attention_rows(profile: Profile, kind: str) -> np.ndarray:
    """Rows of one kind: 'prefill' (chunk only), 'prefill_small' (chunks < 128 tokens, the
    kernel's query tile), 'decode' (decodes only) or 'mixed' (a chunk and decodes)."""
    a = profile.attention
    c, n = a[:, 0], a[:, 2]
    mask = {"prefill": (c > 0) & (n == 0), "prefill_small": (c > 0) & (c < 128) & (n == 0),
            "decode": (c == 0) & (n > 0), "mixed": (c > 0) & (n > 0)}[kind]
    return a[mask]


def predict_attention(p: Profile, row: Sequence[float], eff: Efficiency) -> float:
    """One attention.csv row as the first-principles model times it (kv_decode is per sequence)."""
    chunk, kvp, n, kvd = row[:4]
    t = prefill_attn_ns(p.model, chunk, kvp, p.gpu, eff) if chunk else 0.0
    return t + (decode_attn_ns(p.model, n, n * kvd, p.gpu, eff, mixed=bool(chunk)) if n else 0.0)


def predict_profile_layer(p: Profile, tokens: int, eff: Efficiency) -> float:
    """A dense.csv row total as profiled: each op once (per-call means), embedding and final norm."""
    gp = gemm_params(p.model)
    return sum(gemm_ns(gp[op], tokens, p.model.dtype_bytes, p.gpu, eff) if op in GEMMS
               else small_op_ns(p.model, op, tokens, p.gpu, eff) for op in p.dense)


# ---------------------------------------------------------------------------------- fitting
def _rel_nnls(columns: Sequence[np.ndarray], target: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """β >= 0 minimizing Σ((Xβ − target)/scale)² (scale: the measured times, default target)."""
    s = target if scale is None else scale
    return nnls(np.column_stack(columns) / s[:, None], target / s)


def _grid_min(loss: Callable[[np.ndarray], float], lo: Sequence[float], hi: Sequence[float],
              points: int = 21, rounds: int = 6) -> np.ndarray:
    """Deterministic coarse-to-fine grid search of a box (same input, same answer)."""
    lo_, hi_ = np.array(lo, float), np.array(hi, float)
    best = (lo_ + hi_) / 2
    for _ in range(rounds):
        axes = [np.linspace(a, b, points) for a, b in zip(lo_, hi_)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(lo_))
        best = grid[int(np.argmin([loss(x) for x in grid]))]
        span = (hi_ - lo_) / (points - 1) * 2
        lo_, hi_ = np.maximum(lo_, best - span), np.minimum(hi_, best + span)
    return best


def _inv(x: float) -> float:
    return round(1.0 / float(x), 4) if x > 0 else 1e6  # a term the data do not need: (nearly) free


def _fit_gemm(profiles: Sequence[Profile]) -> dict[str, float]:
    """gemm_bw, gemm_flops, gemm_p by least squared log error over every GEMM and token count."""
    rows = [(gemm_params(p.model)[op] * p.model.dtype_bytes / p.gpu.mem_bw * 1e9,
             2.0 * gemm_params(p.model)[op] * t / p.gpu.flops * 1e9, ns)
            for p in profiles for op in GEMMS for t, ns in p.dense[op].items()]
    mem, comp, y = (np.array(c) for c in zip(*rows))
    logy = np.log(y)

    def loss(x: np.ndarray) -> float:
        bw, fl, pw = x
        return float(np.mean((np.log(((mem / bw) ** pw + (comp / fl) ** pw) ** (1 / pw)) - logy) ** 2))

    bw, fl, pw = _grid_min(loss, (0.3, 0.3, 1.0), (1.2, 1.2, 8.0))
    return {"gemm_bw": round(float(bw), 4), "gemm_flops": round(float(fl), 4), "gemm_p": round(float(pw), 3)}


def _fit_attention(profiles: Sequence[Profile], eff: Efficiency) -> dict[str, float]:
    """Prefill on prefill-only rows, decode on decode-only rows, then the mixed-step extra on what
    mixed rows take beyond those two (profiles of GPUs that pay it, pads_mixed_decodes); each a
    relative non-negative least squares."""
    pre = [(p, r) for p in profiles for r in attention_rows(p, "prefill")]
    y = np.array([r[4] for _, r in pre])
    tok = np.array([r[0] * attn_token_bytes(p.model) / (p.gpu.mem_bw * eff.elementwise_bw) * 1e9 for p, r in pre])
    ctx = np.array([r[1] * kv_token_bytes(p.model) / p.gpu.mem_bw * 1e9 for p, r in pre])
    pairs = np.array([r[0] * (2 * r[1] + r[0] + 1) / 2 * pair_flops(p.model) / p.gpu.flops * 1e9 for p, r in pre])
    chunk_ns, inv_ctx, inv_flops = _rel_nnls([np.ones(len(y)), ctx, pairs], y - tok, y)
    dec = [(p, r) for p in profiles for r in attention_rows(p, "decode")]
    y = np.array([r[4] for _, r in dec])
    kv = np.array([r[2] * r[3] * kv_token_bytes(p.model) / p.gpu.mem_bw * 1e9 for p, r in dec])
    dec_ns, seq_ns, inv_kv = _rel_nnls([np.ones(len(y)), np.array([r[2] for _, r in dec]), kv], y)
    eff = replace(eff, attn_chunk_ns=round(float(chunk_ns), 1), attn_ctx_bw=_inv(inv_ctx),
                  attn_flops=_inv(inv_flops), kv_bw=_inv(inv_kv), decode_ns=round(float(dec_ns), 1),
                  decode_seq_ns=round(float(seq_ns), 1), mixed_seq_ns=0.0, mixed_rows=0.0)
    mix = [(p, r) for p in profiles if pads_mixed_decodes(p.gpu) for r in attention_rows(p, "mixed")]
    y = np.array([r[4] for _, r in mix])
    rest = y - np.array([predict_attention(p, r, eff) for p, r in mix])
    padded = np.array([r[2] * r[3] * pair_flops(p.model) / (p.gpu.flops * eff.attn_flops) * 1e9 for p, r in mix])
    mixed_seq, mixed_rows = _rel_nnls([np.array([r[2] for _, r in mix]), padded], rest, y) if mix else (0.0, 0.0)
    return {"attn_chunk_ns": eff.attn_chunk_ns, "attn_ctx_bw": eff.attn_ctx_bw, "attn_flops": eff.attn_flops,
            "kv_bw": eff.kv_bw, "decode_ns": eff.decode_ns, "decode_seq_ns": eff.decode_seq_ns,
            "mixed_seq_ns": round(float(mixed_seq), 1), "mixed_rows": round(float(mixed_rows), 3)}


def fit_efficiency(profile_dirs: Sequence[str | Path], base: Efficiency | None = None) -> Efficiency:
    """Fit every kernel efficiency on the given profile folders; priors are kept from `base`.

    Each op group is fitted on its own rows, by relative least squares where the model is linear
    in its unknowns and by a deterministic grid search for the GEMM p-norm, so the same profiles
    always give the same factors.
    """
    profiles = [load_profile(d) for d in profile_dirs]
    if not profiles:
        raise UserError("fit_efficiency: no profile folders given")
    eff = replace(base or Efficiency(**{name: 1.0 for name in FITTED}), **_fit_gemm(profiles))
    small = [(t * small_op_elements(p.model, op) * p.model.dtype_bytes / p.gpu.mem_bw * 1e9, ns)
             for p in profiles for op in p.dense if op not in GEMMS for t, ns in p.dense[op].items()]
    traffic, y = (np.array(c) for c in zip(*small))
    op_ns, inv_elem = _rel_nnls([np.ones(len(y)), traffic], y)
    eff = replace(eff, small_op_ns=round(float(op_ns), 1), elementwise_bw=_inv(inv_elem))
    eff = replace(eff, **_fit_attention(profiles, eff))
    smp = [(s * p.model.vocab * LOGIT_BYTES / p.gpu.mem_bw * 1e9, ns) for p in profiles
           for s, ns in p.per_seq.get("sampler", {}).items()]
    if smp:
        logits, y = (np.array(c) for c in zip(*smp))
        samp_ns, inv_samp = _rel_nnls([np.ones(len(y)), logits], y)
        eff = replace(eff, sampler_ns=round(float(samp_ns), 1), sampler_bw=_inv(inv_samp))
    eff = replace(eff, fitted_on=tuple(p.name for p in profiles))
    summary = "; ".join(f"{p.name}: " + ", ".join(f"{k} {v['median_ape']} %" for k, v in profile_errors(p, eff).items()
                                                  if k in FIT_SUMMARY) for p in profiles)
    return replace(eff, fit_error=f"in-sample median APE per op group: {summary}")


def write_efficiency(profile_dirs: Sequence[str | Path], path: str | Path = EFFICIENCY_TOML,
                     base: Efficiency | None = None) -> Efficiency:
    """Fit on `profile_dirs` and write the factors with each profile's error table to `path`."""
    eff = fit_efficiency(profile_dirs, base)
    errors = {p.name: profile_errors(p, eff) for p in map(load_profile, profile_dirs)}
    Path(path).write_text(efficiency_toml(eff, errors), encoding="utf-8")
    return eff


def _ape(pred: Iterable[float], meas: Iterable[float]) -> dict[str, float]:
    ape = np.abs(np.array(list(pred)) / np.array(list(meas)) - 1) * 100
    return {"median_ape": round(float(np.median(ape)), 1), "p90_ape": round(float(np.percentile(ape, 90)), 1),
            "rows": int(ape.size)}


def profile_errors(profile: Profile | str | Path, eff: Efficiency | None = None,
                   tokens: Sequence[int] | None = None) -> dict[str, dict[str, float]]:
    """Absolute % error of the first-principles ops against a profile, per op group (median, p90,
    rows); `tokens` restricts the dense rows to those token counts."""
    p = profile if isinstance(profile, Profile) else load_profile(profile)
    eff = eff or load_efficiency()
    ts = sorted(t for t in p.dense["qkv_proj"] if tokens is None or t in tokens)
    small = [op for op in p.dense if op not in GEMMS]
    gp = gemm_params(p.model)
    out = {"dense_layer": _ape([predict_profile_layer(p, t, eff) for t in ts],
                               [sum(p.dense[op][t] for op in p.dense) for t in ts]),
           "gemm_ops": _ape([gemm_ns(gp[op], t, p.model.dtype_bytes, p.gpu, eff) for op in GEMMS for t in ts],
                            [p.dense[op][t] for op in GEMMS for t in ts]),
           "small_ops": _ape([small_op_ns(p.model, op, t, p.gpu, eff) for op in small for t in ts],
                             [p.dense[op][t] for op in small for t in ts])}
    for kind in ("prefill", "prefill_small", "decode", "mixed"):
        rows = attention_rows(p, kind)
        if len(rows):
            out[f"attention_{kind}"] = _ape([predict_attention(p, r, eff) for r in rows], rows[:, 4])
    for op, fn in (("lm_head", lambda s: lm_head_ns(p.model, s, p.gpu, eff)),
                   ("sampler", lambda s: sampler_ns(p.model, s, p.gpu, eff))):
        if pts := sorted(p.per_seq.get(op, {}).items()):
            out[op] = _ape([fn(s) for s, _ in pts], [ns for _, ns in pts])
    return out
