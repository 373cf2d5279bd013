"""A one-GPU StepCost (a kernel profile, or a TOML fitted at tp=1) scaled to a tp-way group.

Profiles are measured on one GPU (`tp1/`), and a run may shard the model over several. Each
coefficient of the one-GPU StepCost is multiplied by the ratio first principles predict for the
same model and GPU between tp and 1 GPUs (sim/roofline.py without communication: the shard's
weights, heads, KV heads and vocab), point by point for the `linear` and `per_seq` tables, and
the step's collectives (sim/collectives.py: the interconnect's alpha-beta model) are added. So
what the profile measured (kernel efficiencies at these shapes) is kept, and what it cannot see
(smaller shards, communication) comes from the model. The per-step constant gains the TP group's
overhead (sim/efficiency.toml `tp_step_ns`).
"""

from __future__ import annotations

import dataclasses

from llumverify.errors import UserError
from llumverify.sim.catalog import get_gpu, get_model
from llumverify.sim.collectives import kernel_switch_tokens, logits_gather_ns, step_allreduce_ns
from llumverify.sim.roofline import step_cost_first_principles
from llumverify.sim.stepcost import Knots, StepCost, interpolate

SCALED = ("prefill_attn_ns", "prefill_attn_ps_per_token", "prefill_attn_fs_per_pair", "decode_attn_ns",
          "decode_attn_ns_per_seq", "decode_attn_ns_per_token", "prefill_attn_ps_per_ctx_token")


def _ratio(new: int, old: int) -> float:
    return new / old if old else 1.0


def _scale_knots(knots: Knots, one: StepCost, many: StepCost, table: str, extra, more: tuple[int, ...] = ()) -> Knots:
    """Each knot (and each of `more`, read off the one-GPU table) times the shard ratio, plus `extra`."""
    out = []
    for x in sorted({x for x, _ in knots} | set(more)):
        r = _ratio(interpolate(getattr(many, table), x), interpolate(getattr(one, table), x))
        out.append((x, round(interpolate(knots, x) * r + extra(x))))
    return tuple(out)


def scale_to_tp(cost: StepCost, tp: int) -> StepCost:
    """`cost` (one GPU, its gpu and model named and in the catalogs) for a tp-way group."""
    if tp == cost.tp:
        return cost
    if cost.tp != 1:
        raise UserError(f"step costs for tp={cost.tp} cannot be rescaled to tp={tp}: give one-GPU (tp=1) step costs")
    if not (cost.gpu and cost.model):
        raise UserError(f"scaling one-GPU step costs to tp={tp} needs their GPU and model (the step costs name "
                        f"gpu={cost.gpu!r}, model={cost.model!r})")
    model, gpu = get_model(cost.model), get_gpu(cost.gpu)
    one = step_cost_first_principles(model, gpu, tp=1, comm_terms=False)
    many = step_cost_first_principles(model, gpu, tp=tp, comm_terms=False)
    link = gpu.link
    coeffs = {name: round(getattr(cost, name) * _ratio(getattr(many, name), getattr(one, name))) for name in SCALED}
    # a batch-switched decode kernel (stepcost: decode_attn_v1_*) reads a shard's KV as the other one does, and
    # switches at tp times the decodes (its rule counts decodes x query heads on one GPU)
    coeffs["decode_attn_v1_ns_per_token"] = round(cost.decode_attn_v1_ns_per_token * _ratio(
        many.decode_attn_ns_per_token, one.decode_attn_ns_per_token))
    coeffs["decode_attn_v1_seqs"] = cost.decode_attn_v1_seqs * tp
    # a measured mixed-step surcharge (padded query rows' FLOPs) shrinks as a shard's pair FLOPs do, also on a
    # GPU whose first principles charge none (roofline.pads_mixed_decodes); its per-sequence part does not
    coeffs["mixed_decode_attn_ns_per_token"] = round(cost.mixed_decode_attn_ns_per_token * _ratio(
        many.prefill_attn_fs_per_pair, one.prefill_attn_fs_per_pair))
    scaled = dataclasses.replace(
        cost, tp=tp, **coeffs, fixed_ns=cost.fixed_ns + many.fixed_ns - one.fixed_ns,  # + the TP group's overhead
        linear=_scale_knots(cost.linear, one, many, "linear", lambda t: step_allreduce_ns(model, t, tp, link),
                            kernel_switch_tokens(model, tp, link)),
        per_seq=_scale_knots(cost.per_seq, one, many, "per_seq", lambda s: logits_gather_ns(model, s, tp, link)),
        source=(f"{cost.source}; scaled to tp={tp} by first-principles shard ratios and {link.name} collectives "
                "(sim/tensor_parallel.py)"))
    scaled.validate()
    return scaled
