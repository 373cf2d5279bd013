"""Scope beyond one migration (models/scope.py): the composition obligations, the scheduler's
exhaustive inputs and the cluster model, and that each catches the bugs it is there for."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import z3
from conftest import CheckRun

from llumverify.models.encoding import PRE
from llumverify.models.intent import INTENT_MUTANTS
from llumverify.models.mutants import MUTANTS, run_mutant
from llumverify.models.scope import (
    COVERAGE, LIMITS, OBLIGATIONS, REAL as REAL_SCHEDULER, SCHEDULER_MUTANTS, _rely, _waiting_start,
    explore_cluster, obligations, pairing_faults, scheduler_inputs, scheduler_mutant_kills,
)
from llumverify.protocol.state import Req
from llumverify.protocol.variants import VARIANTS
from llumverify.scheduler.pairing import MigrationLoad


@pytest.mark.slow
@pytest.mark.parametrize("name", ["safe", "pd"])
def test_our_designs_meet_every_obligation(name: str) -> None:
    got = obligations(VARIANTS[name])
    assert [o.name for o in got] == list(OBLIGATIONS)
    assert all(o.holds for o in got), got


def test_a_committed_copy_must_own_its_blocks_to_hand_over() -> None:
    """HEAD's step before the pause grows the request after D was asked for its blocks, so its
    committed copy need not own them and a re-migration from it starts from a broken state. The
    AE's D installs the block table it reserved for the whole paused request whatever its final
    receive did (its KV may be missing, `commit_after_copy`, but not its blocks), and the AE's
    lemmas on that receive prove it, so its hand-over holds."""
    head = {o.name: o for o in obligations(VARIANTS["head"])}["handover"]
    assert not head.holds and "own exactly its blocks" in head.why
    assert {o.name: o for o in obligations(VARIANTS["ae"])}["handover"].holds


def test_obligations_can_fail() -> None:
    """Not vacuous: an invariant that pins S's free pool is not stable under other load, and
    one that says every request runs excludes waiting starts."""
    safe = VARIANTS["safe"]
    rely = _rely(safe, {"s_free_zero": PRE.s_free == 0})
    assert not rely.holds and "S load" in rely.why
    assert not _waiting_start(safe, {"running": z3.And(PRE.req == int(Req.RUNNING))}).holds


@pytest.mark.slow
@pytest.mark.parametrize("name, obligation", [("free_frees_any_slot", "guarantee"),
                                              ("fence_frees_committed", "handover"),
                                              ("late_stage_skips_abort_check", "any_stage_count")])
def test_scope_mutants_are_killed_by_their_obligation(name: str, obligation: str) -> None:
    result = run_mutant(MUTANTS[name], 12)
    assert result.killed and f"scope:{obligation}" in result.violated


def test_scheduler_inputs_exhaustive_and_clean() -> None:
    checked, faults = scheduler_inputs()
    assert checked > 100_000 and faults == []


def test_pairing_faults_names_each_fault() -> None:
    loads = [MigrationLoad(0, -1.0), MigrationLoad(1, 1.0, migrating=True),
             MigrationLoad(2, 1.0, terminating=True)]
    faults = pairing_faults(loads, [(0, 0), (0, 1), (0, 2), (0, 5)])
    assert any("paired with itself" in f for f in faults)
    assert any("concurrency limit" in f for f in faults)
    assert any("draining instance 2" in f for f in faults)
    assert any("not serving" in f for f in faults)
    assert any("two migrations of one round" in f for f in faults)


@pytest.mark.parametrize("limit", [pytest.param(n, marks=pytest.mark.slow) if n > 1 else n for n in LIMITS])  # 2: 1.8 s
def test_cluster_model_reaches_every_goal_without_fault(limit: int) -> None:
    result = explore_cluster(limit)
    assert result.faults == () and result.missed == ()
    assert result.states > 10_000 and result.rounds > 1_000
    assert set(COVERAGE) >= {"re-migration", "in and out of one instance at once"}


@pytest.mark.slow
def test_every_seeded_scheduler_bug_and_intent_slip_is_caught() -> None:
    kills = scheduler_mutant_kills()
    assert set(kills) == set(SCHEDULER_MUTANTS) | set(INTENT_MUTANTS) and all(kills.values()), kills
    # the real scheduler's cluster model finding nothing: test_cluster_model_reaches_every_goal_without_fault


@pytest.mark.slow
def test_busy_marks_forgotten_exceed_the_limit_in_the_cluster() -> None:
    result = explore_cluster(1, sched=SCHEDULER_MUTANTS["pair_forgets_busy"][1])
    assert any("limit 1" in f for f in result.faults)


@pytest.mark.slow
def test_two_links_sharing_instances_are_proved_for_our_designs(check_cli: Callable[..., CheckRun]) -> None:
    """Two concurrent migrations of two requests, sharing one or both instances in every way of
    models/product.SHARINGS: the links' invariants and the coupling are inductive. `check` proves it
    for our designs as the obligation two_links (read from the runs other tests share, not re-proved)."""
    for name in ("safe", "pd"):
        scope = check_cli("--traces").report["variants"][name]["scope"]
        assert [(o["obligation"], o["verdict"]) for o in scope if o["obligation"] == "two_links"] == [
            ("two_links", "PROVED")], name


@pytest.mark.slow
def test_two_links_catch_a_free_that_frees_the_other_links_slot() -> None:
    """Tried first with a plausible slip: D's free handler marks its one migration slot free
    whoever holds it; in the product the other link still holds the slot."""
    from llumverify.models.mutants import MUTANTS
    from llumverify.models.product import product
    failed = {r.sharing for r in product(MUTANTS["free_frees_any_slot"].variant) if not r.holds}
    assert failed == {"same D", "same S and D"}


def test_first_fault_stops_at_the_full_run_s_first_faulty_input() -> None:
    """scheduler_inputs(first_fault=True) (what a seeded bug's kill runs) finds a fault exactly when
    the full run does, and that run's first one; without a fault it checks every input."""
    for sched in [REAL_SCHEDULER, *(s for _, s in SCHEDULER_MUTANTS.values())]:
        checked, faults = scheduler_inputs(2, 2, sched)
        first_checked, first = scheduler_inputs(2, 2, sched, first_fault=True)
        if not faults:
            assert (first_checked, first) == (checked, [])
        else:
            assert first and first == faults[:len(first)] and first_checked < checked
