"""Instance failures, also in the middle of migrations, never lose or duplicate a request.

The simulator's own audits prove it on every run: a request held twice (two instances, or one
after it ended) or ended twice raises at once, and at the end every request has exactly one
terminal status (finished, rejected:<reason> or failed:<reason>). Here random crash schedules
hit hand-sized migrations at every phase and a real llumnix run.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_migration import toy_cluster

from llumverify.settings.config import ClusterConfig, FailureConfig, SchedulerConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

ROWS = [(0.0, 6, 40), (0.0, 9, 30), (1e-8, 5, 25), (2e-8, 13, 20), (5e-8, 3, 35)]


def _check_exactly_once(records, on_failure: str, survivor: bool) -> None:
    assert sorted(r.id for r in records) == list(range(len(records)))
    for r in records:
        assert r.status == "finished" or r.status.startswith("failed:"), r.status
        assert r.at == -1  # no instance still holds an ended request
    if on_failure == "redispatch" and survivor:
        assert all(r.status == "finished" for r in records)


@settings(max_examples=60)
@given(crashes=st.lists(st.tuples(st.integers(0, 2), st.integers(100, 400)), max_size=3),
       on_failure=st.sampled_from(["fail", "redispatch"]), variant=st.sampled_from(["safe", "ae", "v010", "head"]),
       t1=st.integers(100, 200), t2=st.integers(150, 300))
def test_crashes_during_hand_sized_migrations(crashes, on_failure, variant, t1, t2):
    failures = FailureConfig(at=tuple((i, t * 1e-9) for i, t in crashes), on_failure=on_failure)
    c = toy_cluster(ROWS, (t1, 0, 1), (t2, 2, 0), (t2 + 7, 1, 2), variant=variant, failures=failures, instances=3,
                    num_blocks=24)
    _check_exactly_once(c.records, on_failure, survivor=len({i for i, _ in crashes}) < 3)


@settings(max_examples=10)
@given(seed=st.integers(0, 10_000), on_failure=st.sampled_from(["fail", "redispatch"]),
       crashes=st.lists(st.tuples(st.integers(0, 3), st.floats(2.0, 30.0)), min_size=1, max_size=3))
def test_random_crashes_in_a_llumnix_run(seed, on_failure, crashes):
    cfg = SimConfig(cluster=ClusterConfig(num_instances=4), scheduler=SchedulerConfig(migrate_threshold=10.0),
                    failures=FailureConfig(at=tuple(crashes), rate_per_hour=10.0, on_failure=on_failure, seed=seed))
    res = simulate(generate(200, 6.0, seed=seed), "llumnix", cfg, keep_records=True)
    _check_exactly_once(res.records, on_failure, survivor=False)
    s = res.summary
    assert s["finished"] + s["failed"] + s["rejected"] == 200
    assert s["redispatched"] == 0 if on_failure == "fail" else s["redispatched"] >= 1
