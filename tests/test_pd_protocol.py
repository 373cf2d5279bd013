"""The prefill->decode (P/D) KV hand-off: `pd` proved, its unsafe slips refuted, concrete runs.

`pd` is `safe` with one blocking stage (llumverify/protocol/variants.py); the simulator runs it
for every P/D hand-off through `api.start_migration(..., variant=get_variant("pd"))`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from conftest import CheckRun, examples, printed_trace, variant_part

from llumverify.models.check import check_variant
from llumverify.models.conformance import conforms
from llumverify.models.scope import OBLIGATIONS
from llumverify.protocol.api import GuardError, Migration, start_migration
from llumverify.protocol.state import DReq, Mig, Pc, Req
from llumverify.protocol.variants import MUST_PROVE, SAFE, VARIANTS, get_variant
from llumverify.properties.machines import machine_for
from llumverify.properties.safety import PROPERTIES, violated

PD = get_variant("pd")
REPORT = Path(__file__).resolve().parents[1] / "reports" / "protocol-findings.md"
HANDOFF = ("begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit", "d_commit",
           "s_commit_ok")


def _start(variant: str = "pd", **kw: object) -> Migration:
    args: dict[str, object] = dict(blocks=40, tokens_in_last_block=3, src_free=100, dst_free=300,
                                   src_other=60, dst_other=20)
    args.update(kw)
    return start_migration(variant=get_variant(variant), **args)  # type: ignore[arg-type]


def _run(m: Migration, events: tuple[str, ...] | list[str]) -> Migration:
    """Apply the events through the api; every step conforms to the Z3 relation."""
    for name in events:
        pre = m.state
        m = m.apply(name)
        assert conforms(m.variant, name, pre, m.state), name
    return m


def _pools(m: Migration) -> tuple[int, int]:
    s = m.state
    return s.s_free + s.s_other + s.s_blocks, s.d_free + s.d_other + s.d_res + s.d_blocks


# ---- the variant ---------------------------------------------------------------------------

def test_pd_is_safe_with_one_blocking_stage() -> None:
    assert PD.max_stages == 1 and PD.final_at_max_stage and PD.last_stage_blocks == 0
    names = {a.name for a in PD.actions}
    assert names == {a.name for a in SAFE.actions} - {"begin_stage", "s_copy_done"}
    assert "pd" in MUST_PROVE and "safe" in MUST_PROVE
    assert not {"pd-early-free", "pd-resume-on-timeout"} & set(MUST_PROVE)


@pytest.mark.parametrize("blocks,tok,bs", [(1, 0, 16), (1, 15, 16), (17, 3, 16), (4000, 0, 16),
                                            (3, 1, 2)])
@pytest.mark.parametrize("last_stage_blocks", [0, 16, 10**6])
def test_first_stage_point_is_final_for_any_size(blocks: int, tok: int, bs: int,
                                                 last_stage_blocks: int) -> None:
    """The simulator's stage point: `begin_final` is enabled at once (whatever threshold the
    caller passes: the variant pins it), and it pauses the request with all its blocks."""
    m = _start(blocks=blocks, tokens_in_last_block=tok, block_size=bs,
               last_stage_blocks=last_stage_blocks)
    assert m.state.thr == 0 and PD.pinned(m.state)
    assert "begin_final" in m.enabled()
    m = m.apply("begin_final")
    assert m.request is Req.PAUSED and m.state.n == blocks and m.state.m_alloc


# ---- concrete runs through the api ---------------------------------------------------------

def test_handoff_commits_with_blocks_conserved() -> None:
    m = _start()
    caps = _pools(m)
    for name in HANDOFF:
        m = _run(m, [name])
        assert not violated(m.state), name
        assert _pools(m) == caps, name
    assert m.status is Mig.FINISHED and m.request is Req.MIGRATED
    assert DReq(m.state.d_req) is DReq.RUNNING and m.state.d_nblk == 40
    assert m.blocks_held() == {"src": 0, "dst_reserved": 0, "dst_owned": 40}
    assert m.state.s_free == 140 and m.state.d_free == 260


@pytest.mark.parametrize("why", ["out_of_memory", "watermark", "slot_taken"])
def test_refused_allocation_puts_the_request_back_on_s(why: str) -> None:
    kw: dict[str, object] = {"out_of_memory": {"dst_free": 39}, "watermark": {"watermark": 261},
                             "slot_taken": {"dst_slot_taken": True}}[why]
    m = _run(_start(**kw), ["begin_final"])
    assert "d_alloc_ok" not in m.enabled()
    m = _run(m, ["d_alloc_refuse", "s_alloc_fail"])
    assert m.status is Mig.ABORTED_DST and m.request is Req.RUNNING
    assert m.blocks_held() == {"src": 40, "dst_reserved": 0, "dst_owned": 0}
    assert not violated(m.state)
    assert "decode" in m.enabled()  # it keeps decoding on the prefill instance


def test_decode_crash_mid_copy_puts_the_request_back_on_s() -> None:
    m = _run(_start(), ["begin_final", "d_alloc_ok", "s_alloc_ok", "crash_d", "s_d_dead"])
    assert m.status is Mig.ABORTED_DST and m.request is Req.RUNNING
    assert m.blocks_held()["src"] == 40 and not violated(m.state)


def test_request_finishing_before_the_stage_aborts_cleanly() -> None:
    """A 1-2 token output: the request finishes on the prefill instance before the hand-off."""
    m = _run(_start(), ["finish"])
    assert "begin_final" not in m.enabled()
    m = _run(m, ["abort_src"])
    assert m.status is Mig.ABORTED_SRC and m.request is Req.FINISHED
    assert m.blocks_held() == {"src": 0, "dst_reserved": 0, "dst_owned": 0}
    assert not violated(m.state)


def test_commit_timeout_is_resolved_with_d() -> None:
    """D committed but its reply is late: S asks D (fence) and hands over, never resumes."""
    m = _run(_start(), ["begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit",
                        "d_commit", "timeout_commit"])
    assert Pc(m.state.pc) is Pc.RESOLVE and m.request is Req.PAUSED
    m = _run(m, ["d_fence", "s_commit_ok"])
    assert m.status is Mig.FINISHED and m.request is Req.MIGRATED and not violated(m.state)


def test_late_commit_after_lease_expiry_is_refused_and_the_request_resumes() -> None:
    events = ["begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit",
              "lease_expire", "d_commit_refuse", "s_commit_fail"]
    m = _run(_start(), events)
    assert m.status is Mig.ABORTED_DST and m.request is Req.RUNNING
    assert m.blocks_held() == {"src": 40, "dst_reserved": 0, "dst_owned": 0}
    assert not violated(m.state)
    # the same events with the eager free lose the request while both instances are up
    lost = _run(_start("pd-early-free"), events)
    assert lost.status is Mig.ABORTED_DST and lost.request is Req.MIGRATED
    assert DReq(lost.state.d_req) is DReq.NONE and lost.state.s_alive and lost.state.d_alive
    assert lost.blocks_held() == {"src": 0, "dst_reserved": 0, "dst_owned": 0}
    assert "no_loss" in violated(lost.state)


def test_unsafe_pd_variants_keep_the_other_actions() -> None:
    with pytest.raises(GuardError):
        _start().apply("s_commit_ok")
    for name in ("pd-early-free", "pd-resume-on-timeout"):
        assert {a.name for a in VARIANTS[name].actions} - {"d_fence"} == \
            {a.name for a in PD.actions} - {"d_fence"}


# ---- proofs and shortest counterexamples ---------------------------------------------------

def test_pd_proves_every_property_unbounded() -> None:
    verdicts = check_variant(PD)
    assert {v.prop for v in verdicts if v.verdict == "PROVED"} == {*PROPERTIES, "decisive"} - {"no_pending_pull"}
    assert {v.prop for v in verdicts if v.verdict == "TRIVIAL"} == {"no_pending_pull"}


def test_early_free_loses_the_request_in_five_steps() -> None:
    verdicts = {v.prop: v for v in check_variant(VARIANTS["pd-early-free"])}
    assert {p for p, v in verdicts.items() if v.verdict not in ("PROVED", "TRIVIAL")} == {"no_loss"}
    v = verdicts["no_loss"]
    assert v.verdict == "VIOLATED" and v.depth == 5 and v.trace is not None
    assert v.trace.actions == ("begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy",
                               "s_send_commit")
    last = v.trace.states[-1]
    assert (last.req, last.d_req, last.s_blocks, last.status) == \
        (Req.MIGRATED, DReq.NONE, 0, Mig.RUNNING)
    assert last.s_alive and last.d_alive


@pytest.mark.slow
def test_resume_on_timeout_runs_the_request_twice_in_seven_steps(check_cli: Callable[..., CheckRun]) -> None:
    """Read from `check --traces`, the run the findings report's tests share."""
    part = variant_part(check_cli("--traces"), "pd-resume-on-timeout")
    lines = part.splitlines()
    verdicts = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines[1:] if ln.startswith("  ") and
                ln.split()[0] in (*PROPERTIES, "decisive")}
    assert len(verdicts) == len(PROPERTIES) + 1
    assert {p for p, v in verdicts.items() if not v.startswith(("PROVED", "TRIVIAL"))} == {
        "single_owner", "no_stale_kv", "at_most_once", "commit_integrity"}
    # the blind resume breaks the lemmas kv_intact's Houdini proof needs; Spacer proves it (models/chc.py)
    assert verdicts["kv_intact"] == "PROVED (unbounded; CHC)"
    assert verdicts["single_owner"] == "VIOLATED in 7 steps"
    trace = printed_trace(part, "single_owner")
    assert {ln.split()[1] for ln in trace[1:]} == {"begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy",
                                                   "s_send_commit", "d_commit", "timeout_commit"}
    assert verdicts["no_stale_kv"] == "VIOLATED in 8 steps"


# derandomize and deadline come from the loaded profile (tests/conftest.py); no explain phase:
# on a machine it prints nothing and takes minutes after the failure has been shrunk
PROFILE = settings(max_examples=examples(150), stateful_step_count=40,
                   phases=[p for p in Phase if p is not Phase.explain],
                   suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
def test_pd_machine_keeps_every_property_and_conforms() -> None:
    run_state_machine_as_test(machine_for(PD, check_properties=True), settings=PROFILE)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pd-early-free", "pd-resume-on-timeout"])
def test_unsafe_pd_variants_conform_to_their_relations(name: str) -> None:
    run_state_machine_as_test(machine_for(VARIANTS[name], check_properties=False),
                              settings=settings(PROFILE, max_examples=examples(60)))


# ---- the CLI and the report ----------------------------------------------------------------

@pytest.mark.slow
def test_cli_proves_pd(check_cli: Callable[..., CheckRun]) -> None:
    run = check_cli("--traces")
    assert run.report["variants"]["pd"]["ok"] is True, run.stderr
    # the properties but the trivial no_pending_pull, `decisive`, the composition obligations and
    # the two-link product
    details = variant_part(run, "pd")
    assert details.count("PROVED (unbounded)") == len(PROPERTIES) + len(OBLIGATIONS) + 1
    assert "no_pending_pull        TRIVIAL, not counted as proved (kv_pending is always False)" in details


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pd-early-free", "pd-resume-on-timeout"])
def test_cli_refutes_unsafe_pd_and_the_report_shows_it(name: str, check_cli: Callable[..., CheckRun]) -> None:
    run = check_cli("--traces")
    assert run.report["variants"][name]["ok"] is False, run.stderr
    text = REPORT.read_text()
    part = variant_part(run, name)
    verdicts, *traces = part.rstrip("\n").split("\n  counterexample to ")
    assert traces
    for line in verdicts.splitlines()[1:]:
        assert line in text, f"{name}: verdict line missing from the report: {line.strip()}"
    for trace in traces:
        assert "  counterexample to " + trace in text, f"{name}: stale trace in the report"
    if name == "pd-early-free":
        assert "  no_loss                VIOLATED in 5 steps" in part
        assert "   5. s_send_commit    req=MIGRATED s_blocks=0" in part
