"""Freeness as the AE computes it, and the dispatch policies (unit and Hypothesis tests)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llumverify.errors import UserError
from llumverify.requests import HIGH, NORMAL, RequestSpec
from llumverify.scheduler.dispatch import least_loaded, round_robin, vllm_dp
from llumverify.scheduler.policies import POLICIES, get_policy
from llumverify.scheduler.freeness import TERMINATING, dispatch_freeness, migration_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot

REQ = RequestSpec(0, 0.0, 100, 10)


def snap(i=0, free=500, running=10, waiting=0, wall=0.0, head=0, prio=False, term=False, sent=0, total=851):
    return InstanceSnapshot(i, total, 8, free, running, waiting, wall, head, 0, prio, term, sent)


def test_dispatch_freeness_counts_every_queued_request():
    s = snap(free=408, running=8, waiting=2, wall=40.5, head=30)
    assert dispatch_freeness(s) == pytest.approx((400 - 40.5) / 10)


def test_migration_freeness_counts_the_queue_as_one_request():
    s = snap(free=408, running=8, waiting=2, wall=40.5, head=30)
    assert migration_freeness(s) == pytest.approx((400 - 40.5) / 9)
    assert migration_freeness(s, head_only=True) == pytest.approx((400 - 30) / 9)


def test_priority_headroom_and_penalty():
    hosting = snap(free=408, running=4, prio=True)
    assert migration_freeness(hosting) == pytest.approx((400 - 751) / 4)
    assert dispatch_freeness(hosting, NORMAL) == pytest.approx((400 - 751) / 4)
    assert dispatch_freeness(hosting, HIGH) == pytest.approx(400 / 4)
    assert dispatch_freeness(snap(free=408, running=4), HIGH) == pytest.approx((400 - 751) / 4)


def test_empty_is_infinitely_free_and_terminating_reports_minus_1000():
    assert dispatch_freeness(snap(running=0)) == math.inf == migration_freeness(snap(running=0))
    assert dispatch_freeness(snap(running=0, term=True)) == TERMINATING == migration_freeness(snap(term=True))


def test_round_robin_sends_to_the_instance_sent_the_fewest_lowest_id_first():
    snaps = [snap(0, sent=3), snap(1, sent=2), snap(2, sent=2)]
    assert round_robin(snaps, REQ) == 1


def test_least_loaded_picks_the_highest_dispatch_freeness():
    snaps = [snap(0, free=100), snap(1, free=600), snap(2, free=600), snap(3, free=300)]
    assert least_loaded(snaps, REQ) == 1


def test_vllm_dp_weighs_a_waiting_request_as_four_running_ones_ties_to_the_lowest_rank():
    """vLLM's DPLBAsyncMPClient: score = 4 x waiting + running, first minimum from rank 0."""
    assert vllm_dp([snap(0, running=5, waiting=1), snap(1, running=8, waiting=0)], REQ) == 1  # 9 > 8
    assert vllm_dp([snap(0, running=4, waiting=1), snap(1, running=8, waiting=0)], REQ) == 0  # 8 = 8: rank 0
    assert vllm_dp([snap(0, running=0, waiting=3), snap(1, running=11, waiting=0)], REQ) == 1  # 12 > 11
    assert vllm_dp([snap(0, running=0, waiting=0, term=True), snap(1, running=50, waiting=9)], REQ) == 1  # draining


def test_unknown_policy_is_a_user_error_naming_the_choices():
    with pytest.raises(UserError, match="round-robin, least-loaded"):
        get_policy("llumnix-ish")
    assert set(POLICIES) >= {"round-robin", "least-loaded"}


snapshots = st.lists(
    st.builds(lambda free, r, q, wall, term, prio, sent: (free, r, q, wall, term, prio, sent),
              st.integers(0, 851), st.integers(0, 256), st.integers(0, 20), st.floats(0, 5000),
              st.booleans(), st.booleans(), st.integers(0, 50)),
    min_size=1, max_size=16,
).map(lambda rows: [snap(i, free=f, running=r, waiting=q, wall=w if q else 0.0, term=t, prio=p, sent=s)
                    for i, (f, r, q, w, t, p, s) in enumerate(rows)])


@given(snapshots, st.sampled_from([NORMAL, HIGH]))
def test_least_loaded_chooses_a_freest_live_instance(snaps, priority):
    req = RequestSpec(0, 0.0, 10, 10, priority)
    chosen = least_loaded(snaps, req)
    live = [s for s in snaps if not s.terminating] or snaps
    assert chosen in {s.instance for s in live}
    best = max(dispatch_freeness(s, priority) for s in live)
    assert dispatch_freeness(snaps[chosen], priority) == best
    assert chosen == min(s.instance for s in live if dispatch_freeness(s, priority) == best)


@given(snapshots)
def test_vllm_dp_chooses_the_lowest_weighted_count_lowest_rank_first(snaps):
    chosen = vllm_dp(snaps, REQ)
    live = [s for s in snaps if not s.terminating] or snaps
    score = {s.instance: 4 * s.num_waiting + s.num_running for s in live}
    assert chosen == min(score, key=lambda i: (score[i], i))


@given(snapshots)
def test_no_policy_picks_a_terminating_instance_while_another_exists(snaps):
    for policy in POLICIES.values():
        chosen = snaps[policy.dispatch(snaps, REQ)]
        assert not chosen.terminating or all(s.terminating for s in snaps)


@given(snapshots)
def test_round_robin_chooses_a_least_sent_live_instance(snaps):
    chosen = snaps[round_robin(snaps, REQ)]
    live = [s for s in snaps if not s.terminating] or snaps
    assert chosen.dispatched == min(s.dispatched for s in live)
