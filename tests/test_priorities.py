"""Two priority classes: high-priority requests queue first, per-class metrics, and switching
priorities off removes the penalty, the headroom and the queue order."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import TOY_COST

from llumverify.settings.config import ClusterConfig, EngineConfig, SchedulerConfig, SimConfig
from llumverify.requests import HIGH, NORMAL, RequestSpec
from llumverify.scheduler.freeness import migration_freeness
from llumverify.sim.costmodel import CostModel
from llumverify.sim.instance import Instance, Request
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate
from llumverify.sim.waits import Environment


def _instance(priorities: bool) -> Instance:
    engine = EngineConfig(num_blocks=8, block_size=4, watermark_frac=0.0)
    return Instance(Environment(), 0, engine, CostModel(TOY_COST), priorities=priorities)


@pytest.mark.parametrize("priorities, order", [(True, [2, 3, 0, 1]), (False, [0, 1, 2, 3])])
def test_high_priority_requests_queue_ahead_of_normal_ones(priorities, order):
    inst = _instance(priorities)
    inst.reserve(8)  # nothing can be admitted: the queue order is what we see
    for rid, prio in enumerate((NORMAL, NORMAL, HIGH, HIGH)):
        inst.enqueue(Request(RequestSpec(rid, 0.0, 4, 4, prio), 0))
    assert [r.id for r in inst.waiting] == order
    snap = inst.snapshot()
    assert snap.hosts_priority is priorities
    headroom = migration_freeness(snap) - migration_freeness(snap._replace(hosts_priority=False))
    assert headroom == (-(8 - 100) if priorities else 0)  # T - 100 blocks of headroom when hosting one


def test_metrics_split_by_class_only_when_there_are_two():
    specs = generate(300, 20.0, lengths="S-S", seed=2, high_priority_frac=0.1)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2))
    s = simulate(specs, "llumnix", cfg).summary
    assert {"ttft_p99_s_high", "ttft_p99_s_normal", "e2e_mean_s_high", "tpot_p99_s_normal"} <= set(s)
    assert "ttft_p99_s_high" not in simulate(generate(50, 5.0, seed=2), "least-loaded", cfg).summary


def test_switching_priorities_off_changes_only_the_scheduling():
    specs = generate(400, 30.0, lengths="S-S", arrival="gamma", cv=4.0, seed=1, high_priority_frac=0.1)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=4))
    on = simulate(specs, "llumnix", cfg).summary
    off = simulate(specs, "llumnix", replace(cfg, scheduler=SchedulerConfig(priorities=False))).summary
    assert on["finished"] == off["finished"] == 400
    assert on["ttft_mean_s_high"] <= off["ttft_mean_s_high"]
