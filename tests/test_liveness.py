"""Liveness: the explicit state graph is the protocol's, lassos are fair and shortest-prefix,
the ranking proofs hold for our designs, and the as-written variants' findings are stable."""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import pytest
from conftest import CheckRun, variant_part

from llumverify.models.liveness import (
    BOUND, Fairness, LivenessResult, explore, lassos, rank_proof, roots,
)
from llumverify.models.mutants import MUTANTS
from llumverify.protocol.state import FIELDS, Mig, Req, State
from llumverify.protocol.variants import MUST_PROVE, VARIANTS
from llumverify.properties.liveness import FAILURES, LIVENESS, fair_groups


def _real_successors(v, t):
    """The protocol's own actions on a concrete State (what the simulator runs)."""
    s = State(**dict(zip(FIELDS, t)))
    return {(a.name, _fields(a.effect(s, v))) for a in v.actions if a.guard(s, v)}


def _fields(s: State) -> tuple:
    """A state's fields in FIELDS order (the explored graph's tuple form)."""
    return tuple(getattr(s, f) for f in FIELDS)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_compiled_graph_is_the_protocols(name: str) -> None:
    """Every explored state's successors (compiled from the Z3 terms) equal those of the
    protocol's actions, on the smallest configuration of the bound."""
    v = VARIANTS[name]
    sg = explore(v, BOUND[:1])
    assert isinstance(sg.graph, nx.DiGraph) and sg.graph.number_of_nodes() == len(sg.states)
    for u, t in enumerate(sg.states):
        compiled = {(sg.names[a], sg.states[w]) for a, w in sg.out[u]}
        assert compiled == _real_successors(v, t), (name, u)


@pytest.mark.slow
@pytest.mark.parametrize("name", MUST_PROVE)
def test_our_designs_are_live_unbounded_and_within_the_bound(name: str, check_cli: Callable[..., CheckRun]) -> None:
    """Read from the run of every variant the findings report's tests share (`check` runs
    check_liveness, whose PROVED is the ranking proof's, on the explicit graph of the bound too).
    The ranking proof for every property at once is proved here: check falls back to a proof per
    property, so its verdicts alone would not show that the joint one holds (under a second CPU-s)."""
    assert rank_proof(VARIANTS[name]).proved
    run = check_cli("--traces")
    live = run.report["variants"][name]["liveness"]
    assert [r["property"] for r in live] == list(LIVENESS)
    assert all(r["verdict"] == "PROVED" and r["explicit_states"] > 10_000 for r in live)
    part = variant_part(run, name)
    assert all(f"  {n:<22} PROVED (unbounded; ranking function)\n" in part for n in LIVENESS)


@pytest.mark.slow
def test_lassos_of_the_code_variants(check_cli: Callable[..., CheckRun]) -> None:
    """AE: a crash of D after stage 0 strands the paused request for ever (8 steps, the no_loss
    trace); HEAD: a failed pull consumes the lease record, so the blocks are never freed. Read
    from the shared run of every variant's JSON."""
    report = check_cli("--traces").report
    ae, head = ({r["property"]: r for r in report["variants"][n]["liveness"]} for n in ("ae", "head"))
    assert ae["no_stuck_pause"]["verdict"] == "VIOLATED" and ae["no_stuck_pause"]["length"] == 8
    assert ae["reservation_freed"]["verdict"] == "VIOLATED"
    lasso = head["reservation_freed"]["lasso"]
    actions = [step["action"] for step in lasso["prefix"]["steps"]]
    assert lasso["loop"] == [] and actions[-1] == "d_copy_fail" and "crash_s" in actions
    assert head["migration_terminates"]["verdict"] == "PROVED"


def test_lasso_ends_in_a_fair_component() -> None:
    """The lasso's last state is stuck: no fair process is enabled there, the goal is false."""
    sg = explore(VARIANTS["ae"])
    fair = Fairness(sg)
    lasso = lassos(sg)["no_stuck_pause"]
    assert lasso is not None
    last = lasso.prefix.states[-1]
    assert last.req == Req.PAUSED and last.s_alive and last.status != Mig.RUNNING
    index = {t: i for i, t in enumerate(sg.states)}
    x = index[tuple(getattr(last, f) for f in FIELDS)]
    assert x in fair.stutter


@pytest.mark.slow
def test_a_livelock_is_a_fair_cycle() -> None:
    """S retrying a refused pre-allocation instead of aborting: while other load keeps D's slot
    (or memory), S and D go round for ever with the request paused. Both act in the cycle, so
    it is fair; the migration never ends."""
    lasso = lassos(explore(MUTANTS["retry_refused_alloc"].variant))["migration_terminates"]
    assert lasso is not None and lasso.loop.actions
    assert lasso.loop.states[0] == lasso.loop.states[-1]
    assert {"d_alloc_refuse", "s_alloc_fail"} <= set(lasso.loop.actions)
    assert "then for ever, repeating:" in lasso.render()
    # the JSON carries the loop too (every lasso check finds in the variants stays put: an empty loop)
    as_json = LivenessResult("migration_terminates", "VIOLATED", 1, lasso).to_json()
    assert [s["action"] for s in as_json["lasso"]["loop"]] == list(lasso.loop.actions)
    assert as_json["loop_length"] == len(lasso.loop) > 0 and as_json["length"] == len(lasso)


@pytest.mark.slow
def test_swallowed_copy_failure_is_a_stuck_pause() -> None:
    """Issue #11 (c): S swallows the failed copy reply; every safety property still holds, but
    the request stays paused for ever."""
    found = lassos(explore(MUTANTS["swallow_copy_failure"].variant))
    lasso = found["no_stuck_pause"]
    assert lasso is not None and lasso.loop.actions == ()
    assert lasso.prefix.actions[-2:] == ("d_copy_fail", "s_copy_fail")
    assert "then for ever: no step of S, D" in lasso.render()


def test_fairness_and_failures_are_what_the_docs_say() -> None:
    groups = fair_groups(VARIANTS["safe"])
    assert set(groups) == {"S", "D", "lease_expire"}
    assert "timeout_commit" in FAILURES and "crash_d" in FAILURES
    assert "d_oom" not in FAILURES and "preempt" not in FAILURES  # load may go on
    assert len(roots(VARIANTS["safe"])) == len(BOUND)
