"""Engines by name: what the `generation` setting (`--engine`) picks, and what the rest of the
simulator needs to know of each, so that nothing else branches on an engine's name.

An engine is a class with the Instance interface (sim/instance.py): the cluster-facing API, and
the engine hooks it overrides where it schedules, times or accounts blocks differently
(docs/extending.md). Adding one takes a module holding the class and one `register` call; the
built-in engines are registered at the bottom of this file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llumverify.registry import Registry
from llumverify.settings.config import STEP_COST_SOURCES, CostConfig, SettingError, SimConfig
from llumverify.sim.engine_v1 import V1Instance, prefix_cache_metrics
from llumverify.sim.instance import Instance


@dataclass(frozen=True)
class Engine:
    """A registered engine.

    cls: built as cls(env, id, EngineConfig, cost, fast, on_finish, priorities), where cost is a
    StepCost if `step_costs`, else the paper's CostModel (sim/costmodel.py).
    step_costs: its steps are timed by a StepCost, which the hardware settings (GPU, model,
    profile, step-cost file) choose (sim/engine_profile.py); without them no hardware setting applies.
    chunked_prefill: a prompt may be split over steps, so only the KV cache bounds a sequence.
    prefix_caching: it has a prefix cache (the prefix_caching setting may turn it off).
    async_scheduling: it plans each step while the one before runs, as vLLM's async scheduler does
    (the async_scheduling setting may turn it off).
    spare_block: it can run vLLM 0.2's decode rule that keeps a free block for each running
    sequence at its turn (the engine.spare_block setting turns it on).
    output_token_cost: its decode steps are timed by the paper's CostModel, whose engine CPU time per
    output token (cost.cpu_ns_per_output_token) it charges.
    kb_per_request: memory per request for sim/run.py's estimate (None: the vllm-0.2 engine's, measured there).
    metrics: its own summary entries (registered in settings/metrics_registry.py), from its instances.
    """

    name: str
    cls: Callable[..., Instance]
    step_costs: bool = False
    chunked_prefill: bool = False
    prefix_caching: bool = False
    async_scheduling: bool = False
    spare_block: bool = False
    output_token_cost: bool = False
    kb_per_request: float | None = None
    metrics: Callable[[Sequence[Instance]], dict[str, object]] | None = None


ENGINES: Registry[Engine] = Registry("engine")


def register(engine: Engine) -> Engine:
    """Make `engine` available under its name (to the cluster, simulate's --engine, experiment files)."""
    return ENGINES.register(engine.name, engine)


def get_engine(name: str) -> Engine:
    """The engine called `name`; a SettingError naming the registered ones otherwise."""
    if name not in ENGINES:
        raise SettingError("EngineConfig", "generation", f"must be one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]


# CostConfig's step-time coefficients: what an engine without step costs (and vllm-v1 without hardware) times steps by
STEP_TIME_COSTS = ("prefill_ns_per_token", "prefill_ps_per_token_sq", "prefill_ns", "decode_ns_per_seq",
                   "decode_ns_per_token", "decode_ns", "cpu_ns_per_seq", "cpu_ns_per_output_token", "gap_ns")


def validate(cfg: SimConfig) -> None:
    """cfg.validate(), plus the rules only the registry knows: a known engine, and hardware settings
    or prefix_caching = false only for an engine that has step costs or a prefix cache."""
    cfg.validate()
    engine = get_engine(cfg.engine.generation)
    if (cfg.hardware.given and not engine.step_costs) or (not cfg.engine.prefix_caching and not engine.prefix_caching):
        able = [e.name for e in ENGINES.values() if e.step_costs and e.prefix_caching]
        raise SettingError("EngineConfig", "generation", f"must be {' or '.join(able)} for hardware settings "
                           f"({', '.join(STEP_COST_SOURCES)}) or prefix_caching = false, got {engine.name!r}")
    if not cfg.engine.async_scheduling and not engine.async_scheduling:
        able = [e.name for e in ENGINES.values() if e.async_scheduling]
        raise SettingError("EngineConfig", "async_scheduling", f"turns off {' and '.join(able)}'s async scheduling; "
                           f"engine {engine.name!r} has none (it plans each step when the one before ends)")
    if cfg.engine.spare_block and not engine.spare_block:
        able = [e.name for e in ENGINES.values() if e.spare_block]
        raise SettingError("EngineConfig", "spare_block", f"is vLLM 0.2's decode rule, which only "
                           f"{' and '.join(able)} runs; engine {engine.name!r} has its own")
    if engine.step_costs and cfg.hardware.given:
        timed = next((f for f in STEP_TIME_COSTS if getattr(cfg.cost, f) != getattr(CostConfig, f)), None)
        if timed:
            raise SettingError("CostConfig", timed, "times steps by the paper's A10 fit; with hardware step costs "
                               f"({', '.join(STEP_COST_SOURCES)}) those time every step: leave it out")
    if cfg.cost.cpu_ns_per_output_token and not engine.output_token_cost:
        able = [e.name for e in ENGINES.values() if e.output_token_cost]
        raise SettingError("CostConfig", "cpu_ns_per_output_token", f"is charged only by {' and '.join(able)}; "
                           f"engine {engine.name!r} times its steps otherwise")


# vllm-v1 runs are estimated as if every request were in flight at once (its budget was not honoured:
# 312 MB for 100 MB): `simulate --requests 50000 --rate 2000 --instances 1 --engine vllm-v1 --policy
# round-robin` peaks at 121,292 kB, 0.94 KB a request above the interpreter (2026-12-04, 2 shared
# cores). sim/run.py has the rest of the estimate.
register(Engine("vllm-0.2", Instance, spare_block=True, output_token_cost=True))
register(Engine("vllm-v1", V1Instance, step_costs=True, chunked_prefill=True, prefix_caching=True,
                async_scheduling=True, kb_per_request=1.0, metrics=prefix_cache_metrics))
