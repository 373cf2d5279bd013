"""The protocol core: facade, actions, variants as data, and the simulator API."""

from __future__ import annotations

import pytest
import z3
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from llumverify.errors import UserError
from llumverify.protocol import ops
from llumverify.protocol.api import GuardError, Migration, start_migration
from llumverify.protocol.state import DReq, Mig, Req
from llumverify.protocol.variants import VARIANTS, get_variant
from llumverify.properties.safety import abort_honoured, kv_intact, no_leak


def test_facade_agrees_on_python_and_z3() -> None:
    x = z3.Int("x")
    for value in (0, 3, 7):
        concrete = ops.ite(ops.and_(ops.le(1, value), ops.not_(value == 7)), ops.add(value, 1),
                           ops.sub(value, 1))
        symbolic = ops.ite(ops.and_(ops.le(1, x), ops.not_(x == 7)), ops.add(x, 1), ops.sub(x, 1))
        assert z3.simplify(z3.substitute(symbolic, (x, z3.IntVal(value)))).as_long() == concrete


def test_action_names_unique_per_variant() -> None:
    for v in VARIANTS.values():
        names = [a.name for a in v.actions]
        assert len(names) == len(set(names)), v.name


def _run_happy(variant: str) -> object:
    m = start_migration(blocks=40, tokens_in_last_block=3, src_free=100, dst_free=300,
                        variant=variant)
    order = ("begin_stage", "begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done",
             "s_send_commit", "d_commit", "s_commit_ok")
    while m.status is Mig.RUNNING:
        m = m.apply(next(a for a in order if a in m.enabled()))
    if "d_copy" in m.enabled():  # AE: S hands over first, then D receives the last blocks
        m = m.apply("d_copy")
    return m


@pytest.mark.parametrize("variant", ["safe", "head", "v010", "ae"])
def test_happy_path_hands_the_request_over(variant: str) -> None:
    m = _run_happy(variant)
    assert m.status is Mig.FINISHED and m.request is Req.MIGRATED  # type: ignore[attr-defined]
    assert m.blocks_held() == {"src": 0, "dst_reserved": 0, "dst_owned": 40}  # type: ignore[attr-defined]


def test_disabled_action_raises_clear_error() -> None:
    m = start_migration(blocks=4, src_free=0, dst_free=10)
    with pytest.raises(GuardError, match="d_commit is not enabled"):
        m.apply("d_commit")
    with pytest.raises(UserError, match="no action 'fly'"):
        m.apply("fly")


def test_bad_start_and_variant_are_user_errors() -> None:
    with pytest.raises(UserError, match="blocks=0"):
        start_migration(blocks=0, src_free=1, dst_free=1)
    with pytest.raises(UserError, match="unknown variant"):
        get_variant("v9")


def test_decode_allocates_a_block_every_block_size_tokens() -> None:
    m = start_migration(blocks=1, src_free=1, dst_free=0, block_size=2, tokens_in_last_block=0)
    m = m.apply("decode")
    assert m.blocks_held()["src"] == 1
    m = m.apply("decode")
    assert m.blocks_held()["src"] == 2 and m.state.tok == 0
    assert "decode" in m.enabled()
    m = m.apply("decode")
    assert "decode" not in m.enabled()  # the next token needs a block and S has none free


@pytest.mark.parametrize("variant", ["v010", "head", "safe"])
def test_v010_scheduler_does_not_act_between_stages(variant: str) -> None:
    """v0.1.0's coordinator does not yield between stages (nor before stage 0): S's scheduler
    cannot preempt or re-admit the request there; HEAD's coordinator starts as a new task and
    safe's yields there, so it can at the start. All can during a pre-allocation, and all
    decode and finish anywhere."""
    m = start_migration(blocks=40, src_free=40, dst_free=100, variant=variant)  # over 16: not final
    atomic = variant == "v010"
    assert ("preempt" in m.enabled()) is not atomic
    assert {"decode", "finish"} <= set(m.enabled())
    m = m.apply("begin_stage")  # pre-allocation in flight
    assert {"preempt", "decode", "finish"} <= set(m.enabled())
    m = m.apply("preempt")
    assert "readmit" in m.enabled()


def _to_copy_reply(variant: str, preempt_at: str, readmit: bool) -> Migration:
    """A non-final stage of a 40-block request, preempted while its pre-allocation (`ALLOC`) or
    its copy (`COPY`) is in flight, re-admitted or not, up to the copy's end."""
    m = start_migration(blocks=40, src_free=40, dst_free=100, variant=variant)
    m = m.apply("begin_stage")
    for name in ("d_alloc_ok", "s_alloc_ok", "d_copy"):
        if preempt_at == ("ALLOC" if name == "d_alloc_ok" else "COPY" if name == "d_copy" else ""):
            m = m.apply("preempt")
            if readmit:
                m = m.apply("readmit")
        m = m.apply(name)
    return m.apply("s_copy_done")


@pytest.mark.parametrize("preempt_at,readmit,ends", [
    ("COPY", True, "abort_src"),  # after the stamp: the post-copy check sees it, D is told to free
    ("COPY", False, "abort_src"),
    ("ALLOC", False, "abort_src_raise"),  # before the stamp, still waiting: the lookup raises
    ("ALLOC", True, None),  # before the stamp, re-admitted: nothing sees it (H-V01-3)
])
def test_v010_post_copy_check_sees_only_preemptions_after_the_stamp(preempt_at: str, readmit: bool,
                                                                     ends: str | None) -> None:
    m = _to_copy_reply("v010", preempt_at, readmit)
    enabled = set(m.enabled())
    assert enabled & {"abort_src", "abort_src_raise"} == ({ends} if ends else set())
    if ends is None:
        assert "begin_stage" in enabled or "begin_final" in enabled
    else:
        out = m.apply(ends)
        assert out.status is Mig.ABORTED_SRC and out.state.m_free == (ends == "abort_src")
    # HEAD checks before each stage and copy, whatever the time of the preemption
    if preempt_at == "COPY":
        assert "abort_src" in _to_copy_reply("head", preempt_at, readmit).enabled()


def _paused_then_aborted(variant: str, dst_free: int) -> Migration:
    """A 4-block request driven to its final-stage pause (the AE copies stage 0 first), whose
    client then aborts it."""
    m = start_migration(blocks=4, src_free=10, dst_free=dst_free, variant=variant)
    order = ("begin_stage", "begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_copy_done")
    while m.request is not Req.PAUSED:
        m = m.apply(next(a for a in order if a in m.enabled()))
    return m.apply("client_abort")


# Our designs find the paused request (S's checks end the migration and finish it); Llumnix as
# written does not (its abort scans only the scheduler's queues, docs/llumnix-code-notes.md §7):
# D runs the request (A5), or, if the migration fails, S puts it back into its batch.
ABORT_LOST = [("safe", False), ("pd", False), ("head", True), ("v010", True), ("ae", True)]


@pytest.mark.parametrize("variant, lost", ABORT_LOST)
def test_client_abort_of_a_paused_request_committed_only_where_it_is_lost(variant: str, lost: bool) -> None:
    m = _paused_then_aborted(variant, dst_free=20)
    order = ("abort_src", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit", "d_commit",
             "s_commit_ok", "d_free_res")
    while m.status is Mig.RUNNING:
        m = m.apply(next(a for a in order if a in m.enabled()))
    if "d_copy" in m.enabled():  # AE: S handed over at D's grant; D's receive installs it
        m = m.apply("d_copy")
    assert (m.state.d_req == DReq.RUNNING) == lost
    assert m.request is (Req.MIGRATED if lost else Req.FINISHED)
    assert bool(abort_honoured(m.state)) == (not lost)


@pytest.mark.parametrize("variant, lost", ABORT_LOST)
def test_client_abort_of_a_paused_request_resumed_only_where_it_is_lost(variant: str, lost: bool) -> None:
    m = _paused_then_aborted(variant, dst_free=3).apply("d_alloc_refuse").apply("s_alloc_fail")
    assert m.status is Mig.ABORTED_DST
    assert m.request is (Req.RUNNING if lost else Req.FINISHED)
    assert m.blocks_held()["src"] == (4 if lost else 0)
    assert bool(abort_honoured(m.state)) == (not lost)


def _commit_sent(variant: str) -> Migration:
    """A 2-block request (one final stage) driven until S sent the commit."""
    m = start_migration(blocks=2, src_free=10, dst_free=10, variant=variant, last_stage_blocks=16)
    for name in ("begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit"):
        m = m.apply(name)
    return m


def test_head_commit_fails_holding_blocks_that_nothing_frees() -> None:
    """A3' (docs/llumnix-code-notes.md, section 8): with SPMD workers HEAD's commit handler can
    raise after it installed the reservation as the request's block table. S resumes the
    request; D keeps the blocks under no request, and nothing can give them back: no lease
    record, no free from S, no request on D to finish."""
    m = _commit_sent("head").apply("d_commit_fail")
    assert m.blocks_held() == {"src": 2, "dst_reserved": 0, "dst_owned": 2}
    m = m.apply("s_commit_fail")
    assert m.status is Mig.ABORTED_DST and m.request is Req.RUNNING
    assert m.state.d_req == DReq.NONE and not no_leak(m.state)
    assert not {"d_finish", "d_free_res", "d_fence", "lease_expire"} & set(m.enabled())


def test_only_head_commit_can_fail_holding_blocks() -> None:
    """Only HEAD's commit handler can fail once it took the blocks (v0.1.0's is synchronous with
    no worker call, the AE has no separate commit, our designs install the request whole)."""
    have = {name for name, v in VARIANTS.items() if "d_commit_fail" in {a.name for a in v.actions}}
    assert have == {"head"}
    assert "d_commit_fail" not in _commit_sent("safe").enabled()


@settings(max_examples=examples(150))
@given(name=st.sampled_from(["safe", "head"]), stages=st.integers(1, 6), thr=st.integers(0, 4),
       blocks=st.integers(1, 12), bs=st.integers(1, 3), tokens=st.lists(st.integers(0, 8), min_size=6, max_size=6))
def test_each_stage_is_final_exactly_when_the_rule_says(name: str, stages: int, thr: int, blocks: int, bs: int,
                                                        tokens: list[int]) -> None:
    """The stage rule on the concrete actions, written from LLUMNIX.md §5 (not read from `is_final`),
    for 1 to 6 stages: a stage is final when at most thr blocks are left uncopied, or (where the
    variant has that rule) when it is the last allowed; a non-final one asks for the full blocks
    not copied yet, a final one for all of them. The request grows by `tokens` between stages.
    P11 slip: `is_final` counts the blocks left from the last stage's n, not from the copied total:
    the same through 3 stages, but from the third stage of 4 on it begins an empty non-final stage
    and the final one late (longer downtime), and HEAD gives up after its last stage."""
    v = VARIANTS[name].derive(f"{name}-{stages}", "another stage count", max_stages=stages)
    m = start_migration(blocks=blocks, block_size=bs, src_free=100, dst_free=1000, variant=v,
                        last_stage_blocks=thr)
    for stage in range(stages):
        left = m.state.nblk - m.state.copied
        final = left <= thr or (v.final_at_max_stage and stage + 1 == stages)
        now = m.enabled()
        assert ("begin_final" in now, "begin_stage" in now) == (final, not final), (stage, left, now)
        m = m.apply("begin_final" if final else "begin_stage")
        assert m.state.n == (left if final else left - 1)
        for action in ("d_alloc_ok", "s_alloc_ok", "d_copy"):
            m = m.apply(action)
        if final:
            break
        m = m.apply("s_copy_done")
        for _ in range(tokens[stage]):
            m = m.apply("decode")
    m = m.apply("s_send_commit" if final else "abort_stages")
    assert m.status is (Mig.RUNNING if final else Mig.ABORTED_SRC)


@pytest.mark.parametrize("variant", ["safe", "pd"])
def test_shared_prefix_blocks_stay_with_the_other_requests_when_s_releases(variant: str) -> None:
    """A request 3 of whose 4 blocks are full blocks shared with other requests (vllm-v1's prefix
    cache) owns one block: when S releases it, by finishing or by handing it over, only that block
    returns to S's free pool; the 3 shared ones stay in use by the requests that read them. The slip this catches: start_migration drops `shared_blocks`, so every release frees blocks other requests
    still read, and the property machines, which start from shared blocks, check none."""
    m = start_migration(blocks=4, shared_blocks=3, block_size=2, src_free=0, dst_free=8, variant=variant,
                        last_stage_blocks=4)
    finished = m.apply("finish").state
    assert (finished.s_free, finished.s_other, finished.s_blocks) == (1, 3, 0)
    for name in ("begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit", "d_commit", "s_commit_ok"):
        m = m.apply(name)
    assert m.status is Mig.FINISHED and m.request is Req.MIGRATED
    assert (m.state.s_free, m.state.s_other, m.state.s_blocks) == (1, 3, 0)


def test_a_pull_of_freed_blocks_leaves_a_gap_no_later_pull_fills() -> None:
    """v0.1.0: the request is preempted (its blocks freed) while S waits for D's pre-allocation,
    before the stage's stamp, so S still has D pull them; it is re-admitted (recomputed into new
    blocks) before the post-copy check, which sees no preemption after the stamp, and the migration
    goes on. What D pulled from the freed blocks is not the request's KV, and the final stage's pull
    of the last block cannot make it so: D runs the request on a corrupted KV (v010's kv_intact
    finding). The slip this catches: `pull` without its contiguity check (`d_full == copied`) counts the
    final pull as completing D's copy, and kv_intact passes this state."""
    m = start_migration(blocks=3, src_free=3, dst_free=10, variant="v010", block_size=1, last_stage_blocks=1)
    for name in ("begin_stage", "preempt", "d_alloc_ok", "s_alloc_ok", "d_copy", "readmit", "s_copy_done",
                 "begin_final", "d_alloc_ok", "s_alloc_ok", "d_copy", "s_send_commit", "d_commit"):
        m = m.apply(name)
    assert DReq(m.state.d_req) is DReq.RUNNING and m.state.copied == m.state.p_nblk == 3
    assert m.state.d_full == 0 and not kv_intact(m.state)  # none of D's blocks is known to hold S's KV
