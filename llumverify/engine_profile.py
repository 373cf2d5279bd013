"""Where a vllm-v1 run's step costs come from: HardwareConfig (config.py) turned into a StepCost.

Three sources, at most one per run: a per-layer profile folder (sim/profile.py), a step-cost
TOML (as `llumverify calibrate` writes it), or first principles from the model and GPU catalogs
(sim/roofline.py); none gives the published A10 fit. The CLI's --profile / --step-cost /
--gpu --model and an experiment file's [hardware] table fill the same HardwareConfig, and
`resolve` is the one place that reads it.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from llumverify.config import CostConfig, HardwareConfig, SimConfig
from llumverify.errors import UserError
from llumverify.sim.stepcost import StepCost


def check(hw: HardwareConfig) -> None:
    """Reject contradictory, incomplete or missing sources before any work starts."""
    hw.validate()
    if hw.profile and not (Path(hw.profile) / "meta.yaml").is_file():
        raise UserError(f"profile {hw.profile}: not a profile folder (no meta.yaml)")
    if hw.cost_file and not Path(hw.cost_file).is_file():
        raise UserError(f"step-cost file {hw.cost_file}: {'is a directory' if Path(hw.cost_file).is_dir() else 'file not found'}")
    from llumverify.sim.catalog import get_gpu, get_model

    if hw.model:
        get_model(hw.model)
    if hw.gpu:
        get_gpu(hw.gpu)


@functools.lru_cache(maxsize=64)
def step_cost(hw: HardwareConfig, fixed_ns: int | None = None) -> StepCost:
    """The StepCost this source gives (fixed_ns overrides the per-step engine constant)."""
    check(hw)
    if hw.cost_file:
        from llumverify.sim.stepcost import load_step_cost

        cost = load_step_cost(hw.cost_file)
    elif hw.profile:
        from llumverify.sim.catalog import get_model
        from llumverify.sim.profile import profile_meta, step_cost_from_profile

        name = hw.model or profile_meta(hw.profile).get("model", "")
        cost = step_cost_from_profile(hw.profile, get_model(name).layers)
    elif hw.gpu and hw.model:
        from llumverify.sim.roofline import step_cost_first_principles

        cost = step_cost_first_principles(hw.model, hw.gpu, tp=hw.tp)
    else:
        from llumverify.sim.stepcost import from_cost_config

        cost = from_cost_config(CostConfig())
    return cost if fixed_ns is None else dataclasses.replace(cost, fixed_ns=fixed_ns)


def kv_blocks(hw: HardwareConfig, block_size: int = 16) -> int | None:
    """KV blocks per instance from the catalogs when a GPU and model are named, else None."""
    if not (hw.gpu and hw.model and hw.kv_from_catalog):
        return None
    from llumverify.sim.roofline import kv_capacity_blocks

    return kv_capacity_blocks(hw.model, hw.gpu, tp=hw.tp, gpu_memory_utilization=hw.gpu_memory_utilization,
                              block_size=block_size)


def resolve(cfg: SimConfig) -> SimConfig:
    """`cfg` with its StepCost (and catalog KV capacity) filled in, for a vllm-v1 engine."""
    if cfg.engine.generation != "vllm-v1" or cfg.step is not None:
        return cfg
    blocks = kv_blocks(cfg.hardware, cfg.engine.block_size)
    engine = cfg.engine if blocks is None else dataclasses.replace(cfg.engine, num_blocks=blocks)
    step = step_cost(cfg.hardware)
    cost = cfg.cost
    kv = kv_bytes_per_token(cfg.hardware, step)
    if kv is not None:  # migrations and P/D hand-offs copy this model's KV, not LLaMA-7B's
        cost = dataclasses.replace(cost, kv_bytes_per_token=kv)
    return dataclasses.replace(cfg, engine=engine, cost=cost, step=step)


def kv_bytes_per_token(hw: HardwareConfig, step: StepCost) -> int | None:
    """KV bytes per token per instance of the model the step costs describe (None: not in the catalog)."""
    from llumverify.sim.catalog import get_model

    for name in (hw.model, step.model):
        if name:
            try:
                return get_model(name).kv_bytes_per_token(hw.tp)
            except UserError:
                continue
    return None
