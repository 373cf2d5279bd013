"""How far a run's step costs are from real engines: the measured error `simulate` prints.

A user trusts the simulator only as far as it matches a real engine, so every run names the
measured error of its step-cost source (sim/fidelity.toml: one line per kind of source, each a
measurement in reports/validation/). A step-cost file carries its own (what `calibrate` wrote).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from llumverify.settings.config import SimConfig

FIDELITY_FILE = Path(__file__).with_name("fidelity.toml")
CONDITIONS = ("step_costs", "source", "vendor", "gpu", "weights", "moe", "tp8")


@dataclass(frozen=True)
class Case:
    """One kind of run (the conditions it matches) and the error measured for it."""

    when: tuple[tuple[str, object], ...]
    text: str
    report: str


@cache
def _file() -> dict:
    return tomllib.loads(FIDELITY_FILE.read_text(encoding="utf-8"))


@cache
def cases() -> tuple[Case, ...]:
    raw = _file()["case"]
    return tuple(Case(tuple((k, c[k]) for k in CONDITIONS if k in c), c["text"], c["report"]) for c in raw)


def facts(cfg: SimConfig) -> dict[str, object]:
    """The run's values of CONDITIONS: whether its engine prices steps from a step-cost source (the
    paper's engine does not), where its step costs come from, the GPU's vendor and catalog name,
    the weights' format (sim/quantization.py), whether the model is a mixture of experts and whether
    its TP degree is 8 or more (the last five for first principles only)."""
    from llumverify.sim.engines import get_engine

    hw = cfg.hardware
    source = ("cost-file" if hw.cost_file else "profile" if hw.profile
              else "first-principles" if hw.gpu and hw.model else "paper")
    out: dict[str, object] = {"step_costs": get_engine(cfg.engine.generation).step_costs, "source": source}
    if source == "first-principles":
        from llumverify.sim.catalog import get_gpu
        from llumverify.sim.engine_profile import served_model

        gpu, model = get_gpu(hw.gpu), served_model(hw.model, hw)
        out["vendor"], out["moe"], out["gpu"], out["weights"] = gpu.vendor, model.moe, gpu.name, model.weight_format
        out["tp8"] = hw.tp >= 8
        out["dequant"] = model.attention_slowdown != 1
    return out


def measured_error(cfg: SimConfig) -> str:
    """One line: the measured error of this run's step costs, and where it comes from; a run whose prefill
    steps have no CUDA graph (cudagraph_mode full_decode_only) adds what its CPU floor rests on, one whose fp8 KV
    cache FlashInfer's FA2 kernels read (attention_backend flashinfer-fa2) what their slowdown rests on."""
    have = facts(cfg)
    clauses = (("graphless", cfg.hardware.cudagraph_mode == "full_decode_only"), ("dequant", have.get("dequant", False)))
    extra = "".join("; " + _file()[key] for key, on in clauses if on and have["step_costs"])
    if have["source"] == "cost-file" and have["step_costs"]:
        from llumverify.sim.stepcost import load_step_cost

        own = load_step_cost(cfg.hardware.cost_file).error
        return (f"as fitted by `llumverify calibrate`: {own}" if own else "none recorded in the step-cost file") + extra
    case = next(c for c in cases() if all(have.get(k) == v for k, v in c.when))
    unmeasured = have["source"] == "first-principles" and have["gpu"] not in measured_gpus()
    first = f"no run on {have['gpu']} measured; on other GPUs: " if unmeasured else ""  # the caveat that applies, first
    return f"{first}{case.text} ({case.report})" + extra


@cache
def measured_gpus() -> frozenset[str]:
    """Catalog names of the GPUs some real measurement here was taken on (sim/fidelity.toml)."""
    return frozenset(_file()["measured_gpus"])
