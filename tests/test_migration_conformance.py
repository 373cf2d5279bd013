"""Conformance: every migration transition the simulator makes is a step of the Z3 transition
relation the checker proves things about (models/encoding.py, derived from the same actions).

The simulator enforces guards at run time; here its recorded (pre-state, action, post-state)
triples from real runs, with aborts, refusals, crashes, timeouts and leases, are replayed through
the symbolic relation of that action with the concrete values substituted
(`llumverify.models.conformance.conforms`, on the cached encoding of models/encoding.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from test_migration import toy_cluster

from llumverify.settings.config import ClusterConfig, FailureConfig, MigrationConfig, SimConfig
from llumverify.models.conformance import conforms
from llumverify.protocol.state import Pc, Req, State
from llumverify.protocol.variants import get_variant
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.workload import generate


def violations(variant: str, transitions: list[tuple[State, str, State]]) -> list[str]:
    """The transitions that are not steps of the Z3 relation of their action."""
    v = get_variant(variant)
    return [f"{name}: {pre} -> {post}" for pre, name, post in set(transitions) if not conforms(v, name, pre, post)]


def real_run(variant: str, seed: int) -> Cluster:
    """Llumnix on 4 instances near overload with random crashes (redispatch), recording transitions."""
    cfg = SimConfig(cluster=ClusterConfig(num_instances=4), migration=MigrationConfig(variant=variant),
                    failures=FailureConfig(rate_per_hour=10.0, on_failure="redispatch", seed=seed))
    cluster = Cluster(generate(500, 3.0, seed=seed), get_policy("llumnix"), cfg, record=True)
    cluster.run()
    return cluster


TOY_SCENARIOS = [
    ([(0.0, 6, 40), (0.0, 9, 30), (1e-8, 5, 25)], [(105, 0, 1), (300, 1, 0)], FailureConfig()),
    ([(0.0, 6, 3)], [(105, 0, 1)], FailureConfig()),
    ([(0.0, 6, 40), (0.0, 60, 4)], [(105, 0, 1)], FailureConfig()),
    ([(0.0, 6, 40)], [(105, 0, 1)], FailureConfig(at=((1, 110e-9),))),
    ([(0.0, 6, 40), (0.0, 7, 30)], [(105, 0, 1)], FailureConfig(at=((0, 106e-9),), on_failure="redispatch")),
    ([(0.0, 20, 40)], [(105, 0, 1)], FailureConfig(at=((0, 112e-9),))),
    ([(0.0, 20, 40)], [(105, 0, 1)], FailureConfig(at=((1, 125e-9),))),
    # S dies around the final grant (the AE's D posts its final receive there; test_migration.py)
    ([(0.0, 6, 40)], [(105, 0, 1)], FailureConfig(at=((0, 131e-9),))),
    ([(0.0, 6, 40)], [(105, 0, 1)], FailureConfig(at=((0, 133e-9),))),
]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["safe", "ae", "v010", "head"])
def test_simulated_transitions_are_steps_of_the_z3_relation(variant):
    transitions = []
    for rows, migrations, failures in TOY_SCENARIOS:
        transitions += toy_cluster(rows, *migrations, variant=variant, failures=failures).migrations.transitions
    real = real_run(variant, seed=3)
    transitions += real.migrations.transitions
    names = {name for _, name, _ in transitions}
    commit = {"d_commit", "s_commit_ok"} if variant != "ae" else {"d_copy"}  # the AE commits in stage 1's pull
    assert {"begin_final", "finish", "crash_s", "crash_d", "s_d_dead", "decode"} | commit <= names, names
    assert real.migrations.stats.committed > 20 and any(inst.dead for inst in real.instances)
    assert violations(variant, transitions) == []


def test_a_corrupted_transition_is_caught():
    transitions = toy_cluster([(0.0, 6, 40)], (105, 0, 1)).migrations.transitions
    pre, name, post = next(t for t in transitions if t[1] == "d_alloc_ok")
    assert violations("safe", [(pre, name, replace(post, d_res=post.d_res + 1))])
    assert violations("safe", [(pre, "d_alloc_refuse", post)])


def test_v010_preempts_a_migrating_request_only_while_a_stage_is_in_flight():
    """v0.1.0's stage boundaries are atomic (`atomic_stage_start`): its model has no preemption
    between stages (pc=STAGE), so the simulator must not take one there (its guard check would
    stop the run). Near overload S does preempt migrating requests: always during a
    pre-allocation or a copy, and every such step is one of the model's. Its post-copy check
    sees only the copy's preemptions (`stamped_abort_check`): the others make the next stage
    raise, and D keeps its reservation."""
    v010 = get_variant("v010")
    at: Counter[Pc] = Counter()
    ends: Counter[tuple[str, bool]] = Counter()
    for seed in range(3):
        cfg = SimConfig(cluster=ClusterConfig(num_instances=4), migration=MigrationConfig(variant="v010"))
        cluster = Cluster(generate(1500, 5.0, seed=seed), get_policy("llumnix"), cfg, record=True)
        cluster.run()
        for pre, name, post in cluster.migrations.transitions:
            if name == "preempt":
                assert conforms(v010, name, pre, post)
                at[Pc(pre.pc)] += 1
            if name in ("abort_src", "abort_src_raise") and pre.req == Req.WAITING:
                ends[name, bool(pre.late_preempt)] += 1
                assert post.m_free == (name == "abort_src")
    assert sum(at.values()) >= 10 and set(at) <= {Pc.ALLOC, Pc.COPY}, at
    assert ends[("abort_src", True)] and ends[("abort_src_raise", False)] and len(ends) == 2, ends
