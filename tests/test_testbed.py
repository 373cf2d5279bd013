"""The sourced testbed profile (issue #10) and the artifact's migration pairing in the cluster.

The profile's numbers and where they come from are in sim/costmodel.py (TESTBED_*) and
docs/simulator.md ("The testbed profile"); these tests pin the numbers, the published facts the
profile must keep, and that every experiment file selecting it uses the same numbers.
"""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from llumverify.config import ClusterConfig, CostConfig, SimConfig
from llumverify.errors import UserError
from llumverify.scheduler import pairing
from llumverify.sim import cluster as cluster_mod
from llumverify.sim.costmodel import (PUBLISHED_DECODE_MS, TESTBED_CLUSTER, TESTBED_COST, TESTBED_ENGINE, CostModel,
                                      calibration, profile_config)
from llumverify.sim.run import simulate
from llumverify.sim.workload import ARTIFACT_SEED, generate

ROOT = Path(__file__).resolve().parents[1]


def test_published_profile_is_the_default_configuration():
    assert profile_config("published") == SimConfig()


def test_testbed_profile_numbers():
    cfg = profile_config("testbed")
    assert cfg.engine.num_blocks == TESTBED_ENGINE["num_blocks"] == 792  # artifact's cache table at 12,000 tokens
    assert cfg.cost.decode_ns == TESTBED_COST["decode_ns"] == 33_500_000  # fitted to L-S 10 req/s, 47.6 ms
    assert cfg.cost.decode_ns_per_token == TESTBED_COST["decode_ns_per_token"] == 1_250  # fitted to L-L 3.0, 54.4 ms
    assert cfg.cluster.step_reports and TESTBED_CLUSTER == {"step_reports": True}  # the AE's report timing
    # everything else is the default
    assert cfg.cost == CostConfig(decode_ns=33_500_000, decode_ns_per_token=1_250)
    assert cfg.cluster == ClusterConfig(step_reports=True)
    assert cfg.engine.watermark_blocks == 7 and cfg.engine.max_num_batched_tokens == 12_800


def test_testbed_keeps_every_published_step_latency():
    published = calibration(CostModel(CostConfig()))
    testbed = calibration(CostModel(profile_config("testbed").cost))
    for (point, paper, default), (_, _, fitted) in zip(published, testbed):
        assert abs(fitted - paper) <= 0.10 * paper, point
        if point.startswith("prefill"):
            assert abs(fitted - default) < 0.01, point  # prefill is not refitted
    lo, hi = PUBLISHED_DECODE_MS
    assert lo <= testbed[-1][2] <= hi  # the two decode fits are checked against the published 8k-token step
    cost = CostModel(profile_config("testbed").cost)
    spread = cost.decode_ns(256, 8192) / cost.decode_ns(1, 8192)  # batch composition at 8k tokens (paper: up to 2.6x)
    assert 2.3 <= spread <= 2.6


def test_testbed_moves_cost_from_context_to_the_fixed_part():
    published, testbed = CostModel(CostConfig()), CostModel(profile_config("testbed").cost)
    # light load (3 sequences, 1,500 KV tokens): slower, which is what the L-S 10 req/s fit asks for
    assert testbed.decode_ns(3, 1_500) > published.decode_ns(3, 1_500) + 10_000_000
    # a full instance (792 blocks of KV): cheaper than the published split's 2.6 us a token
    assert testbed.decode_ns(30, 792 * 16) < published.decode_ns(30, 792 * 16) - 3_000_000


@pytest.mark.slow
@pytest.mark.parametrize("lengths, rate, paper_ms", [("L-S", 10.0, 47.6), ("L-L", 3.0, 54.4)])
def test_fitted_points_stay_fitted(lengths, rate, paper_ms):
    """The two decode latencies the profile is fitted to (benchmarks/testbed_fit.py), on the
    paper's own requests: an engine change that moves them must refit the profile."""
    specs = generate(10_000, rate, lengths=lengths, seed=ARTIFACT_SEED, stream="artifact")
    decode_ms = 1000 * simulate(specs, "least-loaded", profile_config("testbed")).summary["tpot_mean_s"]
    assert abs(decode_ms - (paper_ms + 0.5)) < 0.3, decode_ms  # + the artifact's whole-ms truncation


def test_unknown_profile_is_a_user_error():
    with pytest.raises(UserError, match="unknown cost profile"):
        profile_config("testbed-load")


def _testbed_sections(doc: dict) -> list[dict]:
    """Every place an experiment file sets the testbed numbers (top level or one workload)."""
    places = [doc] if "cost" in doc and "decode_ns" in doc["cost"] else []
    places += [w for w in doc.get("workload", []) if "decode_ns" in w.get("cost", {})]
    return places


@pytest.mark.parametrize("name", ["testbed-serving", "burst-ll", "burst-rules", "paper-serving", "paper-sample-path"])
def test_experiment_files_select_exactly_the_testbed_profile(name):
    doc = tomllib.loads((ROOT / "experiments" / f"{name}.toml").read_text())
    places = _testbed_sections(doc)
    assert places, f"{name}.toml selects no testbed profile"
    for place in places:
        engine = place.get("engine", doc.get("engine", {}))
        assert engine.get("num_blocks") == TESTBED_ENGINE["num_blocks"]
        for key, value in TESTBED_COST.items():
            assert place["cost"][key] == value, (name, key)
    # the profile's report timing, except in burst-ll's workloads that vary it on purpose
    profiled = [p for p in places if not p.get("name", "").endswith(("-exact", "-polled"))]
    assert profiled
    for place in profiled:
        assert place.get("cluster", doc.get("cluster", {})).get("step_reports") is True, name
    assert "testbed-load" not in (ROOT / "experiments" / f"{name}.toml").read_text().replace(
        '"testbed-load" profile', "")


def test_knee_scan_has_a_paper_knee_for_every_workload():
    spec = importlib.util.spec_from_file_location("knee_scan", ROOT / "benchmarks" / "knee_scan.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert set(mod.PAPER_KNEE) == set(mod.PAPER_TOP_RATE)


def test_testbed_light_load_decode_is_slower_than_published():
    specs = generate(300, 2.0, lengths="L-S", seed=1)
    two = ClusterConfig(num_instances=2)
    published = simulate(specs, "least-loaded", replace(SimConfig(), cluster=two)).summary["tpot_mean_s"]
    testbed = simulate(specs, "least-loaded", replace(profile_config("testbed"), cluster=two)).summary["tpot_mean_s"]
    assert testbed > published + 0.008


@pytest.mark.spies
def test_cluster_pairs_by_the_artifact_rule(monkeypatch):
    """Regression: the migration round pairs every instance and skips pairs touching a busy one
    (osdi24ae request_scheduler.py:530-545, llm_engine_manager.py:460-467), not HEAD's busy-first."""
    seen = []

    def spy(loads, threshold, busy_first=False):
        seen.append(busy_first)
        return pairing.pair_instances(loads, threshold, busy_first=busy_first)

    monkeypatch.setattr(cluster_mod, "pair_instances", spy)
    specs = generate(200, 6.0, lengths="L-L", seed=3)
    result = simulate(specs, "llumnix", SimConfig(cluster=ClusterConfig(num_instances=4)))
    assert seen and not any(seen)
    assert result.summary["finished"] + result.summary["rejected"] == 200
    # the rule itself: a busy freest destination keeps the most loaded source idle this round
    loads = [pairing.MigrationLoad(0, -5.0), pairing.MigrationLoad(1, 1.0),
             pairing.MigrationLoad(2, 80.0, migrating=True), pairing.MigrationLoad(3, 40.0)]
    assert pairing.pair_instances(loads, 3.0) == [(1, 3)]
    assert pairing.pair_instances(loads, 3.0, busy_first=True) == [(0, 3)]
