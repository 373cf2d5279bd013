"""S's coordinator is one SimPy process per migration (sim/migration.py): a crash interrupts it.

Request 0 (20 tokens, blocks of 4) on instance 0; the migration 0 -> 1 begins at S's boundary at
110 ns, D reserves at 112, S asks for the copy at 114 and the copy of 4 blocks ends at 146 ns. A
crash at 116 ns is mid-copy. S's crash must end the process there, and with it every action of
S: if the interrupt were lost, the process would wake at the copy's end and act for a dead S (an
AuditError on the guard). D's crash interrupts the wait too, but S cannot tell: it waits on and
learns it from the RPC timeout, 1 µs after its call.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import specs_of, toy_config
from test_migration import MIG_COST, toy_cluster

import llumverify.sim.migration as migration
from llumverify.settings.config import FailureConfig, MigrationConfig
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.protocol.variants import get_variant

CRASH_NS, COPY_SENT_NS, TIMEOUT_NS = 116, 114, 1_000


def _run(monkeypatch: pytest.MonkeyPatch, crashed: int):
    """The toy migration with instance `crashed` failing mid-copy; (cluster, migration, when its
    process ended, how many times the migration released its instances)."""
    began: list[migration.Migration] = []
    ended: list[int] = []
    releases: list[int] = []
    begin, coordinate, release = migration.Migration.begin, migration.Migration._coordinate, migration.Migrations.release

    def spy_begin(self: migration.Migration, src) -> None:
        begin(self, src)
        began.append(self)

    def spy_coordinate(self: migration.Migration, alloc):
        yield from coordinate(self, alloc)
        ended.append(self.env.now)

    def spy_release(self: migration.Migrations, m: migration.Migration) -> None:
        releases.append(m.id)
        release(self, m)

    monkeypatch.setattr(migration.Migration, "begin", spy_begin)
    monkeypatch.setattr(migration.Migration, "_coordinate", spy_coordinate)
    monkeypatch.setattr(migration.Migrations, "release", spy_release)
    c = toy_cluster([(0.0, 20, 40)], (105, 0, 1), failures=FailureConfig(at=((crashed, CRASH_NS * 1e-9),)))
    assert len(began) == 1
    return c, began[0], ended, releases


@pytest.mark.spies
def test_a_source_crash_mid_copy_interrupts_the_process_and_ends_the_migration_once(monkeypatch):
    c, m, ended, releases = _run(monkeypatch, crashed=0)
    names = [name for _, name, _ in c.migrations.transitions if name != "decode"]
    assert names[:4] == ["begin_stage", "d_alloc_ok", "s_alloc_ok", "crash_s"]
    assert ended == [CRASH_NS] and not m.proc.is_alive  # ended by the interrupt, at the crash
    kinds = {a.name: a.kind for a in get_variant("safe").actions}
    assert [n for n in names[4:] if kinds[n] in ("S", "timeout")] == []  # nothing of S after its crash
    assert names[4:] == ["d_copy_fail", "lease_expire"]  # D's pull fails; its lease frees the reservation
    st = c.migrations.stats
    assert releases == [m.id] and (st.started, st.committed, sum(st.aborted.values())) == (1, 0, 1)
    assert st.aborted["src_failure"] == 1 and c.instances[1].reserved == 0


@pytest.mark.spies
def test_a_destination_crash_mid_copy_leaves_s_waiting_for_its_timeout(monkeypatch):
    c, m, ended, releases = _run(monkeypatch, crashed=1)
    names = [name for _, name, _ in c.migrations.transitions if name != "decode"]
    # the request, still decoding on S, finishes there before S learns that D died
    assert names == ["begin_stage", "d_alloc_ok", "s_alloc_ok", "crash_d", "finish", "s_d_dead"]
    assert ended == [COPY_SENT_NS + TIMEOUT_NS]  # interrupted at 116, then woken by the timeout
    st = c.migrations.stats
    assert releases == [m.id] and (st.started, st.committed, sum(st.aborted.values())) == (1, 0, 1)
    assert st.aborted["dst_failure"] == 1 and c.records[0].status == "finished" and c.records[0].instance == 0


def test_without_timeouts_a_copy_that_ends_after_d_died_fails_s_call():
    # The AE has no timeouts: its 1 us RPC timeout passes during a copy at 40 Mb/s and S waits on.
    # D crashes before the copy ends; at the copy's end S's call fails (s_d_dead) and the run
    # settles (the callback design never woke S again: "did not settle").
    cfg = replace(toy_config(num_blocks=128, instances=2, cost=replace(MIG_COST, bandwidth_bps=40_000_000)),
                  migration=MigrationConfig(variant="ae", last_stage_blocks=1, rpc_timeout_s=1e-6,
                                            lease_s=2e-6, lease_check_s=1e-6),
                  failures=FailureConfig(at=((1, 1142e-9),)))
    c = Cluster(specs_of((0.0, 20, 40)), get_policy("round-robin"), cfg, record=True)
    c.schedule_migration(105, 0, 1)
    c.run()
    names = [name for _, name, _ in c.migrations.transitions if name != "decode"]
    assert names == ["begin_stage", "d_alloc_ok", "s_alloc_ok", "finish", "crash_d", "s_d_dead"]
    assert c.migrations.stats.aborted["dst_failure"] == 1 and not c.migrations.live
