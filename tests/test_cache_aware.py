"""Prefix-cache-aware dispatch (Llumnix HEAD's `cacheaware`): unit and Hypothesis tests."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llumverify.requests import HIGH, NORMAL, RequestSpec
from llumverify.scheduler.cache_aware import (BUSY_THRESHOLD, CHUNK_TOKENS, TRANSFER_PENALTY, cache_aware,
                                              cached_chunks, is_busy, transfer_hint)
from llumverify.scheduler.dispatch import least_loaded
from llumverify.scheduler.policies import DEFAULT_POLICIES, POLICIES
from llumverify.scheduler.freeness import dispatch_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot

REQ = RequestSpec(0, 0.0, 4096, 10)


def snap(i=0, free=500, running=10, waiting=0, wall=0.0, prio=False, term=False, total=851, wm=0):
    return InstanceSnapshot(i, total, wm, free, running, waiting, wall, 0, 0, prio, term, 0)


def busy(i, **kw):
    """F_d = 90 / 10 = 9 < 10."""
    return snap(i, free=90, running=10, **kw)


def test_busy_is_f_d_below_ten():
    assert BUSY_THRESHOLD == 10.0
    assert not is_busy(snap(free=100, running=10))  # exactly 10: not busy (HEAD: remaining_steps < 10)
    assert is_busy(snap(free=99, running=10))
    assert is_busy(snap(free=200, running=10, waiting=5, wall=60.0))  # (200 - 60) / 15 = 9.3
    assert not is_busy(snap(free=0, running=0))  # empty: +inf
    assert is_busy(snap(free=851, running=0, term=True))  # draining: -1000


def test_hits_count_in_whole_256_token_chunks():
    assert CHUNK_TOKENS == 256
    assert [cached_chunks(t) for t in (0, 16, 255, 256, 511, 512, 4000)] == [0, 0, 0, 1, 1, 2, 15]


def test_the_longest_cached_prefix_wins_when_not_busy():
    snaps = [snap(0, free=800), snap(1, free=150), snap(2, free=600)]  # F_d 80, 15, 60
    hits = {0: 512, 1: 1024, 2: 256}
    assert least_loaded(snaps, REQ) == 0
    assert cache_aware(snaps, REQ, hits) == 1


def test_any_whole_chunk_beats_load_however_small_the_lead():
    snaps = [snap(0, free=800, running=1), snap(1, free=110)]  # F_d 800 vs 11: 1 is barely not busy
    assert cache_aware(snaps, REQ, {0: 0, 1: 256}) == 1


def test_a_busy_cached_instance_loses_to_the_next_longest_hit():
    snaps = [snap(0, free=800), busy(1), snap(2, free=400)]
    assert cache_aware(snaps, REQ, {1: 4096, 2: 256}) == 2


def test_a_busy_cached_instance_loses_to_load_when_no_other_hit():
    snaps = [snap(0, free=300), busy(1), snap(2, free=400)]
    assert cache_aware(snaps, REQ, {1: 4096}) == 2 == least_loaded(snaps, REQ)


def test_when_every_instance_is_busy_the_longest_hit_wins_again():
    # HEAD: the busy filter leaves nothing, so every instance is a candidate (dispatch_scheduler.py 101-105).
    snaps = [busy(0), snap(1, free=50, running=10), busy(2)]
    assert all(is_busy(s) for s in snaps)
    assert cache_aware(snaps, REQ, {1: 768, 2: 512}) == 1
    assert cache_aware(snaps, REQ, {}) == least_loaded(snaps, REQ) == 0


def test_a_hit_below_one_chunk_falls_back_to_load():
    snaps = [snap(0, free=800), snap(1, free=400)]
    assert cache_aware(snaps, REQ, {1: 255}) == 0
    assert cache_aware(snaps, REQ, {1: 240, 0: 0}) == 0
    assert cache_aware(snaps, REQ, {1: 256}) == 1


def test_equal_chunk_counts_go_to_the_lowest_id_not_the_freer_or_the_longer_in_tokens():
    snaps = [snap(0, free=800), snap(1, free=200), snap(2, free=150)]
    assert cache_aware(snaps, REQ, {2: 512, 1: 512}) == 1
    assert cache_aware(snaps, REQ, {2: 767, 1: 512}) == 1  # both 2 chunks
    assert cache_aware(snaps, REQ, {2: 768, 1: 767}) == 2  # 3 chunks vs 2


def test_a_terminating_instance_is_never_chosen_while_others_exist():
    snaps = [snap(0, free=300), snap(1, free=851, running=0, term=True), snap(2, free=400)]
    assert cache_aware(snaps, REQ, {1: 4096}) == 2
    assert cache_aware(snaps, REQ, {1: 4096, 0: 256}) == 0
    all_busy = [busy(0), snap(1, free=851, running=0, term=True), busy(2)]
    assert cache_aware(all_busy, REQ, {1: 4096, 2: 256}) == 2
    assert cache_aware(all_busy, REQ, {1: 4096}) == 0  # least-loaded among the live; equal F_d: lowest id
    only_draining = [snap(0, term=True), snap(1, term=True)]
    assert cache_aware(only_draining, REQ, {1: 512}) == 1


def test_the_priority_penalty_makes_a_cached_instance_of_the_other_class_busy():
    # A high-priority request: F_d charges an instance not hosting priority T - 100 blocks.
    req = RequestSpec(0, 0.0, 4096, 10, HIGH)
    snaps = [snap(0, free=800, prio=True), snap(1, free=800)]
    assert is_busy(snaps[1], HIGH) and not is_busy(snaps[1], NORMAL)
    assert cache_aware(snaps, req, {1: 1024}) == 0
    assert cache_aware(snaps, REQ, {1: 1024}) == 1


def test_a_two_argument_call_is_least_loaded():
    snaps = [snap(0, free=300), snap(1, free=700), snap(2, free=700)]
    assert cache_aware(snaps, REQ) == least_loaded(snaps, REQ) == 1


def test_transfer_hint_is_heads_recorded_hit_length_and_penalty():
    # The best hit exceeds the chosen instance's by 4 chunks = 1024 > 1000 tokens: a transfer.
    assert transfer_hint({0: 1280, 1: 256}, 1) == (1280, TRANSFER_PENALTY)
    assert transfer_hint({0: 1280}, 2) == (1280, TRANSFER_PENALTY)
    # 3 chunks = 768 <= 1000: the chosen instance's own hit, no penalty.
    assert transfer_hint({0: 1024, 1: 256}, 1) == (256, 1.0)
    # Whole chunks only: 1100 -> 4, 300 -> 1 (a gap of 3 chunks); 1300 -> 5 (a gap of 4).
    assert transfer_hint({0: 1100, 1: 300}, 1) == (256, 1.0)
    assert transfer_hint({0: 1300, 1: 300}, 1) == (1280, TRANSFER_PENALTY)
    assert transfer_hint({}, 0) == (0, 1.0)


def test_registered_as_an_opt_in_prefix_aware_policy():
    policy = POLICIES["cache-aware"]
    assert policy.prefix_aware and not policy.migrates and policy.dispatch is cache_aware
    assert "cache-aware" not in DEFAULT_POLICIES
    assert not any(p.prefix_aware for name, p in POLICIES.items() if name != "cache-aware")


# ------------------------------------------------------------------ properties
rows = st.lists(
    st.tuples(st.integers(0, 851), st.integers(0, 64), st.integers(0, 8), st.floats(0, 2000),
              st.booleans(), st.booleans(), st.integers(0, 8)),
    min_size=1, max_size=12,
)


def build(rs):
    return [snap(i, free=f, running=r, waiting=q, wall=w if q else 0.0, term=t, prio=p, wm=wm)
            for i, (f, r, q, w, t, p, wm) in enumerate(rs)]


@given(rows, st.sampled_from([NORMAL, HIGH]))
def test_without_hits_it_is_least_loaded(rs, priority):
    snaps = build(rs)
    req = RequestSpec(0, 0.0, 1000, 10, priority)
    expected = least_loaded(snaps, req)
    assert cache_aware(snaps, req) == expected
    assert cache_aware(snaps, req, {}) == expected
    assert cache_aware(snaps, req, {s.instance: 255 for s in snaps}) == expected  # no whole chunk anywhere


@given(rows, st.sampled_from([NORMAL, HIGH]), st.lists(st.integers(0, 8 * CHUNK_TOKENS), max_size=12))
def test_the_choice_follows_heads_rule(rs, priority, hit_list):
    snaps = build(rs)
    req = RequestSpec(0, 0.0, 4096, 10, priority)
    hits = dict(enumerate(hit_list))
    chosen = cache_aware(snaps, req, hits)
    live = [s for s in snaps if not s.terminating] or snaps
    assert chosen in {s.instance for s in live}
    candidates = [s for s in live if dispatch_freeness(s, priority) >= BUSY_THRESHOLD] or live
    chunks = {s.instance: cached_chunks(hits.get(s.instance, 0)) for s in candidates}
    most = max(chunks.values())
    if most:
        assert chosen == min(i for i, c in chunks.items() if c == most)
    else:
        assert chosen == least_loaded(snaps, req)
