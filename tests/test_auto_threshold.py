"""The auto-tuned migration threshold (scheduler/threshold.py): the controller's rule on hand-built
signals, its bounds, its wiring into the migration rounds, and its settings' validation."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llumverify.settings.config import ClusterConfig, SchedulerConfig, SimConfig
from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.scheduler.threshold import RoundSignals, head_blocked, next_threshold, observe
from llumverify.sim.records import row_of
from llumverify.sim.request_output import csv_fields
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

BOUNDS = {"t_min": 1.0, "t_max": 60.0, "increase": 1.25, "decrease": 0.8}


def snap(instance: int = 0, free: int = 100, waiting: int = 0, head: int = 0, preempted: int = 0,
         terminating: bool = False) -> InstanceSnapshot:
    return InstanceSnapshot(instance, num_blocks=100, watermark_blocks=1, free_blocks=free, num_running=4,
                            num_waiting=waiting, waiting_prompt_blocks=float(head), head_blocks=head,
                            num_preempted=preempted, terminating=terminating)


def test_refusals_outnumbering_commits_raise_t():
    assert next_threshold(10.0, RoundSignals(blocked=0, committed=1, refused=2), **BOUNDS) == 12.5


def test_a_blocked_head_lowers_t():
    assert next_threshold(10.0, RoundSignals(blocked=1, committed=0, refused=0), **BOUNDS) == 8.0


def test_refusals_win_over_a_blocked_head():
    assert next_threshold(10.0, RoundSignals(blocked=3, committed=0, refused=1), **BOUNDS) == 12.5


@pytest.mark.parametrize("signals", [RoundSignals(0, 0, 0), RoundSignals(0, 2, 2), RoundSignals(0, 5, 0)])
def test_t_holds_without_refusals_or_blocking(signals):
    assert next_threshold(10.0, signals, **BOUNDS) == 10.0


@given(st.floats(1.0, 60.0), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), max_size=80))
def test_t_stays_within_bounds(t, rounds):
    for blocked, committed, refused in rounds:
        t = next_threshold(t, RoundSignals(blocked, committed, refused), **BOUNDS)
        assert BOUNDS["t_min"] <= t <= BOUNDS["t_max"]


def test_observe_counts_blocked_heads_and_preemptions_of_live_instances():
    assert not head_blocked(snap(free=50, waiting=1, head=49))  # fits above the watermark
    assert head_blocked(snap(free=50, waiting=1, head=50))
    assert head_blocked(snap(preempted=1))
    snaps = [snap(0, free=10, waiting=2, head=20), snap(1, preempted=1), snap(2),
             snap(3, free=0, waiting=1, head=5, terminating=True)]
    assert observe(snaps, committed=2, refused=1) == RoundSignals(blocked=2, committed=2, refused=1)


def run(scheduler: SchedulerConfig, seed: int = 1):
    """300 L-L requests on 2 instances: enough pressure that the controller moves T."""
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), scheduler=scheduler)
    return simulate(generate(300, 1.0, lengths="L-L", seed=seed), "llumnix", cfg, keep_records=True)


def rows(result) -> list[list[str]]:
    return [csv_fields(result.policy, row_of(r)) for r in result.records]


def test_auto_t_moves_within_bounds_and_is_recorded():
    res = run(SchedulerConfig(auto_threshold=True))
    series = res.timeseries["threshold"]
    assert len(series) == len(res.timeseries["t_s"]) and len(set(series)) > 2
    assert all(1.0 <= t <= 60.0 for t in series)
    assert 1.0 <= res.summary["threshold_mean"] <= 60.0
    assert res.summary["finished"] == 300  # the run's audits held to the end


def test_threshold_mean_is_the_mean_over_every_round():
    """threshold_mean averages the T of every migration round run (not the last round's, nor the sampled series')."""
    import numpy as np

    from llumverify.sim.cluster import Cluster
    from llumverify.sim.metrics import summarize
    from llumverify.scheduler.policies import get_policy

    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), scheduler=SchedulerConfig(auto_threshold=True))
    cluster = Cluster(generate(150, 1.0, lengths="L-L", seed=1), get_policy("llumnix"), cfg)
    cluster.run()
    rounds = list(cluster.thresholds)
    assert len(set(rounds)) > 2 and rounds[-1] != np.mean(rounds)
    assert summarize(cluster, cfg.slo)["threshold_mean"] == pytest.approx(np.mean(rounds))


def test_fixed_t_records_no_threshold_and_pinned_auto_t_changes_nothing():
    fixed = run(SchedulerConfig(migrate_threshold=10.0))
    assert "threshold" not in fixed.timeseries and "threshold_mean" not in fixed.summary
    pinned = run(SchedulerConfig(migrate_threshold=10.0, auto_threshold=True, threshold_min=10.0, threshold_max=10.0))
    assert rows(pinned) == rows(fixed)
    assert {k: v for k, v in pinned.summary.items() if k != "threshold_mean"} == fixed.summary
    assert pinned.summary["threshold_mean"] == 10.0


def test_auto_t_is_deterministic():
    a, b = (run(SchedulerConfig(auto_threshold=True), seed=2) for _ in range(2))
    assert rows(a) == rows(b) and a.summary == b.summary and a.timeseries == b.timeseries


@pytest.mark.parametrize("change", [
    {"threshold_min": 0.0}, {"threshold_min": 20.0, "threshold_max": 10.0}, {"threshold_increase": 1.0},
    {"threshold_decrease": 1.0}, {"threshold_decrease": 0.0},
    {"auto_threshold": True, "migrate_threshold": 0.0},
])
def test_bad_settings_are_one_line_errors(change):
    with pytest.raises(UserError) as err:
        replace(SchedulerConfig(), **change).validate()
    assert "\n" not in str(err.value) and "SchedulerConfig" in str(err.value)


def test_bad_settings_in_an_experiment_file_name_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[workload]]\nlengths = "M-M"\nrate = 9.0\nscheduler.auto_threshold = true\n'
                    'scheduler.threshold_max = 2.0\n')
    with pytest.raises(UserError) as err:
        load_experiment(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_policy_that_does_not_migrate_records_no_threshold():
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), scheduler=SchedulerConfig(auto_threshold=True))
    res = simulate(generate(50, 1.0, lengths="M-M", seed=0), "least-loaded", cfg)
    assert "threshold" not in res.timeseries and "threshold_mean" not in res.summary
