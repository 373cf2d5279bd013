"""Tensor-parallel communication of one engine step: the alpha-beta model of each collective.

A tp-way group (vLLM's Megatron-style sharding: column-parallel qkv/gate_up, row-parallel
o/down, vocab-parallel embedding and lm_head) communicates, per step of T tokens and S sequences:
- one all-reduce of the T·hidden activations after the vocab-parallel embedding, and two per layer
  (after attention's o_proj and after the MLP's down_proj): (2·layers + 1) all-reduces;
- one gather of the S·vocab logits from the vocab shards (lm_head output) before sampling.
A collective over the interconnect of the GPU (sim/catalog/gpus.toml `[[interconnect]]`) costs
alpha_ns (launch, synchronisation) plus its bytes on the wire at bw·bw_eff: a ring all-reduce
moves 2·(tp−1)/tp of the buffer through each GPU's link, a gather (tp−1)/tp of it.
MoE layers under TP shard every expert's intermediate dimension (no expert parallelism), so
they communicate exactly as a dense MLP: one all-reduce after the expert sum.
"""

from __future__ import annotations

from llumverify.sim.catalog import Interconnect, Model


def allreduce_ns(nbytes: float, tp: int, link: Interconnect) -> float:
    """A ring all-reduce of an nbytes buffer over tp GPUs; 0 without TP."""
    if tp <= 1:
        return 0.0
    return link.alpha_ns + 2 * (tp - 1) / tp * nbytes / (link.bw * link.bw_eff) * 1e9


def gather_ns(nbytes: float, tp: int, link: Interconnect) -> float:
    """A gather (or all-gather) of an nbytes result from tp equal shards; 0 without TP."""
    if tp <= 1:
        return 0.0
    return link.alpha_ns + (tp - 1) / tp * nbytes / (link.bw * link.bw_eff) * 1e9


def step_allreduce_ns(model: Model, tokens: int, tp: int, link: Interconnect) -> float:
    """The all-reduces of a step of `tokens` tokens: embedding plus two per layer."""
    return (2 * model.layers + 1) * allreduce_ns(tokens * model.hidden * model.dtype_bytes, tp, link)


def logits_gather_ns(model: Model, seqs: int, tp: int, link: Interconnect) -> float:
    """Gathering the vocab-sharded logits of `seqs` sequences."""
    return gather_ns(seqs * model.vocab * model.dtype_bytes, tp, link)
