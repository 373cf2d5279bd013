"""The closed-form decode runs give exactly the requests of the step-by-step engine, and random
small workloads never trip an audit (the audits run inside every simulation)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import run_both_paths, specs_of, toy_config
from hypothesis import given, settings
from hypothesis import strategies as st

from llumverify.settings.config import (AutoscaleConfig, ClusterConfig, CostConfig, EngineConfig, FailureConfig,
                               MigrationConfig, SimConfig)
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

# small but not round coefficients, so step times are a non-trivial arithmetic progression
ODD_COST = CostConfig(prefill_ns_per_token=3, prefill_ps_per_token_sq=1500, prefill_ns=50, decode_ns_per_seq=7,
                      decode_ns_per_token=2, decode_ns=31, gap_ns=4)
TWO = SimConfig(cluster=ClusterConfig(num_instances=2))
FOUR = SimConfig(cluster=ClusterConfig(num_instances=4))
PREEMPTING = generate(400, 4.0, seed=5)


@pytest.mark.parametrize("name, specs, cfg, policy", [
    ("sharegpt near saturation", generate(1500, 7.5, seed=3), SimConfig(), "least-loaded"),
    ("sharegpt round-robin", generate(1500, 7.5, seed=4), SimConfig(), "round-robin"),
    ("M-M overloaded on 4 instances", generate(800, 12.0, lengths="M-M", seed=5), FOUR, "least-loaded"),
    ("sharegpt overloaded on 2 instances (preemption-heavy)", PREEMPTING, TWO, "least-loaded"),
    ("L-L bursty (gamma cv 4)", generate(600, 3.0, lengths="L-L", arrival="gamma", cv=4.0, seed=6),
     SimConfig(), "round-robin"),
    ("stale 50 ms load reports", generate(1000, 7.5, seed=7),
     SimConfig(cluster=ClusterConfig(report_interval_s=0.05)), "least-loaded"),
    ("llumnix migrating on M-M", generate(800, 12.0, lengths="M-M", seed=5), FOUR, "llumnix"),
    ("llumnix, ae protocol, 2 instances preempting", PREEMPTING, replace(TWO, migration=MigrationConfig(variant="ae")),
     "llumnix"),
    ("llumnix, the testbed's spare block, ae protocol, shared copies and step reports, 4 instances", PREEMPTING,
     replace(FOUR, engine=EngineConfig(spare_block=True), migration=MigrationConfig(variant="ae", shared_copies=True),
             cluster=ClusterConfig(num_instances=4, step_reports=True)), "llumnix"),
    ("llumnix, engine CPU time per output token, migrating on M-M", generate(800, 12.0, lengths="M-M", seed=5),
     replace(FOUR, cost=replace(FOUR.cost, cpu_ns_per_output_token=250)), "llumnix"),
    ("llumnix with crashes, redispatch, autoscaling and priorities",
     generate(600, 9.0, seed=8, high_priority_frac=0.1),
     replace(FOUR, failures=FailureConfig(at=((1, 20.0),), rate_per_hour=20.0, on_failure="redispatch"),
             autoscale=AutoscaleConfig(enabled=True, interval_s=2.0, startup_s=1.0, max_instances=6)), "llumnix"),
])
@pytest.mark.slow
def test_fast_path_equals_step_path(tmp_path, name, specs, cfg, policy):
    fast, slow = run_both_paths(specs, policy, cfg, tmp_path)
    assert fast == slow, name


def test_the_preemption_heavy_workload_preempts():
    assert simulate(PREEMPTING, "least-loaded", TWO).summary["preemptions"] > 300


rows = st.lists(
    st.tuples(st.sampled_from([0.0, 0.0, 1e-8, 3e-7, 2e-6]),  # gaps: bursts of zero gaps, mid-step, later
              st.integers(1, 60), st.sampled_from([1, 1, 2, 5, 17, 40])),
    min_size=1, max_size=25,
)


@settings(max_examples=60)
@given(rows=rows, blocks=st.integers(4, 24), watermark=st.sampled_from([0.0, 0.1]),
       max_seqs=st.integers(1, 6), max_tokens=st.sampled_from([16, 64, 12_800]), instances=st.integers(1, 3),
       policy=st.sampled_from(["round-robin", "least-loaded", "llumnix"]), report=st.sampled_from([0.0, 1e-7]),
       spare=st.sampled_from([0, 1]))
def test_random_small_workloads_keep_the_audits_and_paths_agree(tmp_path_factory, rows, blocks, watermark, max_seqs,
                                                                max_tokens, instances, policy, report, spare):
    t, timed = 0.0, []
    for gap, prompt, output in rows:
        t += gap
        timed.append((t, prompt, output))
    cfg = toy_config(num_blocks=blocks, watermark_frac=watermark, max_num_seqs=max_seqs,
                     max_num_batched_tokens=max_tokens, instances=instances, cost=ODD_COST,
                     report_interval_s=report)
    cfg = replace(cfg, engine=replace(cfg.engine, spare_block=bool(spare)))
    fast, slow = run_both_paths(specs_of(*timed), policy, cfg, tmp_path_factory.mktemp("csv"))
    assert fast == slow
    assert fast.count(b"\n") == len(rows) + 1
