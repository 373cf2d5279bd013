"""Migration pairing, request selection and autoscaling: pure rules, checked on random inputs."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from llumverify.scheduler.autoscale import cluster_freeness, decide, drains_to_cancel, freeness_without_newest
from llumverify.scheduler.pairing import MigrationLoad, is_destination, is_source, pair_instances
from llumverify.scheduler.selection import Candidate, choose_request
from llumverify.scheduler.snapshot import InstanceSnapshot

loads = st.lists(
    st.builds(
        MigrationLoad,
        instance=st.integers(0, 40),
        freeness=st.one_of(st.floats(-50, 200, allow_nan=False), st.just(-1000.0), st.just(math.inf)),
        has_preempted=st.booleans(),
        migrating=st.booleans(),
        terminating=st.booleans(),
    ),
    max_size=20,
    unique_by=lambda load: load.instance,
)


@given(loads, st.floats(0, 20, allow_nan=False), st.booleans())
def test_pairing_is_a_matching_of_sources_to_destinations(batch, threshold, busy_first):
    pairs = pair_instances(batch, threshold, busy_first=busy_first)
    by_id = {load.instance: load for load in batch}
    used = [i for pair in pairs for i in pair]
    assert len(used) == len(set(used)), "an instance is in at most one migration"
    for src, dst in pairs:
        assert src != dst
        assert is_source(by_id[src], threshold) and not by_id[src].migrating
        assert is_destination(by_id[dst], threshold) and not by_id[dst].migrating
    if busy_first:  # HEAD: the instances not migrating pair among themselves
        free_sources = [l for l in batch if not l.migrating and is_source(l, threshold)]
        free_dests = [l for l in batch if not l.migrating and is_destination(l, threshold)]
        assert len(pairs) == min(len(free_sources), len(free_dests))
    else:  # the AE: the index-by-index pairing of every instance, less the pairs touching a busy one
        everyone = pair_instances([replace(l, migrating=False) for l in batch], threshold)
        assert pairs == [(s, d) for s, d in everyone if not by_id[s].migrating and not by_id[d].migrating]


def test_pairing_matches_most_loaded_with_freest():
    batch = [
        MigrationLoad(0, 1.0),
        MigrationLoad(1, 50.0),
        MigrationLoad(2, -3.0),
        MigrationLoad(3, 20.0),
        MigrationLoad(4, 10.0, has_preempted=True),
        MigrationLoad(5, -1000.0, terminating=True),
        MigrationLoad(6, 90.0, migrating=True),
    ]
    # the AE pairs 5-6, 2-1, 0-3 and skips 5-6 (6 is migrating): 5 waits for the next round
    assert pair_instances(batch, threshold=3) == [(2, 1), (0, 3)]
    # HEAD drops 6 first: 5-1, 2-3
    assert pair_instances(batch, threshold=3, busy_first=True) == [(5, 1), (2, 3)]


def test_selection_policies():
    cands = [
        Candidate(request=10, kv_tokens=500, admitted_seq=1),
        Candidate(request=11, kv_tokens=40, admitted_seq=2),
        Candidate(request=12, kv_tokens=900, admitted_seq=3, high_priority=True),
        Candidate(request=13, kv_tokens=200, admitted_seq=4, migrating=True),
    ]
    assert choose_request(cands, "lcfs") == 11
    assert choose_request(cands, "sr") == 11
    assert choose_request(cands, "lr") == 10
    assert choose_request([cands[2], cands[3]], "lcfs") is None


def _snap(i, free, running, waiting=0, wall=0.0):
    return InstanceSnapshot(
        instance=i, num_blocks=851, watermark_blocks=8, free_blocks=free, num_running=running,
        num_waiting=waiting, waiting_prompt_blocks=wall, head_blocks=0,
    )


def test_cluster_freeness_aggregates_before_dividing():
    snaps = [_snap(0, 108, 10), _snap(1, 8, 0, waiting=2, wall=30.0)]
    assert cluster_freeness(snaps) == (100 + 0 - 30.0) / 12
    assert cluster_freeness([_snap(0, 851, 0)]) == math.inf


def test_autoscale_adds_until_freeness_reaches_x_and_respects_bounds():
    kw = dict(scale_up_below=10, scale_down_above=60, min_instances=1, max_instances=8)
    busy = [_snap(0, 58, 10), _snap(1, 58, 10)]  # F = 5: one empty instance lifts it to 47.5
    assert decide(busy, 0, **kw).delta == 1
    crowded = [_snap(0, 8, 100), _snap(1, 8, 100)]  # F = 0: 851 k / 200 >= 10 needs k = 3
    assert decide(crowded, 0, **kw).delta == 3
    assert decide(crowded, 1, **kw).delta == 2  # the one starting already counts
    assert decide(crowded, 0, **{**kw, "max_instances": 3}).delta == 1


def test_autoscale_terminates_newest_when_freeness_without_it_exceeds_y():
    kw = dict(scale_up_below=10, scale_down_above=60, min_instances=1, max_instances=8)
    idle = [_snap(0, 708, 10), _snap(1, 851, 0), _snap(2, 851, 0)]
    assert freeness_without_newest(idle) == (700 + 843) / 10
    decision = decide(idle, 0, **kw)
    assert (decision.delta, decision.victim) == (-1, 2)
    assert decide(idle[:1], 0, **kw).delta == 0  # at the minimum
    assert decide(idle, 1, **kw).delta == 0  # never terminate while one is starting
    loaded = [_snap(0, 308, 10), _snap(1, 8, 10)]  # without the newest: 300 / 20 = 15
    assert decide(loaded, 0, **kw).delta == 0


def test_autoscale_stays_within_min_and_max():
    """Hunt 3: `len(active) > min` written `>=` (the last idle instance drained: F without it is
    inf) and `room` forgetting the instances still starting (max exceeded) passed every test."""
    kw = dict(scale_up_below=10, scale_down_above=60, min_instances=1, max_instances=8)
    assert decide([_snap(0, 851, 0)], 0, **kw).delta == 0  # the last, idle instance stays
    two = [_snap(0, 708, 10), _snap(1, 851, 0)]  # F without the newest: 70 > 60
    assert decide(two, 0, **{**kw, "min_instances": 2}).delta == 0
    crowded = [_snap(0, 8, 100), _snap(1, 8, 100)]
    assert decide(crowded, 1, **{**kw, "max_instances": 3}).delta == 0  # 2 serving + 1 starting = max
    kinds = [_snap(0, 851, 0), _snap(0, 708, 10), _snap(0, 58, 10), _snap(0, 8, 100)]
    for n in range(1, 4):
        for combo in itertools.product(kinds, repeat=n):
            active = [s._replace(instance=i) for i, s in enumerate(combo)]
            for starting, low, high in itertools.product(range(3), range(1, 4), range(1, 6)):
                if not low <= n <= high:
                    continue
                d = decide(active, starting, **{**kw, "min_instances": low, "max_instances": high})
                assert n + starting + max(d.delta, 0) <= max(high, n + starting), (n, starting, low, high, d)
                if d.delta < 0:
                    assert n > low and starting == 0 and d.victim == active[-1].instance


def test_scaling_up_cancels_the_newest_drains_before_starting_instances():
    assert drains_to_cancel([1, 4, 6], 2) == ([6, 4], 0)
    assert drains_to_cancel([1, 4], 3) == ([4, 1], 1)  # both serve again, one more starts
    assert drains_to_cancel([1, 4], 0) == ([], 0)
    assert drains_to_cancel([1, 4], -1) == ([], -1)  # scaling down cancels nothing
