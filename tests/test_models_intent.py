"""Scheduler intent (models/intent.py): the real scheduler meets every intent property, each
seeded slip is caught by one, and models/scope.py's safety check alone misses every slip."""

from __future__ import annotations

import pytest

from llumverify.models.intent import (
    INTENT, INTENT_MUTANTS, NORMAL, REAL, _bounded_pairing, check_intent, freest_faults, pairing_faults,
)
from llumverify.models.scope import Scheduler, explore_cluster, scheduler_inputs
from llumverify.scheduler.pairing import MigrationLoad
from llumverify.scheduler.snapshot import InstanceSnapshot


def test_real_scheduler_meets_every_intent_property() -> None:
    results = check_intent()
    assert [r.name for r in results] == list(INTENT)
    assert all(r.holds and not r.faults for r in results), [r for r in results if not r.holds]
    assert min(r.checked for r in results if r.name not in ("watermark", "migratable_private")) > 18_000


def test_only_rules_checked_for_any_input_say_proved() -> None:
    """A slip that shows only past the bound (dispatch scanning the first 5 instances) passes the
    bounded run, so the bounded rows must say HOLDS, never PROVED; it fails at 6 instances."""
    def first_five(snaps, request):  # type: ignore[no-untyped-def]
        return REAL.dispatch(snaps[:5], request)
    slip = REAL._replace(dispatch=first_five)
    bounded = {r.name: r for r in check_intent(slip, 5, 1, 4)}
    assert bounded["dispatch_freest"].holds and bounded["dispatch_freest"].verdict == "HOLDS"
    six = [InstanceSnapshot(i, 1000, 0, i, 1, 0, 0.0, 0) for i in range(6)]  # instance 5 is freest
    assert freest_faults(six, NORMAL, first_five(six, NORMAL), True)
    verdicts = {r.name: r.verdict for r in check_intent()}
    assert verdicts == {n: "PROVED" if n == "watermark" else "HOLDS" for n in INTENT}


@pytest.mark.slow
def test_real_scheduler_meets_intent_with_two_flagged_among_five() -> None:  # ~12 s
    assert all(r.holds for r in check_intent(REAL, 5, 2, 5))


def test_pairing_faults_name_each_property() -> None:
    loads = [MigrationLoad(0, -2.0), MigrationLoad(1, -1.0), MigrationLoad(2, 1.0), MigrationLoad(3, 2.0),
             MigrationLoad(4, 0.0)]
    assert pairing_faults(loads, 0.0, False, [(0, 3), (1, 2)]) == {"pair_roles": [], "pair_order": [], "trigger": []}
    crossed = pairing_faults(loads, 0.0, False, [(0, 2), (1, 3)])
    assert len(crossed["pair_order"]) == 2 and crossed["trigger"]
    at_t = pairing_faults(loads, 0.0, False, [(4, 3)])
    assert "source 4" in at_t["pair_roles"][0]
    assert pairing_faults(loads, 0.0, False, [(0, 3)])["trigger"]  # the rank-1 pair is missing
    busy = [MigrationLoad(0, -2.0, migrating=True), *loads[1:]]
    assert pairing_faults(busy, 0.0, False, [(1, 2)])["trigger"] == []  # artifact: the rank-0 pair is skipped
    assert pairing_faults(busy, 0.0, True, [(1, 3)])["trigger"] == []  # HEAD: busy ones are not ranked


def test_freest_faults_ties_and_draining() -> None:
    snaps = [InstanceSnapshot(i, 1000, 0, free, 1, 0, 0.0, 0, terminating=term)
             for i, (free, term) in enumerate([(5, False), (9, True), (5, False)])]
    assert freest_faults(snaps, NORMAL, 0, True) == []
    assert "lowest id 0" in freest_faults(snaps, NORMAL, 2, True)[0]
    assert "not a serving instance" in freest_faults(snaps, NORMAL, 1, True)[0]
    drained = [s._replace(terminating=True) for s in snaps]
    assert freest_faults(drained, NORMAL, None, False) == []
    assert freest_faults(drained, NORMAL, 0, True) == []  # dispatch falls back to every instance


@pytest.mark.parametrize("name", [n for n, (_, s) in INTENT_MUTANTS.items() if s.pair is not REAL.pair])
@pytest.mark.slow  # the cluster model: ~4 s each
def test_scope_safety_check_misses_each_pairing_slip(name: str) -> None:
    """Without intent these slips pass `check`: the bounded inputs and the cluster model find no
    safety fault (the other slips change functions scope never calls: dispatch, P/D, freeness)."""
    sched = Scheduler(pair=INTENT_MUTANTS[name][1].pair)
    assert scheduler_inputs(sched=sched)[1] == []
    assert explore_cluster(1, sched=sched).faults == ()


def test_bounded_pairing_counts_every_round_once_and_keeps_every_round_s_faults() -> None:
    """Each property's count is the number of rounds checked, and its faults are all the rounds'
    (a subject that pairs nothing on every other round has faults in many rounds)."""
    rounds: list[None] = []
    expected: dict[str, list[str]] = {"pair_roles": [], "pair_order": [], "trigger": []}

    def pair(loads, t, busy_first=False):  # type: ignore[no-untyped-def]
        got = [] if len(rounds) % 2 else REAL.pair(loads, t, busy_first)
        rounds.append(None)
        for name, fs in pairing_faults(loads, t, busy_first, got).items():
            expected[name] += fs
        return got

    out = _bounded_pairing(REAL._replace(pair=pair), 3, 1, 3)
    assert {n: c for n, (c, _) in out.items()} == dict.fromkeys(expected, len(rounds))
    assert {n: fs for n, (_, fs) in out.items()} == expected and len(expected["trigger"]) > 1
