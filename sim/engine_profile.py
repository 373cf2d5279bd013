"""Where a vllm-v1 run's step costs come from: HardwareConfig (config.py) turned into a StepCost.

Three sources, at most one per run: a per-layer profile folder (sim/profile.py), a step-cost
TOML (as `llumverify calibrate` writes it), or first principles from the model and GPU catalogs
(sim/roofline.py); none gives the published A10 fit. The CLI's --profile / --step-cost /
--gpu --model and an experiment file's [hardware] table fill the same HardwareConfig, and
`resolve` is the one place that reads it; the cluster calls it, so every run gets it. `tp` applies to every source: first principles shard
the model themselves; one-GPU profiles and TOMLs are scaled by sim/tensor_parallel.py. --gpu and
--model given with a profile or TOML must name what it was measured on.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from llumverify.settings.config import CostConfig, EngineConfig, HardwareConfig, SimConfig
from llumverify.errors import UserError, brief
from llumverify.files.inputs import MAX_SETTINGS_BYTES, not_a_loop, regular_file
from llumverify.sim.engines import ENGINES, get_engine
from llumverify.sim.lockstep import lockstep_ranks
from llumverify.sim.stepcost import StepCost, from_cost_config

if TYPE_CHECKING:
    from llumverify.sim.catalog import Model


def check_names(hw: HardwareConfig) -> None:
    """Reject a missing profile or step-cost file and names the catalogs do not know; a source may
    still be incomplete (a run's meta.json names its model and GPU: validate --gpu alone)."""
    if hw.profile and not (not_a_loop(Path(hw.profile), "profile") / "meta.yaml").is_file():
        raise UserError(f"profile {hw.profile}: not a profile folder (no meta.yaml)")
    if hw.cost_file:  # missing, a folder, a FIFO or a device: each said as such (a FIFO was "file not found")
        regular_file(not_a_loop(Path(hw.cost_file), "step-cost file"), "step-cost file", MAX_SETTINGS_BYTES)
    from llumverify.sim.catalog import get_gpu, get_model

    if hw.model:
        get_model(hw.model)
    if hw.gpu:
        get_gpu(hw.gpu)


def check(hw: HardwareConfig) -> None:
    """Reject contradictory, incomplete or missing sources before any work starts."""
    hw.validate()
    check_names(hw)
    from llumverify.sim.catalog import get_gpu, get_model

    named = get_model(hw.model) if hw.model and (hw.profile or hw.cost_file) else None
    if (hw.profile or hw.cost_file) and (hw.quantization or hw.kv_cache_dtype == "fp8" or named and (
            named.weight_format != "bf16" or named.kv_format == "fp8" and hw.kv_cache_dtype == "auto")):
        raise UserError("quantised weights or an fp8 KV cache (--quantization, --kv-cache-dtype, a checkpoint name "
                        "such as -FP8 or -AWQ, or a run that served them) are priced from first principles (--gpu "
                        "--model): a profile or step-cost file holds the 16-bit kernels it measured")
    if hw.attention_backend != "auto" and (hw.profile or hw.cost_file):
        raise UserError(f"--attention-backend {hw.attention_backend} prices how first principles (--gpu --model) read an "
                        "fp8 KV cache: a profile or step-cost file holds the kernels it measured")
    if hw.attention_backend != "auto" and hw.gpu and get_gpu(hw.gpu).vendor != "nvidia":
        raise UserError(f"--attention-backend {hw.attention_backend}: FlashInfer's kernels run on NVIDIA GPUs, not on "
                        f"{hw.gpu}")
    if hw.dp > 1 and (hw.profile or hw.cost_file) and not (hw.profile and hw.expert_parallel and hw.tp == 1):
        if get_model(hw.model or _source_model(hw)).moe:
            raise UserError("an MoE engine of several data-parallel ranks (dp > 1) takes a profile only with expert "
                            "parallelism at tp 1 (its moe.csv holds whole experts on one GPU); otherwise it is priced "
                            "from first principles (--gpu --model; a constant calibrate fitted: --fixed-ns)")
    if hw.profile:
        from llumverify.sim.profile import profile_meta

        meta = profile_meta(hw.profile)
        check_same(f"profile {hw.profile}", meta.get("hardware", ""), meta.get("model", ""), 1, hw, scalable=True)


def check_same(what: str, gpu: str, model: str, tp: int, want: HardwareConfig, scalable: bool = False) -> None:
    """Refuse step costs measured on another GPU, model or TP degree than `want` names (names
    compared through the catalogs; an empty name on either side is not compared). `scalable`:
    one-GPU step costs may serve any tp (sim/tensor_parallel.py scales them)."""
    from llumverify.sim.catalog import get_gpu, same_model

    if want.gpu and gpu and get_gpu(want.gpu).name != get_gpu(gpu).name:
        raise UserError(f"{what} was measured on {gpu}, not {want.gpu}")
    if want.model and model and not same_model(want.model, model):
        raise UserError(f"{what} is for {model}, not {want.model}")
    if want.tp != tp and not (scalable and tp == 1):
        raise UserError(f"{what} is for tp={tp}, not tp={want.tp} (only one-GPU step costs can be rescaled)")


@functools.lru_cache(maxsize=64)
def step_cost(hw: HardwareConfig, fixed_ns: int | None = None) -> StepCost:
    """The StepCost this source gives (fixed_ns overrides the per-step engine constant)."""
    check(hw)
    if hw.cost_file:
        from llumverify.sim.stepcost import load_step_cost

        cost = load_step_cost(hw.cost_file)
        check_same(f"step-cost file {hw.cost_file}", cost.gpu, cost.model, cost.tp, hw, scalable=True)
        # its engine's name, then how it ran ("vllm-v1 (vLLM 0.19.0, ...)"): another engine's would be run as ours
        named = cost.engine.split(" ", 1)[0]
        if named not in ENGINES or not get_engine(named).step_costs:
            timed = ", ".join(e.name for e in ENGINES.values() if e.step_costs)
            raise UserError(f"step-cost file {hw.cost_file}: engine {brief(cost.engine)} is not an engine timed by step "
                            f"costs ({timed}; its name first, then how it ran)")
        cost = _scaled(cost, hw.tp)
    elif hw.profile:
        from llumverify.sim.catalog import get_model
        from llumverify.sim.profile import profile_meta, step_cost_from_profile

        model = get_model(hw.model or profile_meta(hw.profile).get("model", ""))
        cost = _scaled(step_cost_from_profile(hw.profile, model.layers, routing=(model.experts, model.experts_per_token),
                                              ranks=hw.dp if model.moe else 1), hw.tp)
        if model.moe and hw.dp > 1:
            cost = _with_exchange(cost, model, hw.dp)
    elif hw.gpu and hw.model:
        from llumverify.sim.roofline import MoEGroup, step_cost_first_principles

        cost = step_cost_first_principles(served_model(hw.model, hw), hw.gpu, tp=hw.tp,
                                          group=MoEGroup(hw.dp, hw.expert_parallel))
    else:
        cost = from_cost_config(CostConfig())
    cost = with_graph_mode(with_sampling_of(cost, hw), hw)
    return cost if fixed_ns is None else dataclasses.replace(cost, fixed_ns=fixed_ns)


def with_sampling_of(cost: StepCost, hw: HardwareConfig) -> StepCost:
    """`cost` with hw.sampling's sampler on the served GPU and model (sim/sampling.py), whatever the cost source."""
    if hw.sampling == "greedy":
        return cost
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.roofline import load_efficiency
    from llumverify.sim.sampling import with_sampling

    gpu, model = hw.gpu or cost.gpu, hw.model or cost.model
    if not (gpu and model):
        raise UserError(f"--sampling {hw.sampling} is priced from the GPU and the model's vocabulary: give --gpu and "
                        "--model")
    return with_sampling(cost, hw.sampling, load_efficiency().topp_sort_ns, get_gpu(gpu), served_model(model, hw).vocab)


def with_graph_mode(cost: StepCost, hw: HardwareConfig) -> StepCost:
    """`cost` with the floor of hw.cudagraph_mode (sim/graphless.py), said in its source; only the mode sets it,
    so a step-cost file's own graphless_step_ns is replaced (calibrate writes 0)."""
    if hw.cudagraph_mode == "full_and_piecewise":
        return dataclasses.replace(cost, graphless_step_ns=0)
    from llumverify.sim.catalog import get_model
    from llumverify.sim.graphless import graphless_step_ns

    if not (hw.model or cost.model):
        raise UserError(f"--cudagraph-mode {hw.cudagraph_mode} needs the model's layer count: give --model")
    layers = get_model(hw.model or cost.model).layers
    floor = graphless_step_ns(hw.cudagraph_mode, layers)
    return dataclasses.replace(cost, graphless_step_ns=floor, source=(
        f"{cost.source}; a step with a prefill chunk lasts at least {floor / 1e6:.1f} ms ({layers} layers' CPU "
        f"launches without a CUDA graph, cudagraph_mode {hw.cudagraph_mode}: sim/graphless.py)"))


def _with_exchange(cost: StepCost, model: Model, dp: int) -> StepCost:
    """A profile's step costs plus the MoE layers' token exchange over dp ranks (sim/collectives.py)."""
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.collectives import moe_exchange_ns

    link = get_gpu(cost.gpu).link
    return dataclasses.replace(cost, linear=tuple((t, round(ns + moe_exchange_ns(model, t, dp, link))) for t, ns in cost.linear),
                               source=f"{cost.source}; {dp} expert-parallel ranks, {link.name} token exchange")


def _scaled(cost: StepCost, tp: int) -> StepCost:
    from llumverify.sim.tensor_parallel import scale_to_tp

    return scale_to_tp(cost, tp)


def _source_model(hw: HardwareConfig) -> str:
    """The model a profile or step-cost file names (the catalogs must know it)."""
    if hw.profile:
        from llumverify.sim.profile import profile_meta

        name = profile_meta(hw.profile).get("model", "")
    else:
        from llumverify.sim.stepcost import load_step_cost

        name = load_step_cost(hw.cost_file).model
    if not name:
        raise UserError(f"{hw.profile or hw.cost_file} names no model: give --model")
    return name


def gpu_and_model(hw: HardwareConfig) -> tuple[str, str]:
    """The GPU and model a source is for: --gpu/--model, else what its profile or TOML names."""
    gpu, model = hw.gpu, hw.model
    if not (gpu and model) and (hw.profile or hw.cost_file):
        step = step_cost(hw)
        gpu, model = gpu or step.gpu, model or step.model
    return gpu, model


def kv_blocks(hw: HardwareConfig, block_size: int = 16) -> int | None:
    """KV blocks per instance (memory × gpu_memory_utilization − weights − reserve, sim/roofline.py)
    for the GPU and model of the source; None without a source or with kv_from_catalog off."""
    if not (hw.given and hw.kv_from_catalog):
        return None
    gpu, model = gpu_and_model(hw)
    if not (gpu and model):
        raise UserError("cannot size the KV cache: the step costs name no GPU and model; give --gpu and --model")
    from llumverify.sim.roofline import MoEGroup, kv_capacity_blocks

    return kv_capacity_blocks(served_model(model, hw), gpu, tp=hw.tp, gpu_memory_utilization=hw.gpu_memory_utilization,
                              block_size=block_size, group=MoEGroup(hw.dp, hw.expert_parallel))


def served_model(model: str, hw: HardwareConfig) -> Model:
    """The catalog model as `hw` serves it: its weight and KV formats (sim/quantization.py)."""
    from llumverify.sim.catalog import get_model
    from llumverify.sim.quantization import with_formats

    return with_formats(get_model(model), hw.quantization, hw.kv_cache_dtype, hw.attention_backend)


def resolve(cfg: SimConfig) -> SimConfig:
    """`cfg` with its StepCost (and catalog KV capacity) filled in, for an engine timed by step costs
    (sim/engines.py; vllm-v1): from its
    hardware source, else from its CostConfig (the published A10 fit in the V1 step form). The
    cluster calls it (sim/cluster.py), so no caller can forget it; calling it again changes nothing."""
    if cfg.step is not None or not get_engine(cfg.engine.generation).step_costs:
        return cfg
    if not cfg.hardware.given:
        return dataclasses.replace(cfg, step=from_cost_config(cfg.cost))
    _refuse_unread_fp8(cfg.hardware)
    blocks = kv_blocks(cfg.hardware, cfg.engine.block_size)
    engine = cfg.engine if blocks is None else dataclasses.replace(cfg.engine, num_blocks=blocks)
    engine = serve_batch_limits(engine, cfg.hardware)
    step = step_cost(cfg.hardware)
    model = step.model or cfg.hardware.model
    ranks = lockstep_ranks(model, cfg.hardware.dp)
    if cfg.hardware.dp > 1 and ranks == 1:  # nothing would change: say so rather than ignore it
        raise UserError(f"hardware.dp (--dp) {cfg.hardware.dp}: {model or 'the model'} is not an MoE model; its "
                        "data-parallel ranks are independent engines: give --instances instead")
    if ranks > 1 and cfg.cluster.lockstep == 1:  # an MoE engine's data-parallel ranks step together
        cfg = dataclasses.replace(cfg, cluster=dataclasses.replace(cfg.cluster, lockstep=ranks))
    cost = cfg.cost
    kv = kv_bytes_per_token(cfg.hardware, step)
    if kv is not None:  # migrations and P/D hand-offs copy this model's KV, not LLaMA-7B's
        cost = dataclasses.replace(cost, kv_bytes_per_token=kv)
    return dataclasses.replace(cfg, engine=engine, cost=cost, step=step)


def _refuse_unread_fp8(hw: HardwareConfig) -> None:
    """First principles price an fp8 KV cache under attention backend "auto" as kernels that read fp8 (FlashAttention 3,
    FlashInfer's TRT-LLM kernels): on an NVIDIA GPU that has none, vLLM serves it with FLASHINFER, whose own kernels
    dequantise it. For what simulate, sweep and goodput configure; validate decides a run's backend from its record
    (validation/attention_backend.replayed_backend, which refuses such a run that records none)."""
    if not (hw.gpu and hw.model) or hw.profile or hw.cost_file or hw.attention_backend != "auto":
        return
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.quantization import reads_fp8

    gpu = get_gpu(hw.gpu)
    if not reads_fp8(gpu.arch) and served_model(hw.model, hw).kv_format == "fp8":
        raise UserError(f"an fp8 KV cache on {gpu.name} ({gpu.arch}) with hardware.attention_backend (--attention-backend) "
                        "auto: vLLM has no kernels that read fp8 there (FlashAttention 3 is Hopper's, the TRT-LLM ones the "
                        "B200 family's) and serves it with FLASHINFER, whose own kernels dequantise it: give flashinfer-fa2")


def serve_batch_limits(engine: EngineConfig, hw: HardwareConfig) -> EngineConfig:
    """A vllm-v1 engine on a catalog GPU: the batch limits not given are `vllm serve`'s for that GPU
    (sim/engine_v1.py vllm_serve_defaults); without a known GPU they stay the paper's (batch_limits)."""
    if engine.max_num_seqs is not None and engine.max_num_batched_tokens is not None:
        return engine
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.engine_v1 import vllm_serve_defaults

    gpu_name, _ = gpu_and_model(hw)
    try:
        gpu = get_gpu(gpu_name) if gpu_name else None
    except UserError:
        gpu = None
    if gpu is None:
        return engine
    tokens, seqs = vllm_serve_defaults(gpu.name, gpu.usable_memory_bytes)
    return dataclasses.replace(engine, max_num_seqs=seqs if engine.max_num_seqs is None else engine.max_num_seqs,
                               max_num_batched_tokens=(tokens if engine.max_num_batched_tokens is None
                                                       else engine.max_num_batched_tokens))


def kv_bytes_per_token(hw: HardwareConfig, step: StepCost) -> int | None:
    """KV bytes per token on one GPU of the instance's TP group, in the KV format it serves (an fp8 cache
    moves half the bytes of a 16-bit one), of the model the step costs describe (None: not in the catalog).
    A migration's time is one GPU's shard over its link: each GPU of the group sends its own."""
    for name in (hw.model, step.model):
        if name:
            try:
                return served_model(name, hw).kv_bytes_per_token(hw.tp)
            except UserError:
                continue
    return None
