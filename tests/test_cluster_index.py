"""The F_d index (scheduler/index.py) chooses exactly what the scans of least-loaded dispatch and
P/D hand-offs choose, at every decision, under migrations, crashes and re-dispatch; a migration
round is skipped only when a full round would find no source."""

from __future__ import annotations

import pytest

from llumverify.settings.config import ClusterConfig, EngineConfig, FailureConfig, SchedulerConfig, SimConfig
from llumverify.requests import HIGH
from llumverify.scheduler.dispatch import least_loaded
from llumverify.scheduler.policies import get_policy
from llumverify.scheduler.freeness import migration_freeness
from llumverify.scheduler.index import FreenessIndex
from llumverify.scheduler.pd import decode_target
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.sim.cluster import Cluster
from llumverify.sim.instance import Request
from llumverify.sim.workload import generate


class CheckedCluster(Cluster):
    """Asks the index and the scan at every decision and requires the same answer."""

    decisions = 0

    def _dispatch(self, req: Request) -> None:
        if self._dispatch_index is not None and req.priority != HIGH:
            snaps = self._snapshots(self._dispatch_roles)
            assert self._dispatch_index.best() == (least_loaded(snaps, req.spec) if snaps else None)
            self.decisions += 1
        super()._dispatch(req)

    def _hand_off(self, req: Request) -> None:
        if self._decode_index is not None and req.priority != HIGH:
            assert self._decode_index.best() == decode_target(self._snapshots(("decode",)), req.spec)
            self.decisions += 1
        super()._hand_off(req)


@pytest.mark.parametrize("engine, pd, policy, instances, rate, fail", [
    ("vllm-0.2", "", "least-loaded", 8, 5.0, ()),
    ("vllm-0.2", "", "llumnix", 8, 6.0, ((3, 30.0),)),
    ("vllm-v1", "", "llumnix", 8, 8.0, ((2, 20.0),)),
    ("vllm-v1", "2:6", "least-loaded", 8, 20.0, ()),
    ("vllm-v1", "2:6", "llumnix", 8, 25.0, ((1, 15.0), (5, 25.0))),
])
@pytest.mark.slow
@pytest.mark.spies
def test_the_index_chooses_what_the_scan_chooses(engine, pd, policy, instances, rate, fail):
    cfg = SimConfig(engine=EngineConfig(generation=engine), cluster=ClusterConfig(num_instances=instances, pd=pd),
                    failures=FailureConfig(at=fail, on_failure="redispatch"))
    cluster = CheckedCluster(generate(800, rate, seed=3, high_priority_frac=0.05), get_policy(policy), cfg)
    cluster.run()
    assert cluster.decisions > 700


def test_polled_reports_and_other_policies_scan():
    cfg = SimConfig(cluster=ClusterConfig(report_interval_s=0.05))
    assert Cluster([], get_policy("least-loaded"), cfg)._dispatch_index is None
    assert Cluster([], get_policy("round-robin"), SimConfig())._dispatch_index is None


def _snap(iid: int, free: int, running: int = 1) -> InstanceSnapshot:
    return InstanceSnapshot(iid, 100, 0, free, running, 0, 0.0, 0)


def test_a_load_that_rose_without_a_touch_is_an_error():
    loads = {0: _snap(0, 10), 1: _snap(1, 20)}
    index = FreenessIndex(loads.get)
    index.add(0)
    index.add(1)
    assert index.best() == 1
    loads[1] = _snap(1, 5)  # fell (a decode run's steps): re-read at the top, no touch needed
    assert index.best() == 0
    loads[1] = _snap(1, 50)  # rose without a touch
    loads[0] = _snap(0, 1)
    with pytest.raises(RuntimeError, match="without a touch"):
        index.best()


def test_ties_go_to_the_lowest_id_and_crashed_members_leave():
    loads: dict[int, InstanceSnapshot | None] = {i: _snap(i, 10) for i in range(3)}
    index = FreenessIndex(loads.get)
    for i in (2, 0, 1):
        index.add(i)
    assert index.best() == 0
    loads[0] = None
    index.touch(0)
    assert index.best() == 1


class CheckedRounds(Cluster):
    """Requires every migration round that is skipped to have no source, as the full round reads it."""

    skipped = 0

    def migration_round(self) -> None:
        if not self._may_have_source():
            self.skipped += 1
            head_only = self.cfg.scheduler.head_only_freeness
            assert not any(s.terminating or s.num_preempted > 0 or migration_freeness(s, head_only) < self.threshold
                           for s in self._snapshots(self._migration_roles))
        super().migration_round()


@pytest.mark.parametrize("engine, pd, lengths, rate, head_only", [
    ("vllm-0.2", "", "sharegpt", 4.0, False),
    ("vllm-0.2", "", "L-L", 1.4, True),
    ("vllm-v1", "2:6", "sharegpt", 12.0, False),
])
@pytest.mark.spies
def test_skipped_migration_rounds_have_no_source(engine, pd, lengths, rate, head_only):
    cfg = SimConfig(engine=EngineConfig(generation=engine), cluster=ClusterConfig(num_instances=8, pd=pd),
                    scheduler=SchedulerConfig(head_only_freeness=head_only), failures=FailureConfig(at=((6, 60.0),)))
    cluster = CheckedRounds(generate(1000, rate, lengths=lengths, seed=2), get_policy("llumnix"), cfg)
    cluster.run()
    assert cluster.skipped > 100
