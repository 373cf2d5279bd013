"""The checker: safe proved unbounded, code variants' findings, vacuity, mutants, and the
at-most-once bug the new properties found in safe (and pd) before its fix."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import z3
from conftest import CheckRun, printed_trace, variant_part

from llumverify.models.check import check_variant
from llumverify.models.mutants import MUTANTS, NAMED, run, run_mutant
from llumverify.models.stages import any_stage_count, any_stages
from llumverify.protocol.api import start_migration
from llumverify.protocol.state import DReq, Mig, Req
from llumverify.protocol.variants import VARIANTS
from llumverify.properties.safety import PROPERTIES, violated


def test_safe_proves_every_property_unbounded() -> None:
    verdicts = check_variant(VARIANTS["safe"])
    assert {v.prop for v in verdicts if v.verdict == "PROVED"} == {*PROPERTIES, "decisive"} - {"no_pending_pull"}
    # true whatever the protocol does (no request is picked mid-prefill): listed, not counted
    assert {v.prop: v.note for v in verdicts if v.verdict == "TRIVIAL"} == {
        "no_pending_pull": "kv_pending is always False"}


def test_safe_proves_every_property_for_any_stage_count() -> None:
    """The stage count a symbol (models/stages.py): one proof of `safe` for every count at once (it
    replaced one proof per count, 1 to 8), and `check`'s obligation holds."""
    v = any_stages(VARIANTS["safe"])
    assert {x.prop for x in check_variant(v, depth=1) if x.verdict not in ("PROVED", "TRIVIAL")} == set()
    assert any_stage_count(VARIANTS["safe"]).holds


def test_a_named_variant_keeps_its_lemmas_with_any_stage_count() -> None:
    """`v010` gets extra lemmas by name (models/lemmas.py VARIANT_LEMMAS); the symbolic variant must get them too.
    Renamed, it lost two properties in Houdini (single_owner, no_decode_after_pause), a spurious failure."""
    from llumverify.models.lemmas import VARIANT_LEMMAS
    assert "v010" in VARIANT_LEMMAS and any_stages(VARIANTS["v010"]).name == "v010"
    assert any_stage_count(VARIANTS["v010"]).holds


def test_the_stage_count_obligation_is_safes_not_pds() -> None:
    """`safe` runs non-final stages up to its count, a limit a user may raise; `pd` runs one final stage by design
    (no begin_stage), so a count other than 1 is no design of it. Guards the predicate on begin_final, or `or`."""
    from llumverify.models.stages import has_stage_limit, stage_obligations
    from llumverify.protocol.variants import MUST_PROVE
    assert {n: has_stage_limit(VARIANTS[n]) for n in MUST_PROVE} == {"safe": True, "pd": False}
    assert stage_obligations(VARIANTS["pd"]) == [] and not has_stage_limit(any_stages(VARIANTS["safe"]))


def test_a_decision_left_to_chance_from_the_fifth_stage_on_fails_any_stage_count() -> None:
    """`decisive` is a row of check's table settled by the same invariant: a slip that lets begin_stage and
    begin_final both go from the fifth stage on (a final stage begun as a non-final one) breaks no other property
    and is invisible at safe's 3 stages (explicit states at 6 stages find it in 25 steps); the obligation sees it."""
    from dataclasses import replace

    from llumverify.protocol.actions import BASE_ACTIONS, _can_begin, is_final
    from llumverify.protocol.ops import and_, le, not_, or_
    base = next(a for a in BASE_ACTIONS if a.name == "begin_stage")
    slip = VARIANTS["safe"].derive("mutant:late_stage_both_begin", "begin_stage ignores is_final from stage 4", {
        "begin_stage": replace(base, guard=lambda s, v: and_(_can_begin(s, v), or_(le(4, s.stage), not_(is_final(s, v)))))})
    got = any_stage_count(slip)
    assert not got.holds and got.why.startswith("decisive proved for 3 stages")


def test_a_slip_from_the_fifth_stage_on_is_seen_only_with_any_stage_count() -> None:
    """Not vacuous: `late_stage_skips_abort_check` is proved at safe's 3 stages (it cannot reach a
    fifth), and the proof with the count a symbol loses what its abort check carried."""
    slip = MUTANTS["late_stage_skips_abort_check"].variant
    assert {x.prop for x in check_variant(slip, depth=1) if x.verdict not in ("PROVED", "TRIVIAL")} == set()
    got = any_stage_count(slip)
    assert not got.holds and "at_most_once" in got.why


@pytest.mark.slow
def test_default_depth_reaches_every_stage() -> None:
    """BMC's default depth covers a migration using all of a variant's stages: BMC reaches a
    commit after the last allowed stage within it, and not in fewer steps than it allows."""
    from llumverify.models.bmc import search
    from llumverify.models.check import full_depth
    from llumverify.protocol.state import Mig
    v = VARIANTS["safe"]
    depth = full_depth(v)
    got = search(v, {"all stages": lambda s: z3.And(s.status == Mig.FINISHED, s.stage == v.max_stages - 1)},
                 depth).traces["all stages"]
    assert got is not None and len(got) == depth == 17


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_action_and_phase_is_reachable(name: str, check_cli: Callable[..., CheckRun]) -> None:
    """Every goal of models/check.reach_goals (actions, phases, boundaries, stages): `check`
    prints the unreachable ones (read from the run the findings report's tests share)."""
    run = check_cli("--traces")
    assert f"variant {name} done" in run.stderr and "unreachable" not in variant_part(run, name)
    assert run.report["variants"][name]["unreachable"] == []


def test_unreachable_asks_bmc_for_what_the_bound_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A goal met only beyond the liveness bound's sizes (a 5-block request) is found by BMC, not
    reported unreachable; a goal no state meets is reported; the explicit graph settles the rest."""
    import llumverify.models.check as check

    goals, search, asked = check.reach_goals, check.search, []
    extra = {"5 blocks": lambda s: s.nblk == 5, "never": lambda s: s.nblk < 0}
    monkeypatch.setattr(check, "reach_goals", lambda v: {**goals(v), **extra})
    monkeypatch.setattr(check, "search", lambda v, g, *a, **k: asked.append(sorted(g)) or search(v, g, *a, **k))
    assert check.unreachable(VARIANTS["safe"]) == ["never"]
    assert asked == [["5 blocks", "never"]]  # the graph met every other goal


@pytest.mark.slow
def test_head_commit_timeout_duplicates_the_request(check_cli: Callable[..., CheckRun]) -> None:
    """Read from `check --traces`, the run the findings report's tests share."""
    head = variant_part(check_cli("--traces"), "head")
    assert "  single_owner           VIOLATED in 7 steps" in head.splitlines()
    lines = printed_trace(head, "single_owner")
    actions = [ln.split()[1] for ln in lines[1:]]
    # Z3 may order independent steps differently; the race itself is fixed.
    assert {"s_send_commit", "d_commit", "timeout_commit"} <= set(actions)
    assert actions.index("s_send_commit") < actions.index("timeout_commit")
    assert lines[0].startswith("  initial: bs=") and lines[-1].lstrip().startswith("7. ")


@pytest.mark.slow
def test_every_mutant_is_killed_by_its_property() -> None:
    """The hand-written mutants and issue #27's slips (the named ones run below, each with its
    counterexample's length)."""
    names = [n for n, m in MUTANTS.items() if m.origin != "named"]
    survivors = [r.mutant.name for r in run(names, 14, workers=1) if not r.killed]  # xdist has the cores
    assert len(MUTANTS) >= 25 + 8 and not survivors


# Issue #11: plausible bugs that every check passed before KV integrity, at-most-once, commit
# integrity and liveness existed; each is now caught, with the length of its counterexample.
CAUGHT = {
    "abort_dst_frees_kv": ("kv_integrity", 2),
    "begin_final_no_abort_check": ("at_most_once", 2),
    "swallow_copy_failure": ("no_stuck_pause", 6),
    "resume_after_dead_commit": ("at_most_once", 8),
    "readmit_finished": ("at_most_once", 2),
    "abort_src_always_resumes": ("at_most_once", 2),
    "commit_keeps_lease": ("kv_integrity", 6),
    "preempt_while_paused": ("commit_integrity", 7),
    "dead_d_ignored_while_committing": ("no_stuck_pause", 6),
    "retry_refused_alloc": ("migration_terminates", 5),
    "fence_refusal_ignored": ("no_stuck_pause", 8),
    "decode_new_block_early": ("token_growth", 1),
    "timeout_fences_on_d": ("fence_on_cause", 2),
    "begin_stage_ignores_final": ("decisive", 0),
    "readmit_forgets_preemption": ("preemption_seen", 2),
    "free_before_final_copy": ("final_copy_from_held", 4),
    "pick_tail_mid_prefill": ("no_pending_pull", 4),
    "d_release_to_other_pool": ("dst_blocks_freed", 4),
    "lease_expiry_to_other_pool": ("dst_blocks_freed", 3),
    "d_finish_to_other_pool": ("dst_blocks_freed", 7),
    "d_release_off_by_one": ("dst_blocks_freed", 4),
    "d_release_one_too_many": ("dst_blocks_freed", 4),
    "d_alloc_takes_one_more": ("blocks_from_free", 2),
    "d_alloc_from_other": ("blocks_from_free", 2),
    "readmit_takes_one_more": ("blocks_from_free", 2),
    "decode_block_from_other": ("blocks_from_free", 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CAUGHT))
def test_named_slips_are_caught(name: str) -> None:
    expect, length = CAUGHT[name]
    m = MUTANTS[name]
    assert m.expect == expect and m.origin == "named"
    result = run_mutant(m, 12)
    assert result.killed and result.violated[expect] == length


# Pool slips, each tried before relying on the property that catches it: every other property is PROVED for it.
POOL_SLIPS = {**dict.fromkeys(("d_release_to_other_pool", "lease_expiry_to_other_pool", "d_finish_to_other_pool",
                               "d_release_off_by_one", "d_release_one_too_many"), "dst_blocks_freed"),
              **dict.fromkeys(("d_alloc_takes_one_more", "d_alloc_from_other", "readmit_takes_one_more",
                               "decode_block_from_other"), "blocks_from_free")}


@pytest.mark.parametrize("name", list(POOL_SLIPS))
def test_pool_slips_pass_every_property_but_their_own(name: str) -> None:
    """Session 32's mutant hunt: D releasing into the pool other requests use keeps every other property
    (block_accounting counts the blocks, no_leak sees no owner left), so `dst_blocks_freed` is what catches it;
    so do a release one block short and one block over. Session 33: taking blocks (D's reservation, S's new
    decode block or re-admission) from other requests' blocks (two owners) or one more than recorded (a leak)
    passes block_accounting the same way: `blocks_from_free` catches those. `no_pending_pull` is TRIVIAL in
    `safe` itself."""
    verdicts = {v.prop: v.verdict for v in check_variant(MUTANTS[name].variant)}
    assert {n: v for n, v in verdicts.items() if v != "PROVED"} == {"no_pending_pull": "TRIVIAL",
                                                                    POOL_SLIPS[name]: "VIOLATED"}


def test_named_slips_are_all_tested() -> None:
    assert {m.name for m in NAMED} == set(CAUGHT)


def test_safe_resumed_a_request_d_had_committed_before_the_fix() -> None:
    """The 8-step trace at_most_once found in safe (and pd): D commits, dies, and S resumed the
    request it had already handed over. Now S drops its copy: the request was D's."""
    events = ["begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit", "d_commit",
              "crash_d", "s_d_dead"]
    for variant in ("safe", "pd"):
        m = start_migration(blocks=1, tokens_in_last_block=0, src_free=1, dst_free=2,
                            variant=variant, last_stage_blocks=1)
        for name in events:
            pre = m.state
            m = m.apply(name)
            assert not violated(m.state, pre), (variant, name)
        assert m.status is Mig.ABORTED_DST and m.request is Req.MIGRATED
        assert DReq(m.state.d_req) is DReq.RUNNING and m.blocks_held()["src"] == 0
    before = MUTANTS["resume_after_dead_commit"].variant  # safe's s_d_dead as it was
    m = start_migration(blocks=1, src_free=1, dst_free=2, variant=before, last_stage_blocks=1)
    for name in events[:-1]:
        m = m.apply(name)
    pre, m = m.state, m.apply("s_d_dead")
    assert m.request is Req.RUNNING and "at_most_once" in violated(m.state, pre)


GOLDEN = """\
  initial: bs=16 wm=0 s_cap=5 d_cap=10 thr=16 nblk=2 tok=15 s_free=3 d_free=10
   1. begin_final      req=PAUSED pc=ALLOC final=True n=2 p_nblk=2 p_tok=15 m_alloc=True
   2. d_alloc_ok       d_res=2 d_free=8 d_slot=OURS lease=True m_alloc=False ack=OK
   3. timeout_alloc    req=RUNNING status=ABORTED_DST pc=DONE m_free=True ack=NONE
   4. decode           nblk=3 tok=0 s_blocks=3 s_free=2"""


def test_trace_printed_form_is_stable() -> None:
    """Golden output: what a user reads for a trace (built concretely, independent of Z3)."""
    from llumverify.models.trace import Trace
    from llumverify.protocol.api import start_migration

    m = start_migration(blocks=2, tokens_in_last_block=15, src_free=3, dst_free=10)
    states, actions = [m.state], ["begin_final", "d_alloc_ok", "timeout_alloc", "decode"]
    for a in actions:
        m = m.apply(a)
        states.append(m.state)
    assert Trace(tuple(actions), tuple(states)).render() == GOLDEN


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_printed_counterexamples_do_not_depend_on_the_lemmas() -> None:
    """`check` prints the lexicographically least shortest trace, so adding a property or a
    lemma (which changes the solver's query and its first model) leaves every printed trace, and
    the reports quoting them, as they were. Written down: the least 5-step `pd-early-free`
    counterexample to no_loss (labels first, then the smallest initial values)."""
    from llumverify.models.bmc import violations
    from llumverify.models.check import proof_of

    v = VARIANTS["pd-early-free"]
    goal = {"no_loss": PROPERTIES["no_loss"].predicate}
    bare = violations(v, goal, 6, least=True).traces["no_loss"]
    lemmas = violations(v, goal, 6, proof_of(v).predicates, least=True).traces["no_loss"]
    assert bare is not None and lemmas is not None
    assert bare.render() == lemmas.render()
    assert bare.render().splitlines()[0] == PD_EARLY_FREE_NO_LOSS_INITIAL
    first = violations(v, goal, 6).traces["no_loss"]  # the solver's own choice: same length
    assert first is not None and len(first) == len(bare) == 5


PD_EARLY_FREE_NO_LOSS_INITIAL = "  initial: bs=1 wm=0 s_cap=1 d_cap=1 thr=0 nblk=1 tok=0 s_free=0 d_free=1"


# The line-by-line audit (reports/protocol-findings.md, "the line-by-line audit of `ae`, `v010`
# and `head`"), the AE's final receive ("the AE's final receive, posted at D's grant"), the AE's
# pick of a request mid-prefill ("the AE's LCFS picks a request whose prefill is still running")
# and v0.1.0's atomic stage boundaries ("v0.1.0's stage boundaries are atomic"): code paths the
# model now has, each reaching its violation by the path the code takes.
AUDITED = {
    # HEAD counts the final stage's blocks, then a step grows the request before it leaves the batch
    ("head", "kv_integrity"): (7, ["begin_final", "step_before_pause", "d_alloc_ok", "s_alloc_ok",
                                   "d_copy", "s_send_commit", "d_commit"]),
    # v0.1.0's manager clean-up never runs: a paused request whose D died is never put back
    ("v010", "no_loss"): (3, ["crash_d", "begin_final", "s_d_dead"]),
    # v0.1.0 pauses the request mid-step: the step in flight finishes it, S frees its blocks, and
    # nothing in the final stage checks, so D pulls freed blocks and runs a finished request
    ("v010", "final_copy_from_held"): (5, ["begin_final", "finish_in_flight", "d_alloc_ok",
                                           "s_alloc_ok", "d_copy"]),
    ("v010", "at_most_once"): (7, ["begin_final", "finish_in_flight", "d_alloc_ok", "s_alloc_ok",
                                   "d_copy", "s_send_commit", "d_commit"]),
    # v0.1.0's stage boundaries are atomic: the preemption and re-admission that no check sees
    # happen while a non-final stage's pre-allocation is in flight, not before stage 0
    ("v010", "no_stale_kv"): (13, ["begin_stage", "preempt", "readmit", "d_alloc_ok", "s_alloc_ok", "d_copy",
                                   "s_copy_done", "begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy",
                                   "s_send_commit", "d_commit"]),
    # a failed pull raises (v0.1.0) / a failed stage-0 send raises (AE): D's reservation stays
    ("v010", "abort_releases"): (5, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy_fail", "s_copy_fail"]),
    ("ae", "abort_releases"): (5, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy_fail", "s_copy_fail"]),
    # the AE's D posts the final receive at its grant: S dies with the final pre-allocation in
    # flight, D grants, the receive fails with its dead peer and its callback installs the
    # request without the last block (reports/protocol-findings.md, "the AE's final receive")
    ("ae", "commit_after_copy"): (9, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done",
                                      "begin_final", "crash_s", "d_alloc_ok", "d_copy_fail"]),
    # the AE's LCFS picks the tail of the batch, a request whose prefill is still running, and
    # stage 0 sends its blocks while the forward pass writes them (tests/test_ae_prefill.py)
    ("ae", "no_pending_pull"): (4, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy"]),
    # A5: a client abort of a paused request is lost (the abort scans only the scheduler's
    # queues): a failed final stage puts the request back into S's batch (the shortest path;
    # tests/test_protocol.py also drives the commit, after which D runs it)
    ("head", "abort_honoured"): (3, ["begin_final", "client_abort", "timeout_alloc"]),
    ("v010", "abort_honoured"): (4, ["begin_final", "client_abort", "d_alloc_refuse", "s_alloc_fail"]),
    ("ae", "abort_honoured"): (9, ["begin_stage", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done",
                                   "begin_final", "client_abort", "d_alloc_refuse", "s_alloc_fail"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("variant,prop", sorted(AUDITED))
def test_audited_code_paths_reach_their_violations(variant: str, prop: str,
                                                   check_cli: Callable[..., CheckRun]) -> None:
    """Read from `check --traces`, the run the findings report's tests share."""
    part = variant_part(check_cli("--traces"), variant)
    length, actions = AUDITED[variant, prop]
    assert f"  {prop:<22} VIOLATED in {length} steps" in part.splitlines()
    lines = printed_trace(part, prop)
    assert [ln.split()[1] for ln in lines[1:]] == actions


def test_our_designs_pause_when_they_count() -> None:
    """`safe` and `pd` take the request out of the batch in the action that counts its blocks."""
    for name in ("safe", "pd"):
        assert not VARIANTS[name].pause_deferred
        assert "step_before_pause" not in {a.name for a in VARIANTS[name].actions}
    assert "step_before_pause" in {a.name for a in VARIANTS["head"].actions}


def test_only_v010_pauses_mid_step() -> None:
    """Only v0.1.0 removes the request while a forward pass may be in flight (`finish_in_flight`);
    HEAD removes it at a step boundary, the AE's update drops a removed request's output."""
    have = {name for name, v in VARIANTS.items() if "finish_in_flight" in {a.name for a in v.actions}}
    assert have == {"v010"}


def test_only_ae_picks_a_request_mid_prefill() -> None:
    """Only the AE's selection takes a request whose prefill is still running (`prefill_done`)."""
    have = {name for name, v in VARIANTS.items() if "prefill_done" in {a.name for a in v.actions}}
    assert have == {"ae"} == {name for name, v in VARIANTS.items() if v.picks_in_prefill}

