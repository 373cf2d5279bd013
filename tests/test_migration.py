"""Live migration in the simulator: hand-sized migrations through every ending (commit, finish,
preemption, refusal, crashes, timeouts), the same on both execution paths, calibrated costs, and
the micro-benchmark command."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import TOY_COST, specs_of, toy_config

from llumverify.cli.migrate_bench import migrate_bench
from llumverify.sim.microbench import measure
from llumverify.settings.config import FailureConfig, MigrationConfig, SimConfig, SLOConfig
from llumverify.models.conformance import conforms
from llumverify.protocol.variants import get_variant
from llumverify.protocol.state import Mig
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.metrics import summarize

# blocks of 4 tokens x 1 byte: 32 bits = 8 ns per block at 4 Gb/s; RPCs 4 ns round trip
MIG_COST = replace(TOY_COST, kv_bytes_per_token=1, bandwidth_bps=4_000_000_000, rpc_ns=4)


def toy_cluster(rows, *migrations: tuple[int, int, int], fast: bool = True, variant: str = "safe",
                failures: FailureConfig = FailureConfig(), num_blocks: int = 16, policy: str = "round-robin",
                instances: int = 2) -> Cluster:
    cfg = replace(toy_config(num_blocks=num_blocks, instances=instances, cost=MIG_COST, fast=fast),
                  migration=MigrationConfig(variant=variant, last_stage_blocks=1, rpc_timeout_s=1e-6, lease_s=2e-6, lease_check_s=1e-6),
                  failures=failures)
    cluster = Cluster(specs_of(*rows), get_policy(policy), cfg, record=True, keep_records=True)
    for t, src, dst in migrations:
        cluster.schedule_migration(t, src, dst)
    cluster.run()
    return cluster


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
def test_a_migration_moves_the_request_and_its_blocks(fast):
    # request 0 (6 tokens, 40 out) on instance 0; prefill ends at 100, then decode steps of 10 ns
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), fast=fast)
    req = c.records[0]
    assert req.status == "finished" and req.migrations == 1 and req.instance == 1
    assert c.migrations.stats.committed == 1 and 0 < req.downtime_ns < 40
    assert [name for _, name, _ in c.migrations.transitions if not name.startswith("decode")][:3] == \
        ["begin_stage", "d_alloc_ok", "s_alloc_ok"]
    assert c.migrations.transitions[-1][2].status == Mig.FINISHED
    for inst in c.instances:
        assert inst.free == inst.capacity and inst.reserved == 0


def test_both_paths_write_the_same_timeline():
    rows = [(0.0, 6, 40), (0.0, 9, 30), (1e-8, 5, 25)]
    runs = [toy_cluster(rows, (105, 0, 1), (300, 1, 0), fast=f) for f in (True, False)]
    a, b = ([(r.id, r.instance, r.finish_ns, r.migrations, r.downtime_ns) for r in c.records] for c in runs)
    assert a == b and sum(r[3] for r in a) >= 1


def _copied_bytes(c: Cluster) -> int:
    """KV bytes of the stages D pulled (a failed pull moves nothing): blocks of 4 tokens x 1 byte."""
    return sum(pre.n for pre, name, _ in c.migrations.transitions if name == "d_copy") * 4 * MIG_COST.kv_bytes_per_token


def test_the_summary_of_a_hand_sized_migration():
    # instance 2 takes no part: it counts with 0 in migrating_frac, the mean over every instance
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), instances=3)
    s, req, busy = summarize(c, SLOConfig()), c.records[0], c.migrations.stats.busy_ns
    assert (s["migrations"], s["migrations_started"], s["migrations_aborted"]) == (1, 1, 0) and req.migrations == 1
    assert s["migration_bytes"] == _copied_bytes(c) > 0
    # the downtime is the pause of the final stage, in seconds; the pair is busy from its first stage
    assert 0 < req.downtime_ns and s["downtime_mean_s"] == s["downtime_max_s"] == req.downtime_ns / 1e9
    assert set(busy) == {0, 1} and busy[0] == busy[1] > req.downtime_ns
    assert s["migrating_frac"] == pytest.approx((busy[0] + busy[1]) / c.end_ns / 3)


def test_a_pause_that_ends_back_on_the_source_is_no_migrations_downtime():
    # D crashes at 150 ns, during the final stage: the paused request waits out S's RPC timeout (1 us)
    # and resumes on S. Its pause is real, but no migration committed: no downtime to report.
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), failures=FailureConfig(at=((1, 150e-9),)))
    s, req = summarize(c, SLOConfig()), c.records[0]
    assert req.status == "finished" and req.instance == 0 and req.downtime_ns >= 1000
    assert (s["migrations"], s["migrations_aborted_dst_failure"]) == (0, 1)
    assert s["downtime_mean_s"] is s["downtime_max_s"] is None
    assert s["migration_bytes"] == _copied_bytes(c) > 0


@pytest.mark.parametrize("crash", [131e-9, 140e-9])
def test_a_failed_pull_moves_no_bytes(crash):
    # the AE's final stage fails with S (test_ae_receive_posted_at_the_grant_installs_the_request_when_s_dies):
    # only stage 0's blocks reached D
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), variant="ae", failures=FailureConfig(at=((0, crash),)))
    names = [name for _, name, _ in c.migrations.transitions]
    assert "d_copy_fail" in names and c.migrations.stats.committed == 1
    assert c.migrations.stats.bytes_moved == _copied_bytes(c) > 0


def test_a_request_that_finishes_mid_migration_aborts_it_at_the_source():
    c = toy_cluster([(0.0, 6, 3)], (105, 0, 1))
    assert c.migrations.stats.aborted["finished"] == 1 and c.records[0].migrations == 0
    assert c.instances[1].reserved == 0  # S told D to free the reservation


def test_a_full_destination_refuses():
    # instance 1 is full (round-robin puts request 1 there); request 0 cannot get 2 blocks on it
    c = toy_cluster([(0.0, 6, 40), (0.0, 60, 4)], (105, 0, 1))
    assert c.migrations.stats.aborted["dst_refused"] == 1 and c.records[0].instance == 0


def test_destination_crash_times_out_and_the_request_resumes_on_the_source():
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), failures=FailureConfig(at=((1, 110e-9),)))
    assert c.migrations.stats.aborted["dst_failure"] == 1
    assert c.records[0].status == "finished" and c.records[0].instance == 0


@pytest.mark.parametrize("on_failure, status", [("fail", "failed:instance_crash"), ("redispatch", "finished")])
def test_source_crash_loses_only_what_it_holds(on_failure, status):
    c = toy_cluster([(0.0, 6, 40), (0.0, 7, 30)], (105, 0, 1),
                    failures=FailureConfig(at=((0, 106e-9),), on_failure=on_failure))
    assert c.records[0].status == status
    assert c.records[1].status == "finished"  # it was on instance 1


def test_a_lease_frees_a_reservation_whose_source_died():
    # S dies after D reserved stage 0 but before the copy: only D's lease can free it
    c = toy_cluster([(0.0, 20, 40)], (105, 0, 1), failures=FailureConfig(at=((0, 112e-9),)))
    names = [name for _, name, _ in c.migrations.transitions]
    assert "d_alloc_ok" in names and "crash_s" in names and names[-1] == "lease_expire"
    assert c.instances[1].reserved == 0


@pytest.mark.parametrize("variant", ["ae", "v010", "head"])
def test_code_faithful_variants_run(variant):
    c = toy_cluster([(0.0, 6, 40), (0.0, 9, 30)], (105, 0, 1), variant=variant)
    assert c.migrations.stats.committed == 1


# The AE's final stage of request 0 migrating at 105 (stage 0 ends at 126): begin_final at 130,
# D grants (and posts the final receive) at 132, S gets D's yes at 134 and sends until 154.
AE_S_CRASHES = [
    (131e-9, ["begin_final", "crash_s", "d_alloc_ok", "d_copy_fail"]),  # pre-allocation in flight
    (133e-9, ["begin_final", "d_alloc_ok", "crash_s", "d_copy_fail"]),  # yes not yet at S
    (140e-9, ["begin_final", "d_alloc_ok", "s_alloc_ok", "crash_s", "d_copy_fail"]),  # mid-send
]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
@pytest.mark.parametrize("crash, tail", AE_S_CRASHES, ids=["alloc-in-flight", "granted", "sending"])
def test_ae_receive_posted_at_the_grant_installs_the_request_when_s_dies(fast, crash, tail):
    """osdi24ae's D posts the final receive when it grants the last blocks and appends the request
    to its batch in the receive's done-callback (llm_engine.py:763-783). When S dies after asking,
    the receive fails and the callback still installs the request, with only stage 0's blocks
    (`d_copy_fail`), at D's next step boundary: the request finishes on D, D's reservation
    becomes its blocks (no leak), and the migration counts as committed, not as a source failure.
    Before, a grant that S never saw left the request lost and D's blocks reserved for ever."""
    c = toy_cluster([(0.0, 6, 40)], (105, 0, 1), fast=fast, variant="ae",
                    failures=FailureConfig(at=((0, crash),)))
    trans = [(pre, name, post) for pre, name, post in c.migrations.transitions if not name.startswith("decode")]
    names = [name for _, name, _ in trans]
    assert names[names.index("begin_final"):] == tail
    pre, _, post = trans[-1]
    assert pre.d_recv and not pre.s_alive and not post.d_recv and post.d_req == 1 and post.copied < post.d_nblk
    req = c.records[0]
    assert req.status == "finished" and req.instance == 1 and req.migrations == 1
    assert c.migrations.stats.committed == 1 and c.migrations.stats.aborted["src_failure"] == 0
    assert c.instances[1].free == c.instances[1].capacity and c.instances[1].reserved == 0
    v = get_variant("ae")
    assert all(conforms(v, name, pre, post) for pre, name, post in c.migrations.transitions)


def test_llumnix_migrates_on_a_real_workload_and_keeps_the_fast_path():
    from llumverify.sim.run import simulate
    from llumverify.sim.workload import generate
    specs = generate(600, 9.5, seed=1)
    cfg = SimConfig(cluster=replace(SimConfig().cluster, num_instances=4))
    a, b = (simulate(specs, "llumnix", c, keep_records=True) for c in (cfg, replace(cfg, fast=False)))
    assert a.summary["migrations"] > 10 and a.summary == {**b.summary}
    assert [(r.finish_ns, r.migrations) for r in a.records] == [(r.finish_ns, r.migrations) for r in b.records]


def test_costs_reproduce_the_papers_figure_10():
    short, long = measure((256, 8192))
    assert 10 <= short["live_ms"] <= 50 and 10 <= long["live_ms"] <= 50
    assert short["blocking_ms"] == pytest.approx(68, rel=0.1) and long["blocking_ms"] == pytest.approx(1682, rel=0.1)
    assert long["recompute_ms"] == pytest.approx(1995, rel=0.1)


def test_migrate_bench_writes_a_table_csv_and_png(tmp_path):
    result = CliRunner().invoke(migrate_bench, ["--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "live ms" in result.output and "8192" in result.output
    assert (tmp_path / "migrate_bench.csv").read_text().count("\n") == 7
    png = (tmp_path / "migrate_bench.png").read_bytes()
    assert png.startswith(b"\x89PNG") and b"Software" not in png


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "step"])
@pytest.mark.parametrize("variant", ["safe", "head"])
def test_a_copy_slower_than_the_rpc_timeout_is_a_spurious_timeout(fast, variant):
    # 8 us per block at 4 Mb/s: stage 0's copy outlives the 1 us RPC timeout while D is alive.
    # S aborts (timeout_copy, ABORTED_DST) and keeps decoding; D's late pull finds the
    # reservation freed and fails; the request finishes once, on the source.
    slow = replace(MIG_COST, bandwidth_bps=4_000_000)
    cfg = replace(toy_config(num_blocks=128, instances=2, cost=slow, fast=fast),
                  migration=MigrationConfig(variant=variant, last_stage_blocks=1, rpc_timeout_s=1e-6,
                                            lease_s=2e-6, lease_check_s=1e-6))
    c = Cluster(specs_of((0.0, 6, 300)), get_policy("round-robin"), cfg, record=True, keep_records=True)
    c.schedule_migration(105, 0, 1)
    c.run()
    req = c.records[0]
    names = [name for _, name, _ in c.migrations.transitions]
    assert "timeout_copy" in names and names.index("timeout_copy") < names.index("d_copy_fail")
    assert c.migrations.stats.aborted["timeout"] == 1 and c.migrations.stats.committed == 0
    assert req.status == "finished" and req.instance == 0 and req.migrations == 0
    for inst in c.instances:
        assert inst.free == inst.capacity and inst.reserved == 0
    v = get_variant(variant)
    assert all(conforms(v, name, pre, post) for pre, name, post in c.migrations.transitions)


@pytest.mark.spies
def test_migration_rounds_sleep_while_the_cluster_is_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Toy steps take 10 ns, so a round every 4 steps over 4 s of idle gaps would be 10^8 rounds.

    The rounds sleep until the next dispatch instead; the counter raises rather than hang if not.
    """
    calls = []

    def counted(self: Cluster) -> None:
        calls.append(self.env.now)
        if len(calls) > 10_000:
            raise AssertionError("migration rounds keep running on an idle cluster")
        original(self)

    original = Cluster.migration_round
    monkeypatch.setattr(Cluster, "migration_round", counted)
    specs = specs_of(*((float(t), 5, 4) for t in range(5)))
    cluster = Cluster(specs, get_policy("llumnix"), toy_config(instances=2), keep_records=True)
    cluster.run()
    assert sum(r.status == "finished" for r in cluster.records) == 5
    period = cluster.round_period_ns()
    assert calls and all(t % period == 0 for t in calls)  # still on the round grid


def _not_decoding(c: Cluster) -> list[tuple[str, bool]]:
    return [(name, post.s_alive) for _, name, post in c.migrations.transitions if not name.startswith("decode")]


def test_a_final_pre_allocation_refused_after_the_source_died_loses_the_request_once():
    """Guards dropping `_lost_if_stranded` after D's pre-allocation refusal to a dead S: the request paused there
    would never end (the run stalls), where an operator must see it counted once, as lost in migration.

    The AE: D (instance 1) holds request 1's 14 blocks from 100 and grants stage 0's 2 at 112: none free. The
    final stage begins at 130 (request 0 paused); S crashes at 131 with the pre-allocation in flight, which a grant
    would still turn into a receive that installs the request on D (so the crash does not call it lost). D refuses
    at 132 (1 block asked, 0 free): nothing can bring the request back."""
    c = toy_cluster([(0.0, 6, 40), (0.0, 52, 8)], (105, 0, 1), variant="ae", failures=FailureConfig(at=((0, 131e-9),)))
    assert _not_decoding(c)[-3:] == [("begin_final", True), ("crash_s", False), ("d_alloc_refuse", False)]
    lost, other = c.records
    assert (lost.status, lost.finish_ns, lost.at, lost.migrations) == ("failed:lost_in_migration", 132, -1, 0)
    assert (other.status, other.instance) == ("finished", 1)
    assert c.instances[1].reserved == 0 and c.instances[1].free == c.instances[1].capacity


def test_a_commit_refused_after_the_source_died_loses_the_request_once():
    """Guards dropping `_lost_if_stranded` after D's commit refusal: with S dead the paused request would never
    end (the run stalls); it must end exactly once, lost in migration, so failure accounting stays whole.

    The safe design, a 50 ns lease checked every 10 ns: the final stage's reservation at 152 (lease due 210),
    its copy ends at 166 and S sends the commit; request 1 (arrived at 140) keeps D in its prefill until 240. S
    crashes at 170 with the commit in flight (D may still commit: not lost yet); the lease expires at 210,
    fencing the migration, and at its 240 boundary D refuses the commit: nothing can bring the request back."""
    cfg = replace(toy_config(num_blocks=16, instances=2, cost=MIG_COST),
                  migration=MigrationConfig(variant="safe", last_stage_blocks=1, rpc_timeout_s=1e-6,
                                            lease_s=50e-9, lease_check_s=10e-9),
                  failures=FailureConfig(at=((0, 170e-9),)))
    c = Cluster(specs_of((0.0, 6, 40), (140e-9, 6, 5)), get_policy("round-robin"), cfg, record=True, keep_records=True)
    c.schedule_migration(105, 0, 1)
    c.run()
    assert _not_decoding(c)[-4:] == [("s_send_commit", True), ("crash_s", False), ("lease_expire", False),
                                     ("d_commit_refuse", False)]
    lost, other = c.records
    assert (lost.status, lost.finish_ns, lost.at, lost.migrations) == ("failed:lost_in_migration", 240, -1, 0)
    assert (other.status, other.instance, other.finish_ns) == ("finished", 1, 280)
    assert c.instances[1].reserved == 0 and c.instances[1].free == c.instances[1].capacity


def _lease_scenario(crash_s: float, probes: tuple[int, ...] = ()) -> tuple[Cluster, dict[int, int]]:
    """The commit-refused run above (50 ns lease checked every 10 ns, D busy with request 1's prefill until 240),
    S crashing at `crash_s`; returns the cluster (transitions recorded) and the blocks reserved on D at each probe
    time (read by callbacks, so the compiled build is observed as it runs)."""
    cfg = replace(toy_config(num_blocks=16, instances=2, cost=MIG_COST),
                  migration=MigrationConfig(variant="safe", last_stage_blocks=1, rpc_timeout_s=1e-6,
                                            lease_s=50e-9, lease_check_s=10e-9),
                  failures=FailureConfig(at=((0, crash_s),)))
    c = Cluster(specs_of((0.0, 6, 40), (140e-9, 6, 5)), get_policy("round-robin"), cfg, record=True, keep_records=True)
    c.schedule_migration(105, 0, 1)
    reserved: dict[int, int] = {}
    for t in probes:
        c.env.timeout(t).callbacks.append(lambda _ev, t=t: reserved.__setitem__(t, c.instances[1].reserved))
    c.run()
    return c, reserved


def _actions(c: Cluster) -> list[str]:
    return [name for _, name, _ in c.migrations.transitions if not name.startswith("decode")]


def test_a_lease_expires_at_the_first_check_after_its_full_term():
    """Guards the lease's due time being rounded up to the watcher's grid: the final stage's reservation at 152
    with a 50 ns lease checked every 10 ns is due at 202 and freed at the check at 210. Rounding down (200) frees a
    reservation before its lease ran out: a copy or commit arriving in that gap is fenced, and the migration
    aborts, although the configured lease would have covered it."""
    c, reserved = _lease_scenario(170e-9, probes=(151, 153, 205, 211))
    assert "lease_expire" in _actions(c)
    assert reserved[151] < reserved[153]  # the final stage's reservation, made at 152 (renewing the lease)
    assert reserved[205] == reserved[153] and reserved[211] == 0  # held through its term, all freed at the 210 check


def test_a_source_dying_after_the_fence_loses_its_paused_request_at_the_crash():
    """Guards `_lost_if_stranded` reading the fence: the lease expires at 210 (fencing the migration) while the
    commit is still in flight to D, which reaches its boundary only at 240; S crashes at 215. A fenced D never
    commits, so nothing can bring the paused request back: it is lost at the crash (and, with re-dispatch, sent
    again then), not 25 ns later when D refuses the commit."""
    c, _ = _lease_scenario(215e-9)
    assert _actions(c)[-3:] == ["lease_expire", "crash_s", "d_commit_refuse"]
    lost, other = c.records
    assert (lost.status, lost.finish_ns, lost.migrations) == ("failed:lost_in_migration", 215, 0)
    assert other.status == "finished" and c.instances[1].reserved == 0


@pytest.mark.parametrize("policy", ["round-robin", "least-loaded"])
def test_a_request_lost_with_its_source_is_redispatched_once_to_a_live_instance(policy):
    """Guards the order in `Cluster.fail_instance`: the instance is cleared (dead) before its migrations are told.
    S crashes at 160 with request 0 paused for the final stage's copy and no commit sent: the migration reports it
    lost and the cluster re-dispatches it. Told first, the crashing instance still counts as serving, takes the
    request back into its queue and loses it again: two re-dispatches for one crash."""
    c = toy_cluster([(0.0, 6, 40), (140e-9, 6, 5)], (105, 0, 1), policy=policy,
                    failures=FailureConfig(at=((0, 160e-9),), on_failure="redispatch"))
    assert "crash_s" in [name for _, name, _ in c.migrations.transitions]
    moved, other = c.records
    assert (moved.status, moved.instance, moved.redispatches, moved.migrations) == ("finished", 1, 1, 0)
    assert (other.status, other.instance) == ("finished", 1)


def test_head_gives_up_at_a_late_commit_answer_and_the_answer_changes_nothing():
    """head as written: D is in a 3 us prefill when S's commit reaches it, so its answer comes after
    S's RPC timeout (1 us). S re-queues the paused request at its next step (timeout_commit:
    ABORTED_DST, no fence), D's lease expires, D refuses the late commit, and request 0 finishes on
    S, never migrated. The slip this catches: the simulator's timeout path tests only the action's name,
    so head applies its timeout (which re-queues the paused request) outside S's step boundary and
    goes on to ask D through the fence: the run stops with a RuntimeError."""
    cfg = replace(toy_config(num_blocks=64, instances=2, cost=replace(MIG_COST, prefill_ns_per_token=50)),
                  migration=MigrationConfig(variant="head", last_stage_blocks=1, rpc_timeout_s=1e-6, lease_s=2e-6,
                                            lease_check_s=1e-6))
    c = Cluster(specs_of((0.0, 6, 40), (300e-9, 60, 4)), get_policy("round-robin"), cfg, record=True, keep_records=True)
    c.schedule_migration(405, 0, 1)  # request 0's prefill (6 tokens) ends at 400
    c.run()
    names = [name for _, name, _ in c.migrations.transitions if not name.startswith("decode")]
    assert names[-4:] == ["s_send_commit", "timeout_commit", "lease_expire", "d_commit_refuse"]
    assert [(r.status, r.instance, r.migrations) for r in c.records] == [("finished", 0, 0), ("finished", 1, 0)]
