"""Differentiated SLOs: each priority class is judged against its own targets, in one place
(sim/metrics.py via SLOConfig.targets); unset high-class targets reproduce the single-SLO result."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import specs_of, toy_config

from llumverify.settings.config import ClusterConfig, SimConfig, SLOConfig
from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment
from llumverify.study.report import finding
from llumverify.requests import HIGH, NORMAL, RequestSpec
from llumverify.study.results import load_results
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

ROOT = Path(__file__).resolve().parents[1]

# Alone on the toy engine every request has TTFT 100 ns and TPOT 10 ns (one output token: no TPOT);
# request 2's prompt exceeds the 64-token KV capacity, so it is rejected and violates any SLO.
HAND = [RequestSpec(0, 0.0, 5, 4, HIGH), RequestSpec(1, 1.0, 5, 1, HIGH), RequestSpec(2, 2.0, 100, 4, HIGH),
        RequestSpec(3, 3.0, 5, 4, NORMAL), RequestSpec(4, 4.0, 5, 4, NORMAL)]
LOOSE = 1.0  # s: far above every latency of the hand-built run


def _slo_rates(slo: SLOConfig) -> dict[str, object]:
    s = simulate(HAND, "least-loaded", replace(toy_config(), slo=slo)).summary
    return {k: v for k, v in s.items() if k.startswith("slo_")}


@pytest.mark.parametrize("slo, expected", [
    # high per-token target 5 ns: request 0 (TPOT 10 ns) misses it; request 1 has no TPOT
    (SLOConfig(ttft_s=LOOSE, per_token_s=LOOSE, high_ttft_s=LOOSE, high_per_token_s=5e-9),
     {"_high": (2 / 3, 0.0, 1 / 3), "_normal": (0.0, 0.0, 0.0), "": (2 / 5, 0.0, 1 / 5)}),
    # high TTFT target 50 ns: both finished high requests miss it
    (SLOConfig(ttft_s=LOOSE, per_token_s=LOOSE, high_ttft_s=50e-9),
     {"_high": (1.0, 2 / 3, 0.0), "_normal": (0.0, 0.0, 0.0), "": (3 / 5, 2 / 5, 0.0)}),
    # tight normal targets, loose high ones: only the normal class misses (both targets)
    (SLOConfig(ttft_s=50e-9, per_token_s=5e-9, high_ttft_s=LOOSE, high_per_token_s=LOOSE),
     {"_high": (1 / 3, 0.0, 0.0), "_normal": (1.0, 1.0, 1.0), "": (3 / 5, 2 / 5, 2 / 5)}),
])
def test_each_class_is_judged_against_its_own_targets(slo, expected):
    rates = _slo_rates(slo)
    for suffix, (violation, ttft_miss, tpot_miss) in expected.items():
        assert rates[f"slo_violation_rate{suffix}"] == pytest.approx(violation)
        assert rates[f"slo_ttft_miss_rate{suffix}"] == pytest.approx(ttft_miss)
        assert rates[f"slo_tpot_miss_rate{suffix}"] == pytest.approx(tpot_miss)


def test_a_latency_exactly_at_its_target_meets_it():
    """A miss is a latency over the target (TTFT > the TTFT target, per-token > the per-token one):
    targets set to the run's own latencies are met, and the next float below them is missed."""
    specs = specs_of((0.0, 5, 4), (1e-6, 5, 4))  # each alone: the same TTFT and TPOT
    measured = simulate(specs, "least-loaded", toy_config()).summary
    ttft, tpot = measured["ttft_p99_s"], measured["tpot_p99_s"]
    assert measured["ttft_p50_s"] == ttft and measured["tpot_p50_s"] == tpot

    def rates(ttft_s: float, per_token_s: float) -> tuple[object, object, object]:
        slo = SLOConfig(ttft_s=ttft_s, per_token_s=per_token_s)
        s = simulate(specs, "least-loaded", replace(toy_config(), slo=slo)).summary
        return s["slo_violation_rate"], s["slo_ttft_miss_rate"], s["slo_tpot_miss_rate"]

    assert rates(ttft, tpot) == (0.0, 0.0, 0.0)
    assert rates(math.nextafter(ttft, 0.0), tpot) == (1.0, 1.0, 0.0)
    assert rates(ttft, math.nextafter(tpot, 0.0)) == (1.0, 0.0, 1.0)


def _old_single_slo_rate(records, slo: SLOConfig) -> float:
    """The violation rate as computed before per-class targets existed (one pair for everyone)."""
    bad = 0
    for r in records:
        if r.status != "finished":
            bad += 1
            continue
        ttft = (r.first_token_ns - r.arrival_ns) / 1e9
        tpot = (r.finish_ns - r.first_token_ns) / (r.output - 1) / 1e9 if r.output >= 2 else 0.0
        bad += ttft > slo.ttft_s or tpot > slo.per_token_s
    return bad / len(records)


def test_unset_high_targets_reproduce_the_single_slo_result():
    specs = generate(300, 40.0, lengths="S-S", arrival="gamma", cv=4.0, seed=3, high_priority_frac=0.2)
    slo = SLOConfig(ttft_s=0.3, per_token_s=0.05)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), slo=slo)
    res = simulate(specs, "least-loaded", cfg, keep_records=True)
    s = res.summary
    assert 0 < s["slo_violation_rate"] < 1  # the check below is not vacuous
    assert s["slo_violation_rate"] == _old_single_slo_rate(res.records, slo)
    explicit = replace(cfg, slo=replace(slo, high_ttft_s=0.3, high_per_token_s=0.05))
    assert simulate(specs, "least-loaded", explicit).summary == s
    n_high = sum(r.priority == HIGH for r in specs)
    total = s["slo_violation_rate_high"] * n_high + s["slo_violation_rate_normal"] * (len(specs) - n_high)
    assert total == pytest.approx(s["slo_violation_rate"] * len(specs))


@pytest.mark.parametrize("kwargs", [{"high_ttft_s": 0.0}, {"high_per_token_s": -0.1}, {"high_ttft_s": "fast"},
                                    {"high_per_token_s": True}])
def test_bad_class_targets_are_one_line_errors(kwargs):
    with pytest.raises(UserError) as err:
        SLOConfig(**kwargs).validate()
    name = next(iter(kwargs))
    assert f"SLOConfig.{name} must be a finite number > 0 (or unset)" in str(err.value) and "\n" not in str(err.value)


def test_bad_class_target_in_an_experiment_file_names_the_file(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text('[slo]\nhigh_ttft_s = -1.0\n[[workload]]\nlengths = "S-S"\nrate = 1.0\n')
    with pytest.raises(UserError, match=r"bad\.toml: slo\.high_ttft_s: must be a finite number > 0 \(or unset\), got -1\.0") as err:
        load_experiment(path)
    assert "\n" not in str(err.value)


def test_class_rates_are_deterministic():
    specs = generate(200, 30.0, lengths="S-S", arrival="gamma", cv=4.0, seed=5, high_priority_frac=0.1)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), slo=SLOConfig(high_ttft_s=0.2, high_per_token_s=0.05))
    first, second = (simulate(specs, "least-loaded", cfg).summary for _ in range(2))
    assert first == second
    assert all(np.isfinite(first[f"slo_violation_rate{s}"]) for s in ("", "_high", "_normal"))


def test_the_experiment_sets_class_targets_and_its_finding_fills_from_the_committed_results():
    exp = load_experiment(ROOT / "experiments" / "slo-classes.toml")
    assert exp.config.slo.targets(True) == (1.0, 0.1) and exp.config.slo.targets(False) == (10.0, 0.2)
    doc = load_results(ROOT / "results" / "slo-classes")
    text = finding(doc["experiment"], doc["aggregates"])  # type: ignore[arg-type]
    assert "{" not in text and "%" in text
