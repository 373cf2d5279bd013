"""Autoscaling in the simulator: instances start after their start-up delay, a drained instance
leaves once empty (by migration under llumnix), and instance-seconds account for both."""

from __future__ import annotations

from llumverify.settings.config import AutoscaleConfig, ClusterConfig, SimConfig
from llumverify.requests import RequestSpec
from llumverify.scheduler.dispatch import Policy
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.workload import generate

FAST = dict(interval_s=1.0, startup_s=0.5)


def _run(policy: str, instances: int, specs, **auto) -> Cluster:
    cfg = SimConfig(cluster=ClusterConfig(num_instances=instances),
                    autoscale=AutoscaleConfig(enabled=True, **{**FAST, **auto}))
    cluster = Cluster(specs, get_policy(policy), cfg, keep_records=True)
    cluster.run()
    return cluster


def test_load_adds_instances_that_serve_only_after_start_up():
    c = _run("least-loaded", 1, generate(400, 12.0, seed=1), max_instances=4)
    added = c.instances[1:]
    assert 1 <= len(added) <= 3
    for inst in added:
        first = min((r.arrival_ns for r in c.records if r.instance == inst.id), default=None)
        assert first is None or first >= inst.born_ns + 500_000_000
    assert all(r.status == "finished" for r in c.records)


def test_idle_instances_are_drained_and_removed():
    specs = generate(300, 1.0, seed=2)
    for policy in ("least-loaded", "llumnix"):
        c = _run(policy, 4, specs, min_instances=1)
        assert sum(inst.gone_ns >= 0 for inst in c.instances) >= 2, policy
        seconds = c.instance_seconds()
        assert seconds < 4 * c.makespan_ns / 1e9 and all(r.status == "finished" for r in c.records)


def test_a_drained_instance_waits_for_its_migration_before_it_goes() -> None:
    """Scale-down under load: a draining source whose last request is paused for its migration's final stage is
    idle but still used; it goes only after the migration is done (session 32's mutant hunt removed it at once
    and lost the request on an abort path). Each run below meets that moment at least once."""
    for seed, rate in ((3, 1.5), (7, 1.5), (0, 4.0), (4, 4.0)):
        c = _run("llumnix", 4, generate(200, rate, seed=seed), min_instances=1, max_instances=6)
        assert c.removals_held >= 1, seed
        assert len(c.records) == 200 and all(r.status == "finished" for r in c.records), seed
        assert sum(inst.gone_ns >= 0 for inst in c.instances) >= 1, seed


TO_ZERO = Policy("to-zero", lambda snapshots, spec: 0)  # every request to instance 0: instance 1 only receives


def test_a_draining_destination_stays_until_its_migration_is_done() -> None:
    """Session 33's mutant hunt: `Migrations.uses` checking sources only (a drained destination removed while a
    migration still reserves blocks on it) passed every test, since none drained a destination. Here a forced
    migration 0 -> 1 is under way when instance 1 is drained: it must stay until that migration ends."""
    specs = generate(40, 50.0, seed=5)
    c = Cluster(specs, TO_ZERO, SimConfig(cluster=ClusterConfig(num_instances=2)), keep_records=True)
    c.schedule_migration(1_500_000_000, 0, 1)
    drained = []

    def drain(_ev: object) -> None:
        dst = c.instances[1]
        if dst.reserved and not dst.terminating and any(m.dst is dst for m in c.migrations.live):
            drained.append(c.env.now)
            c._drain(dst)
        else:
            c.env.timeout(10_000_000).callbacks.append(drain)
    c.env.timeout(1_500_000_000).callbacks.append(drain)
    c.run()
    assert drained and c.migrations.stats.committed >= 1 and c.removals_held >= 1
    assert len(c.records) == 40 and all(r.status == "finished" for r in c.records)


def test_a_draining_destination_left_empty_by_an_aborted_migration_goes_when_it_ends() -> None:
    """Guards `_migration_forgotten` looking at the destination too: instance 1 is drained at 113 ns holding only
    the reservation of a migration into it; the request finishes on S, the migration aborts and D frees the
    reservation at 128. Nothing is left on instance 1, so it goes then (no autoscaler would ever remove it)."""
    from dataclasses import replace

    from conftest import specs_of, toy_config
    from test_migration import MIG_COST

    from llumverify.settings.config import MigrationConfig

    cfg = replace(toy_config(num_blocks=16, instances=2, cost=MIG_COST),
                  migration=MigrationConfig(variant="safe", last_stage_blocks=1, rpc_timeout_s=1e-6, lease_s=2e-6,
                                            lease_check_s=1e-6))
    c = Cluster(specs_of((0.0, 6, 3), (500e-9, 6, 3)), get_policy("round-robin"), cfg, record=True, keep_records=True)
    c.schedule_migration(105, 0, 1)
    c.env.timeout(113).callbacks.append(lambda _ev: c._drain(c.instances[1]))
    c.run()
    assert [name for _, name, _ in c.migrations.transitions][-2:] == ["abort_src", "d_free_res"]
    assert c.removals_held == 1 and c.migrations.stats.aborted["finished"] == 1
    assert c.instances[1].gone_ns == 128
    assert [(r.status, r.instance) for r in c.records] == [("finished", 0), ("finished", 0)]


def test_a_source_emptied_by_migration_goes_when_its_last_migration_ends() -> None:
    """Session 38's open asymmetry: a draining instance whose last request finished went at once, one whose last
    request left by migration only at the autoscaler's next tick (never without an autoscaler). Here instance 0 is
    drained at 2 s with no autoscaler: it must go in every run, and in some runs after its last finish (the
    migration out, not a finish, emptied it)."""
    after_last_finish = 0
    for seed in range(6):
        c = Cluster(generate(60, 20.0, seed=seed), get_policy("llumnix"),
                    SimConfig(cluster=ClusterConfig(num_instances=2)), keep_records=True)
        c.env.timeout(2_000_000_000).callbacks.append(lambda _ev, c=c: c._drain(c.instances[0]))
        c.run()
        gone = c.instances[0].gone_ns
        assert gone >= 0, seed
        assert len(c.records) == 60 and all(r.status == "finished" for r in c.records), seed
        last = max(r.finish_ns for r in c.records if r.instance == 0)
        assert gone >= last, seed
        after_last_finish += gone > last and c.migrations.stats.committed > 0
    assert after_last_finish >= 1


def test_load_cancels_a_drain_before_starting_an_instance() -> None:
    """Hunt 3: the autoscaler passing `decide` the draining instances too (`active` not filtered)
    passed every test. A draining instance is no capacity: under load at the maximum, scaling up
    must cancel its drain (drains_to_cancel), so it serves again (requests reach it after the drain)."""
    specs = generate(400, 12.0, seed=1)
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2),
                    autoscale=AutoscaleConfig(enabled=True, **FAST, min_instances=1, max_instances=2))
    c = Cluster(specs, get_policy("least-loaded"), cfg, keep_records=True)
    drained = []

    def drain(_ev: object) -> None:
        drained.append(c.env.now)
        c._drain(c.instances[1])  # busy: it drains (not removed at once)
    c.env.timeout(1_200_000_000).callbacks.append(drain)
    c.run()
    assert drained and len(c.records) == 400 and all(r.status == "finished" for r in c.records)
    assert any(r.instance == 1 and r.arrival_ns > drained[0] for r in c.records)


def test_a_draining_instance_goes_when_its_last_request_finishes() -> None:
    """A request finishing on a draining instance removes it at once (Cluster._on_finish reads the instance it
    finished on, `req.instance`). A hunt's slip reading `req.at` (-1 once finished: the last instance) passed
    every test, as the victim is mostly the newest instance. Here the middle one drains (as after a cancelled
    drain of a newer one) with no autoscaler: with the slip it would never go (with one, at its next tick)."""
    specs = [RequestSpec(i, 0.0, 64, 40 + 20 * i) for i in range(3)]  # round robin: request i on instance i
    c = Cluster(specs, get_policy("round-robin"), SimConfig(cluster=ClusterConfig(num_instances=3)), keep_records=True)
    drained: list[int] = []

    def drain(_ev: object) -> None:
        assert len(c.instances[1].running) == 1  # busy: it drains, not removed at once
        drained.append(c.env.now)
        c._drain(c.instances[1])
    c.env.timeout(100_000_000).callbacks.append(drain)
    c.run()
    last = c.records[1]
    assert drained and all(r.status == "finished" and r.instance == r.id for r in c.records)
    assert last.finish_ns > drained[0] and [inst.gone_ns for inst in c.instances] == [-1, last.finish_ns, -1]
    assert c.instance_seconds() == (2 * c.makespan_ns + last.finish_ns) / 1e9
