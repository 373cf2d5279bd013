"""Where a vllm-v1 run's step costs come from: one place for `--profile`, `--cost`, `--gpu/--model`.

Three sources, exactly one per run: a per-layer profile folder (sim/profile.py), a step-cost
TOML (as `llumverify calibrate` writes it), or first principles from the model and GPU catalogs
(sim/roofline.py). KV capacity follows the same choice: the catalog's model and GPU when given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llumverify.errors import UserError
from llumverify.sim.stepcost import StepCost


@dataclass(frozen=True)
class CostSource:
    """The user's choice of step-cost source (all None: the built-in published A10 fit)."""

    profile: Path | None = None
    cost: Path | None = None
    gpu: str | None = None
    model: str | None = None
    tp: int = 1

    def check(self) -> None:
        """Reject contradictory or incomplete choices before any work starts."""
        chosen = [name for name, v in (("--profile", self.profile), ("--cost", self.cost)) if v is not None]
        if self.gpu is not None or self.model is not None:
            if self.profile is None and (self.gpu is None or self.model is None):
                raise UserError("--gpu and --model go together (first principles needs both)")
            if self.cost is not None:
                raise UserError("--cost replaces --gpu/--model: give one source of step costs")
        if len(chosen) > 1:
            raise UserError(f"{' and '.join(chosen)}: give one source of step costs")
        if self.profile is not None and not (self.profile / "meta.yaml").is_file():
            raise UserError(f"--profile {self.profile}: not a profile folder (no meta.yaml)")
        if self.cost is not None and not self.cost.is_file():
            raise UserError(f"--cost {self.cost}: {'is a directory' if self.cost.is_dir() else 'file not found'}")
        if self.tp < 1:
            raise UserError(f"--tp must be >= 1, got {self.tp}")
        from llumverify.sim.catalog import get_gpu, get_model

        if self.model is not None:
            get_model(self.model)
        if self.gpu is not None:
            get_gpu(self.gpu)

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.profile, self.cost, self.gpu, self.model))

    def step_cost(self, fixed_ns: int | None = None) -> StepCost:
        """The StepCost this source gives (fixed_ns overrides the per-step engine constant)."""
        self.check()
        if self.cost is not None:
            from llumverify.sim.stepcost import load_step_cost

            cost = load_step_cost(self.cost)
        elif self.profile is not None:
            from llumverify.sim.catalog import get_model
            from llumverify.sim.profile import profile_meta, step_cost_from_profile

            name = self.model or profile_meta(self.profile).get("model", "")
            cost = step_cost_from_profile(self.profile, get_model(name).layers)
        elif self.gpu is not None and self.model is not None:
            from llumverify.sim.roofline import step_cost_first_principles

            cost = step_cost_first_principles(self.model, self.gpu, tp=self.tp)
        else:
            from llumverify.config import CostConfig
            from llumverify.sim.stepcost import from_cost_config

            cost = from_cost_config(CostConfig())
        if fixed_ns is not None:
            from dataclasses import replace

            cost = replace(cost, fixed_ns=fixed_ns)
        return cost

    def kv_blocks(self, gpu_memory_utilization: float = 0.9, block_size: int = 16) -> int | None:
        """KV blocks per instance from the catalogs when a GPU and model are named, else None."""
        if self.gpu is None or self.model is None:
            return None
        from llumverify.sim.roofline import kv_capacity_blocks

        return kv_capacity_blocks(self.model, self.gpu, tp=self.tp, gpu_memory_utilization=gpu_memory_utilization,
                                  block_size=block_size)
