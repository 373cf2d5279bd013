"""The simulator's migrations keep every property on every step, step predicates included.

The simulator's own audit checks the state predicates (`properties.safety.violated(state)`) of
the proved variants as it runs; the step predicates (at-most-once, what a commit may commit,
crash-stop) need the state before the step too, so they are checked here on the transitions a
recording run keeps, for `safe` (Llumnix rounds, with crashes) and `pd` (P/D hand-offs).
"""

from __future__ import annotations

from dataclasses import replace

from test_migration import toy_cluster
from test_migration_conformance import TOY_SCENARIOS, real_run
from test_pd import SHARED_LOAD, V1_PD, run

from llumverify.settings.config import FailureConfig
from llumverify.properties.safety import PROPERTIES, violated


def _broken(transitions):
    return [(name, violated(post, pre)) for pre, name, post in set(transitions)
            if violated(post, pre)]


def test_safe_migrations_keep_every_property_on_every_step():
    transitions = []
    for rows, migrations, failures in TOY_SCENARIOS:
        transitions += toy_cluster(rows, *migrations, variant="safe",
                                   failures=failures).migrations.transitions
    transitions += real_run("safe", seed=3).migrations.transitions
    assert {"d_commit", "crash_d", "s_d_dead"} <= {name for _, name, _ in transitions}
    assert any(p.step is not None for p in PROPERTIES.values())
    assert _broken(transitions) == []


def test_pd_hand_offs_keep_every_property_on_every_step():
    cfg = replace(V1_PD, failures=FailureConfig(rate_per_hour=200.0, on_failure="redispatch", seed=1))
    cluster = run(SHARED_LOAD, cfg, policy="llumnix", record=True)
    transitions = cluster.handoffs.transitions + cluster.migrations.transitions
    assert cluster.handoffs.stats.committed > 100
    assert _broken(transitions) == []
