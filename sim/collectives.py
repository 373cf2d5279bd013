"""Tensor-parallel communication of one engine step: the alpha-beta model of each collective.

A tp-way group (vLLM's Megatron-style sharding: column-parallel qkv/gate_up, row-parallel
o/down, vocab-parallel embedding and lm_head) communicates, per step of T tokens and S sequences:
- one all-reduce of the T·hidden activations after the vocab-parallel embedding, and two per layer
  (after attention's o_proj and after the MLP's down_proj): (2·layers + 1) all-reduces;
- one gather of the S·vocab logits from the vocab shards (lm_head output) before sampling.
A collective over the interconnect of the GPU (sim/catalog/gpus.toml `[[interconnect]]`) costs
alpha_ns (launch, synchronisation) plus its bytes on the wire at bw·bw_eff: a ring all-reduce
moves 2·(tp−1)/tp of the buffer through each GPU's link, a gather (tp−1)/tp of it.
Which kernel runs an all-reduce is vLLM's choice (vllm/distributed/device_communicators/
custom_all_reduce.py, 2024 releases; newer ones' symmetric-memory kernels are not modelled): on a
fully connected NVLink group of 2, 4, 6 or 8 GPUs, buffers under max_size (8 MiB) take its custom
peer-to-peer kernel (every decode step's all-reduces), larger ones (prefill) NCCL. The custom kernel's fixed time (custom_alpha_ns) is the interconnect's other
alpha; the bytes cost the same (`python benchmarks/nccl_fit.py` fits alpha_ns and bw_eff on NCCL).
MoE layers under TP shard every expert's intermediate dimension (no expert parallelism), so
they communicate exactly as a dense MLP: one all-reduce after the expert sum. An MoE engine of dp
data-parallel ranks also exchanges tokens in every MoE layer (vLLM's default all-to-all backend,
allgather_reducescatter: all_gatherv of the ranks' hidden states and router logits, then a
reduce-scatter of the expert outputs; NCCL, not the custom kernel), each costing a gather's time.
"""

from __future__ import annotations

from llumverify.sim.catalog import Interconnect, Model


CUSTOM_AR_TP = (2, 4, 6, 8)  # the group sizes vLLM's custom all-reduce supports (_SUPPORTED_WORLD_SIZES)


def allreduce_alpha_ns(nbytes: float, tp: int, link: Interconnect) -> float:
    """The fixed time of an nbytes all-reduce: vLLM's custom kernel's below its size limit, NCCL's above."""
    return link.custom_alpha_ns if tp in CUSTOM_AR_TP and nbytes < link.custom_max_bytes else link.alpha_ns


def allreduce_wire_bytes(nbytes: float, tp: int) -> float:
    """The bytes a ring all-reduce of an nbytes buffer moves through each GPU's link."""
    return 2 * (tp - 1) / tp * nbytes


def allreduce_ns(nbytes: float, tp: int, link: Interconnect) -> float:
    """An all-reduce of an nbytes buffer over tp GPUs; 0 without TP."""
    if tp <= 1:
        return 0.0
    return allreduce_alpha_ns(nbytes, tp, link) + allreduce_wire_bytes(nbytes, tp) / (link.bw * link.bw_eff) * 1e9


def gather_ns(nbytes: float, tp: int, link: Interconnect) -> float:
    """A gather (or all-gather) of an nbytes result from tp equal shards; 0 without TP."""
    if tp <= 1:
        return 0.0
    return link.alpha_ns + (tp - 1) / tp * nbytes / (link.bw * link.bw_eff) * 1e9


def kernel_switch_tokens(model: Model, tp: int, link: Interconnect) -> tuple[int, ...]:
    """The last step size (tokens) whose all-reduces take vLLM's custom kernel and the first that takes
    NCCL, or () where one kernel takes all: knots of a step-cost table, so that interpolating between
    coarser knots does not smear the jump between the two fixed times over a range of step sizes."""
    if tp not in CUSTOM_AR_TP or not link.custom_max_bytes:
        return ()
    first = -(-link.custom_max_bytes // (model.hidden * model.dtype_bytes))
    return (first - 1, first)


def step_allreduce_ns(model: Model, tokens: int, tp: int, link: Interconnect) -> float:
    """The all-reduces of a step of `tokens` tokens: embedding plus two per layer."""
    return (2 * model.layers + 1) * allreduce_ns(tokens * model.hidden * model.dtype_bytes, tp, link)


def moe_exchange_ns(model: Model, tokens: int, dp: int, link: Interconnect) -> float:
    """The MoE layers' token exchange across dp data-parallel ranks in a step of `tokens` tokens per
    rank (every rank padded to it): per layer an all-gather of dp·T hidden states and router logits
    and a reduce-scatter of dp·T outputs; 0 for a dense model or one rank."""
    if not model.moe or dp <= 1:
        return 0.0
    rows = dp * tokens
    gathered = rows * (model.hidden + model.experts) * model.dtype_bytes
    return model.layers * (gather_ns(gathered, dp, link) + gather_ns(rows * model.hidden * model.dtype_bytes, dp, link))


def logits_gather_ns(model: Model, seqs: int, tp: int, link: Interconnect) -> float:
    """Gathering the vocab-sharded logits of `seqs` sequences."""
    return gather_ns(seqs * model.vocab * model.dtype_bytes, tp, link)
