"""The AE's load-report timing (ClusterConfig.step_reports, Instance.reported): a step's report is
computed when the step is scheduled and seen when the step ends, so the scheduler is one to two
steps behind, a dispatched request is invisible until the step that admitted it ends, and an idle
instance keeps its last report."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TOY_COST, run_both_paths, specs_of, toy_config

from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate
from llumverify.sim.waits import Environment

ENGINE = EngineConfig(num_blocks=16, block_size=4, watermark_frac=0.0)


def _instance(fast: bool) -> tuple[Environment, Instance]:
    env = Environment()
    inst = Instance(env, 0, ENGINE, CostModel(TOY_COST), fast)
    inst.enable_step_reports()
    return env, inst


@pytest.mark.parametrize("fast", [True, False], ids=["closed-form", "step-by-step"])
def test_a_request_is_invisible_until_the_step_that_admitted_it_ends(fast):
    env, inst = _instance(fast)
    inst.enqueue(Request(RequestSpec(0, 0.0, 6, 5), 0))  # prompt 6 tokens: 2 blocks; 5 output tokens
    # toy costs: prefill 0-100 ns, decode steps end at 110, 120, 130, 140 (the last token at 140)
    env.run(until=50)  # mid-prefill: the scheduler still holds the empty instance's report
    seen = inst.reported()
    assert (seen.num_running, seen.num_waiting, seen.free_blocks) == (0, 0, 16)
    assert inst.snapshot().num_running == 1  # the exact load knows better
    env.run(until=105)  # the prefill step ended at 100: its report was computed when it was scheduled
    seen = inst.reported()
    assert (seen.num_running, seen.free_blocks) == (1, 14)
    # decode step j writes the KV of token 6 + j: steps 1-2 fit in 2 blocks, steps 3-4 need a third
    env.run(until=125)  # step 3 in progress: step 2's report (scheduled at 110 with 2 blocks)
    assert inst.reported().free_blocks == 14 and inst.snapshot().free_blocks == 13
    env.run(until=135)  # step 4 in progress: step 3's report (scheduled at 120 with 3 blocks)
    assert inst.reported().free_blocks == 13
    env.run()
    # idle after the last step: the scheduler keeps that step's report (scheduled at 130, 3 blocks)
    seen = inst.reported()
    assert inst.snapshot().num_running == 0 and inst.snapshot().free_blocks == 16
    assert (seen.num_running, seen.free_blocks) == (1, 13)


def test_reports_inside_a_closed_form_run_equal_those_of_single_steps():
    """The closed-form run's report (the run's first with the steps' blocks off) against the
    step-by-step engine, where every step is a boundary, at every 3 ns of a long decode."""
    runs = []
    for fast in (True, False):
        env, inst = _instance(fast)
        inst.enqueue(Request(RequestSpec(0, 0.0, 3, 40), 0))
        inst.enqueue(Request(RequestSpec(1, 0.0, 5, 30), 0))
        seen = []
        for t in range(1, 520, 3):
            env.run(until=t)
            r = inst.reported()
            seen.append((r.num_running, r.num_waiting, r.free_blocks))
        runs.append(seen)
    assert runs[0] == runs[1]
    assert len(set(runs[0])) > 5  # the report moved through the run


def test_least_loaded_herds_onto_a_stale_report():
    """Three long prompts 1 ns apart on two idle instances: with exact loads they alternate; with
    per-step reports both instances still report empty while the first prefill runs, so the
    lowest-numbered instance takes all three."""
    specs = specs_of((0.0, 40, 2), (1e-9, 40, 2), (2e-9, 40, 2))
    cfg = toy_config(num_blocks=64, instances=2)
    exact = simulate(specs, "least-loaded", cfg, keep_records=True)
    stale = simulate(specs, "least-loaded", replace(cfg, cluster=replace(cfg.cluster, step_reports=True)),
                     keep_records=True)
    assert sorted(r.instance for r in exact.records) == [0, 0, 1]
    assert [r.instance for r in stale.records] == [0, 0, 0]


@pytest.mark.parametrize("generation", ["vllm-0.2", "vllm-v1"])
def test_step_reports_agree_between_the_engine_paths(tmp_path, generation):
    """Dispatch and migration decisions read the reports, so the closed-form and the step-by-step
    engine agree request by request only if their reports do (a busy 3-instance cluster that
    preempts and migrates)."""
    specs = generate(150, 10.0, lengths="M-M", seed=2)
    cfg = SimConfig(engine=EngineConfig(num_blocks=200, generation=generation),
                    cluster=ClusterConfig(num_instances=3, step_reports=True))
    fast, slow = run_both_paths(specs, "llumnix", cfg, tmp_path)
    assert fast == slow
    stale = simulate(specs, "llumnix", cfg, keep_records=True)
    assert stale.summary["migrations"] > 0 and stale.summary["preemptions"] > 0
    exact = simulate(specs, "llumnix", replace(cfg, cluster=ClusterConfig(num_instances=3)), keep_records=True)
    assert [r.instance for r in exact.records] != [r.instance for r in stale.records]


def test_step_reports_and_polling_are_refused_together():
    with pytest.raises(UserError, match=r"step_reports \(--step-reports\) and cluster.report_interval_s"):
        ClusterConfig(step_reports=True, report_interval_s=0.05).validate()
