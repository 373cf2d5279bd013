"""Summary metrics on hand-checkable runs, fragmentation, and stale load reports."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import specs_of, toy_config

from llumverify.settings.config import FailureConfig, SLOConfig
from llumverify.scheduler.snapshot import InstanceSnapshot
from llumverify.scheduler.freeness import fragmentation
from llumverify.sim.run import simulate


def test_latency_summaries_follow_their_definitions():
    # one request: prefill 0-100 ns, tokens at 100, 110, 120, 130 -> TTFT 100 ns, TPOT 10 ns
    res = simulate(specs_of((0.0, 5, 4)), "round-robin", toy_config())
    s = res.summary
    assert s["ttft_mean_s"] == pytest.approx(100e-9) and s["tpot_p99_s"] == pytest.approx(10e-9)
    assert s["e2e_p50_s"] == pytest.approx(130e-9) and s["queue_mean_s"] == 0.0
    assert s["makespan_s"] == pytest.approx(130e-9) and s["finished"] == 1


def test_kv_utilisation_is_the_exact_time_weighted_mean():
    # 16 blocks of 4 tokens; prompt 5 -> 2 blocks from 0; the decode step 100-110 writes token 6
    # (still 2 blocks), 110-120 token 7, 120-130 token 8; 2 blocks held over [0, 130]
    s = simulate(specs_of((0.0, 5, 4)), "round-robin", toy_config()).summary
    assert s["kv_util_mean"] == pytest.approx(2 / 16)
    # prompt 4 -> 1 block; decode writes token 5 at step 100-110 -> 2 blocks over [100, 120]
    s = simulate(specs_of((0.0, 4, 3)), "round-robin", toy_config()).summary
    assert s["kv_util_mean"] == pytest.approx((1 * 100 + 2 * 20) / 120 / 16)


def _snap(i, free, waiting=0, head=0):
    return InstanceSnapshot(i, 100, 1, free, 3, waiting, float(head), head)


def test_fragmentation_counts_free_memory_only_when_a_head_is_stuck_but_would_fit_in_total():
    assert fragmentation([_snap(0, 10), _snap(1, 30)]) == 0.0  # nothing waits
    assert fragmentation([_snap(0, 10, 1, 20), _snap(1, 30)]) == pytest.approx(40 / 200)
    assert fragmentation([_snap(0, 10, 1, 50), _snap(1, 30)]) == 0.0  # would not fit anywhere
    assert fragmentation([_snap(0, 30, 1, 20), _snap(1, 30)]) == 0.0  # fits where it is


def test_stale_reports_hide_requests_dispatched_since_the_last_poll():
    # three simultaneous arrivals: with fresh loads least-loaded spreads them; with a 1 s poll
    # every instance still looks empty (ties -> lowest id) so all three land on instance 0
    rows = [(0.5, 8, 5)] * 3
    fresh = simulate(specs_of(*rows), "least-loaded", toy_config(instances=3), keep_records=True)
    stale = simulate(specs_of(*rows), "least-loaded", toy_config(instances=3, report_interval_s=1.0), keep_records=True)
    assert sorted(r.instance for r in fresh.records) == [0, 1, 2]
    assert [r.instance for r in stale.records] == [0, 0, 0]


def test_a_two_token_request_has_one_gap_and_a_one_token_request_none():
    # alone on the toy engine: the prefill 0-100 ns gives token 1, the decode step 100-110 token 2,
    # so request 0's TPOT is 10 ns; request 1 (one token) has no gap and cannot miss a per-token target
    slo = SLOConfig(ttft_s=1.0, per_token_s=5e-9)
    s = simulate(specs_of((0.0, 5, 2), (1e-6, 5, 1)), "round-robin", replace(toy_config(), slo=slo)).summary
    assert s["tpot_mean_s"] == s["tpot_p99_s"] == pytest.approx(10e-9)
    assert s["slo_tpot_miss_rate"] == s["slo_violation_rate"] == 1 / 2


def test_a_crashed_instance_is_utilised_over_its_own_life_not_the_run():
    # request 0 holds 2 of instance 0's 16 blocks from 0 until instance 0 crashes at 50 ns: 2/16 over
    # its whole life. Re-dispatched to instance 1, it is prefilled 50-150 and decoded until 180, holding
    # 2 blocks over 130 of instance 1's 180 ns.
    cfg = replace(toy_config(instances=2), failures=FailureConfig(at=((0, 50e-9),), on_failure="redispatch"))
    res = simulate(specs_of((0.0, 5, 4)), "round-robin", cfg, keep_records=True)
    req = res.records[0]
    assert (req.instance, req.redispatches, req.first_token_ns, req.finish_ns) == (1, 1, 150, 180)
    assert res.summary["kv_util_mean"] == pytest.approx((2 / 16 + 2 * 130 / (16 * 180)) / 2)
    # the P99 over the two instances' shares (numpy's linear interpolation between the two)
    assert res.summary["kv_util_p99"] == pytest.approx(np.percentile([2 / 16, 2 * 130 / (16 * 180)], 99))
    # instance 0 served 50 ns, instance 1 the whole 180 ns run: 230 instance-ns over 180 ns
    assert res.summary["instances_mean"] == pytest.approx((50 + 180) / 180)
