"""The migration trigger inside the simulator: a llumnix round is skipped (`_may_have_source`
false) only when no serving instance is a source by the rule, and every round that runs pairs
exactly as the intent predicate (models/intent.py `pairing_faults`) says, on the loads the
simulator really sees."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llumverify.settings.config import SimConfig
from llumverify.models.intent import pairing_faults
from llumverify.scheduler.policies import get_policy
from llumverify.scheduler.freeness import migration_freeness
from llumverify.scheduler.pairing import MigrationLoad, pair_instances
from llumverify.sim.cluster import Cluster
from llumverify.sim.workload import generate


def _rule_loads(c: Cluster) -> list[MigrationLoad]:
    head_only = c.cfg.scheduler.head_only_freeness
    busy = c.migrations.busy
    return [MigrationLoad(s.instance, migration_freeness(s, head_only), s.num_preempted > 0, s.instance in busy,
                          s.terminating) for s in c._snapshots(c._migration_roles)]


@pytest.mark.spies
def test_rounds_are_skipped_only_without_a_source_and_pair_as_the_rule_says(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"skipped": 0, "ran": 0, "paired": 0}
    wrong: list[str] = []
    real_may, real_round = Cluster._may_have_source, Cluster.migration_round

    def may(c: Cluster) -> bool:
        got = real_may(c)
        sources = [x.instance for x in _rule_loads(c) if x.terminating or x.has_preempted or x.freeness < c.threshold]
        if not got and sources:
            wrong.append(f"t={c.env.now}: round skipped though {sources} are sources")
        seen["skipped" if not got else "ran"] += 1
        return got

    def round_(c: Cluster) -> None:
        loads = _rule_loads(c)
        pairs = pair_instances(loads, c.threshold)
        for prop, faults in pairing_faults(loads, c.threshold, False, pairs).items():
            wrong.extend(f"t={c.env.now} {prop}: {f}" for f in faults)
        seen["paired"] += bool(pairs)
        real_round(c)

    monkeypatch.setattr(Cluster, "_may_have_source", may)
    monkeypatch.setattr(Cluster, "migration_round", round_)
    cfg = SimConfig(cluster=replace(SimConfig().cluster, num_instances=4))
    Cluster(generate(400, 9.5, seed=1), get_policy("llumnix"), cfg).run()
    assert wrong == []
    assert min(seen.values()) > 10, seen  # rounds skipped, rounds run, rounds that paired
