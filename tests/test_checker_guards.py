"""Guards against one-line slips in the checker itself (models/, properties/): each test fails
with a slip that left `check --traces`'s output unchanged or weakened what PROVED means while
every other fast test passed (session 44's slip hunt in the checker: docs/measurements.md)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import CheckRun, variant_part

from llumverify.models.check import check_variant, full_depth
from llumverify.properties.safety import PROPERTIES
from llumverify.protocol.state import FIELDS, Mig
from llumverify.protocol.variants import VARIANTS


def test_no_counterexample_within_the_depth_is_holds_not_proved() -> None:
    """BMC that finds nothing proves nothing: ae's no_leak breaks in 3 steps, so at depth 2 it HOLDS (to 2 steps)
    and at depth 3 it is VIOLATED in 3 (Spacer, asked at the depth reached, must not prove it either)."""
    one = {"no_leak": PROPERTIES["no_leak"]}
    (got,) = check_variant(VARIANTS["ae"], depth=2, properties=one)
    assert (got.verdict, got.depth, got.trace) == ("HOLDS", 2, None)
    (got,) = check_variant(VARIANTS["ae"], depth=3, properties=one)
    assert got.verdict == "VIOLATED" and got.trace is not None and len(got.trace) == 3


def test_the_default_depth_covers_a_migration_through_every_stage() -> None:
    """full_depth(v) is at least the shortest run that commits after v's last allowed stage (the
    explicit graph's breadth-first distance; 17 steps for safe's three stages)."""
    from llumverify.models.liveness import _bfs_tree, explore
    v = VARIANTS["safe"]
    sg = explore(v)
    dist, _ = _bfs_tree(sg)
    status, stage = FIELDS.index("status"), FIELDS.index("stage")
    need = min(dist[i] for i, s in enumerate(sg.states)
               if s[status] == Mig.FINISHED and s[stage] == v.max_stages - 1)
    assert need == 17 <= full_depth(v)


def _verbatim(name: str) -> str:
    """The report's verbatim `check --variant NAME --traces` block (its "Current output" section),
    without the scheduler's lines that follow the variant's part."""
    import re
    from test_findings_report import REPORT
    current = REPORT.read_text().split("\n## Current output", 1)[1]
    section = current.split(f"\n### `{name}`\n", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None, name
    return block.group(1).split("\n\nscheduler (")[0].rstrip("\n") + "\n"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_prints_exactly_the_reports_verbatim_output(name: str, check_cli: Callable[..., CheckRun]) -> None:
    """Every verdict line and every trace, whole and in order, is the report's, in the fast tier: it reads the
    shared `check --traces` run other fast tests start anyway (test_findings_report's tests, which ask only that
    each line and block appear somewhere in the report, are slow). A trace that is no longer the least, a
    verdict that moved, a property that went from VIOLATED to PROVED all show here."""
    assert variant_part(check_cli("--traces"), name) == _verbatim(name)


def test_each_trace_is_the_least_for_its_own_property() -> None:
    """Searched together (as `check` searches every property its proof left open, over the proved invariant), each
    property violated gets its own least trace, the one a search for it alone gives: a model that breaks several
    at once must not hand one's least trace to the others (ae: no_leak and slot_released, both in 3 steps)."""
    from llumverify.models.bmc import violations
    from llumverify.models.check import proof_of
    v = VARIANTS["ae"]
    inv = proof_of(v).predicates
    preds = {n: p.predicate for n, p in PROPERTIES.items() if n not in proof_of(v).proved and p.step is None}
    together = violations(v, preds, 3, inv, least=True).traces
    assert together["no_leak"] is not None and together["slot_released"] is not None
    for n in ("no_leak", "slot_released"):
        assert together[n] == violations(v, {n: preds[n]}, 3, inv, least=True).traces[n], n


@pytest.mark.parametrize("name", ["safe", "ae", "head"])
def test_bmcs_step_is_every_action_and_only_under_its_label(name: str) -> None:
    """The one transition relation BMC unrolls (Encoding.step) takes each action exactly when its label names it:
    an action left out of the disjunction (the last, say: timeout_commit, head's duplicate run) would hide every
    counterexample through it while Houdini, which asks action by action, still saw it."""
    import z3
    from llumverify.models.encoding import encode
    enc = encode(VARIANTS[name])
    s = z3.Solver()
    for i, rel in enumerate(enc.relations.values()):
        assert s.check(enc.label == i, z3.Not(enc.step == rel)) == z3.unsat, i
    assert s.check(enc.step, z3.Or(enc.label < 0, enc.label >= len(enc.relations))) == z3.unsat


def test_houdini_drops_every_candidate_some_initial_state_breaks() -> None:
    """Init => c for every survivor, however many initial states it takes to show the failures: `bs == 1` and
    `bs != 1` are each false in some initial state (no one state breaks both) and both are inductive (bs never
    changes), so only a loop that asks again after each model drops both."""
    from llumverify.models.induction import houdini
    got = houdini(VARIANTS["safe"], {"bs_is_1": lambda s: s.bs == 1, "bs_not_1": lambda s: s.bs != 1})
    assert got == ()


def test_a_certificate_proves_nothing_about_a_property_the_initial_state_breaks() -> None:
    """chc.certified checks Init => cert /\\ P: a property false in some initial state is refused even with a
    certificate (`true`) whose step check passes, here because the property is among the assumed facts."""
    import z3
    from llumverify.models import chc
    v = VARIANTS["head"]
    two_blocks = lambda s: s.nblk >= 2  # noqa: E731 (false for a one-block request, which init allows)
    assert not chc.certified(v, z3.BoolVal(True), two_blocks, None, (two_blocks,))


def test_vacuity_goals_name_every_phase_status_and_d_side_state() -> None:
    """reach_goals has a goal for every value of req, status and d_req (its docstring's list): a goal dropped from
    it is a state `check` no longer asks to be reachable, and a proof vacuous there would pass unnoticed."""
    from llumverify.models.check import reach_goals
    from llumverify.protocol.state import DReq, Req
    goals = set(reach_goals(VARIANTS["safe"]))
    for field, enum in (("req", Req), ("status", Mig), ("d_req", DReq)):
        assert {f"{field}:{x.name}" for x in enum} <= goals, field


def test_unreachable_refuses_a_graph_with_any_root_outside_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """The explicit graph settles reachability only if every one of its initial states is one of the model's: a
    single root outside init (among good ones) makes unreachable() raise, not answer."""
    import llumverify.models.check as check
    from llumverify.models.liveness import roots
    v = VARIANTS["safe"]
    good = roots(v)[0]
    bad = tuple(0 if f == "nblk" else x for f, x in zip(FIELDS, good))  # a request of no blocks: not initial

    class Graph:
        states, roots = [good, bad], [0, 1]

    monkeypatch.setattr(check, "explore", lambda v: Graph())
    with pytest.raises(RuntimeError, match="outside the model's init"):
        check.unreachable(v)


def test_guarantee_fails_an_action_that_changes_an_instances_total() -> None:
    """The guarantee obligation compares each instance's block total before and after every step: a finish that
    forgets to return the request's blocks to S's free pool shrinks S's total (other links' blocks would vanish)."""
    from dataclasses import replace

    from llumverify.models.scope import obligations
    from llumverify.protocol.actions import BASE_ACTIONS
    base = next(a for a in BASE_ACTIONS if a.name == "finish")
    slip = VARIANTS["safe"].derive("slip:finish_keeps_free", "finish frees nothing into S's pool", {
        "finish": replace(base, effect=lambda s, v: base.effect(s, v).replace(s_free=s.s_free))})
    got = {o.name: o for o in obligations(slip)}["guarantee"]
    assert not got.holds and "finish" in got.why


def test_no_ranking_proof_when_a_fair_step_changes_nothing() -> None:
    """Condition (2) is strict: a fair process's step must decrease the ranking. A D whose pull changes nothing
    (the copy message stays on the channel, so it pulls again for ever) is no progress, and no ranking proves it
    live, for every goal at once or any one."""
    from dataclasses import replace

    from llumverify.models.liveness import LIVENESS, rank_proof
    from llumverify.protocol.actions import BASE_ACTIONS
    base = next(a for a in BASE_ACTIONS if a.name == "d_copy")
    v = VARIANTS["safe"].derive("slip:d_copy_changes_nothing", "D's pull leaves every field as it was", {
        "d_copy": replace(base, effect=lambda s, v: s.replace(ack=s.ack))})
    assert rank_proof(v).failed.startswith("(2) d_copy")
    assert not any(rank_proof(v, (g,)).proved for g in LIVENESS)


def test_a_cycle_is_fair_when_a_process_it_never_runs_is_disabled_somewhere_in_it() -> None:
    """Weak fairness: a process that takes no step in a cycle must be disabled at some state of it, not at every
    one. S and D alternate between two states and the lease watcher is enabled in one of them only: the cycle is a
    fair component (a livelock `check` must report), not excused because the watcher was once enabled."""
    from llumverify.models.liveness import Fairness, StateGraph
    v = VARIANTS["safe"]
    names = tuple(a.name for a in v.actions)
    s_act, d_act, lease = names.index("s_copy_done"), names.index("d_copy"), names.index("lease_expire")
    sg = StateGraph(v, names, [(0,), (1,)], [frozenset({s_act, lease}), frozenset({d_act})],
                    [[(s_act, 1)], [(d_act, 0)]], [0], {(0, 1): frozenset({s_act}), (1, 0): frozenset({d_act})})
    assert Fairness(sg).fair_components == [frozenset({0, 1})]


def test_token_growth_takes_a_new_block_only_when_the_last_is_full() -> None:
    """token_growth's step predicate on concrete states: a running request of 4-token blocks with one token in its
    last block may not start a new block (only the token that overflows a full block does)."""
    from llumverify.models.liveness import roots
    from llumverify.properties.safety import token_growth_step
    from llumverify.protocol.state import Req, State
    s = State(**dict(zip(FIELDS, roots(VARIANTS["safe"])[0]))).replace(bs=4, tok=0, nblk=1, req=int(Req.RUNNING))
    assert not token_growth_step(s, s.replace(nblk=2, tok=0))
    assert token_growth_step(s.replace(tok=3), s.replace(nblk=2, tok=0))
    assert token_growth_step(s, s.replace(tok=1))
