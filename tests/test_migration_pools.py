"""Other traffic between a migration's actions cannot matter: a recorded migration is a model trace.

Before each action the simulator re-reads S's and D's free pools (`Migration._havoc`): other
requests took or returned blocks meanwhile, with no protocol action for it. The model's only
such actions are `d_oom` / `s_oom` (other load takes every free block). Here each recorded
migration is replayed from its own start with no other load at all (every block not the
request's is free) and `d_oom` inserted exactly where the recorded action's guard needs less
room: every guard holds, every state agrees with the recorded one outside the four pool fields,
and the steps are steps of the Z3 relation. So what the checker proves about model traces holds
for what the simulator did; the pool reads only decide, as `d_oom` can, whether D refuses.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_migration import toy_cluster
from test_migration_conformance import TOY_SCENARIOS
from test_pd import SHARED_LOAD, V1_PD, run

from llumverify.settings.config import ClusterConfig, FailureConfig, MigrationConfig, SimConfig
from llumverify.models.conformance import conforms
from llumverify.protocol import compiled
from llumverify.protocol.state import State, initial
from llumverify.protocol.variants import Variant, get_variant
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.migration import Transition
from llumverify.sim.workload import generate

POOLS = ("s_free", "s_other", "d_free", "d_other")


def _but_pools(s: State) -> dict[str, object]:
    return {k: x for k, x in s.as_dict().items() if k not in POOLS}


def model_trace(v: Variant, trace: list[Transition]) -> list[Transition]:
    """The recorded migration `trace` as a model trace without other load (see the docstring)."""
    actions = compiled.actions(v)
    start = trace[0][0]
    w = start.replace(s_free=start.s_cap - start.s_blocks, s_other=0, d_free=start.d_cap, d_other=0)
    assert initial(w) and v.pinned(w), w
    steps: list[Transition] = []
    for pre, name, post in trace:
        assert _but_pools(w) == _but_pools(pre), (name, w, pre)
        if not actions[name].guard(w, v):  # the simulator's pools refused: other load took D's room
            assert name == "d_alloc_refuse" and actions["d_oom"].guard(w, v), (name, w)
            steps.append((w, "d_oom", actions["d_oom"].effect(w, v)))
            w = steps[-1][2]
        assert actions[name].guard(w, v), (name, w)
        steps.append((w, name, actions[name].effect(w, v)))
        w = steps[-1][2]
        assert _but_pools(w) == _but_pools(post), (name, w, post)
    return steps


def _check(variant: str, traces: dict[int, list[Transition]]) -> set[str]:
    """Every recorded migration is a model trace whose steps conform; returns the actions seen."""
    v = get_variant(variant)
    steps = {step for trace in traces.values() for step in model_trace(v, trace)}
    assert [s for s in steps if not conforms(v, s[1], s[0], s[2])] == []
    return {name for _, name, _ in steps}


@pytest.mark.parametrize("variant", ["safe", *(pytest.param(v, marks=pytest.mark.slow) for v in ("ae", "v010", "head"))])
def test_recorded_migrations_are_model_traces_without_other_load(variant):
    names: set[str] = set()
    for rows, migrations, failures in TOY_SCENARIOS:
        c = toy_cluster(rows, *migrations, variant=variant, failures=failures)
        names |= _check(variant, c.migrations.traces)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=4), migration=MigrationConfig(variant=variant),
                    failures=FailureConfig(rate_per_hour=10.0, on_failure="redispatch", seed=3))
    real = Cluster(generate(500, 3.0, seed=3), get_policy("llumnix"), cfg, record=True)
    real.run()
    assert len(real.migrations.traces) > 20
    names |= _check(variant, real.migrations.traces)
    assert {"d_oom", "d_alloc_refuse", "crash_s", "crash_d", "decode"} <= names, names


def test_recorded_hand_offs_are_model_traces_without_other_load():
    cfg = replace(V1_PD, failures=FailureConfig(rate_per_hour=200.0, on_failure="redispatch", seed=1))
    cluster = run(SHARED_LOAD, cfg, policy="llumnix", record=True)
    assert len(cluster.handoffs.traces) > 100
    assert "d_commit" in _check(cfg.migration.pd_variant, cluster.handoffs.traces)
    _check(cfg.migration.variant, cluster.migrations.traces)
