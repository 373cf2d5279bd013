"""Issue #27's slips: realistic one-to-five-line bugs a reviewer would seed, written before the
model changed, each with the property that must catch it.

Each slip is a variant of `safe` (or `pd`) with one action replaced or one flag flipped, over the
shared protocol code, so it is checked exactly as `llumverify check --variant` checks a variant
(`findings`). `reports/slips.md` records, per slip, what today's `check` said before the model
changed (the census command: `python benchmarks/slips_census.py`) and what it says now.

A slip of a kind the model could not express before (KV contents, shared prefix blocks, a client
abort of a paused request) was written against the richer state that now expresses it; the
record says so instead of pretending it ran before.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from llumverify.protocol.actions import (
    BASE_ACTIONS, Action, Flags, abort_dst, drop_copy, ite_state, pull, reply,
)
from llumverify.protocol.ops import Val, add, and_, ite, one_of, sub
from llumverify.protocol.state import Ack, DReq, Pc, State
from llumverify.protocol.variants import PD, SAFE, Variant


def _base(name: str) -> Action:
    return next(a for a in BASE_ACTIONS if a.name == name)


def _effect(name: str, effect: Callable[[State, Flags], State]) -> dict[str, Action]:
    return {name: replace(_base(name), effect=effect)}


def _guard(name: str, guard: Callable[[State, Flags], Val]) -> dict[str, Action]:
    return {name: replace(_base(name), guard=guard)}


def _drop_when(cond: Callable[[State], Val]) -> Callable[[State, Flags], State]:
    def effect(s: State, v: Flags) -> State:
        return ite_state(cond(s), drop_copy(s, v), _base("s_d_dead").effect(s, v))
    return effect


def _precopy_partial(s: State, v: Flags) -> State:
    """A non-final stage copies every block not yet copied, the partly filled last one too."""
    t = _base("begin_stage").effect(s, v)
    return t.replace(n=sub(s.nblk, s.copied))


def _final_skips_partial(s: State, v: Flags) -> State:
    """The final stage asks for the full blocks only (as a non-final stage does) ..."""
    t = _base("begin_final").effect(s, v)
    return t.replace(n=sub(t.n, ite(s.tok == sub(s.bs, 1), 0, 1)))


def _pull_counts_partial(s: State, v: Flags) -> State:
    """... and D's pull counts the partial last block as copied without copying it."""
    t = _base("d_copy").effect(s, v)
    skipped = and_(s.final, s.tok != sub(s.bs, 1))
    return t.replace(copied=add(t.copied, ite(skipped, 1, 0)))


def _readmit_from_block_start(s: State, v: Flags) -> State:
    """Re-admission recomputes the request up to its last full block: the tokens of its partial
    last block are dropped (the recompute length rounded down to a block)."""
    return _base("readmit").effect(s, v).replace(tok=0)


def _refuse_commit_holding(s: State, v: Flags) -> State:
    """D's commit handler takes the reservation as the request's blocks, then fails (say the
    engine rejects the request) and answers FAIL with the blocks held (A3')."""
    return s.replace(m_commit=False, ack=Ack.FAIL, d_blocks=s.d_res, d_res=0, lease=False)


def _fence_by_reservation(s: State, v: Flags) -> State:
    """D answers the fence by whether it holds anything for the migration (reservation or
    commit), not by whether it committed."""
    t = _base("d_fence").effect(s, v)
    held = ite(s.d_req != DReq.NONE, 1, s.d_res)
    return t.replace(ack=ite(held == 0, Ack.FAIL, Ack.OK))


def _copy_timeout_drops_final(s: State, v: Flags) -> State:
    """A copy timeout in the final stage is treated like an unknown commit: S drops its copy."""
    return ite_state(s.final, drop_copy(s, v), abort_dst(s, v))


def _pd_full_blocks_only(s: State, v: Flags) -> State:
    """The P/D hand-off asks D for the full blocks only (the last, partial one is left out)."""
    t = _base("begin_final").effect(s, v)
    return t.replace(n=sub(t.n, 1))


def _commit_frees_shared(s: State, v: Flags) -> State:
    """The hand-over's release returns every block of the request to S's free pool."""
    t = _base("s_commit_ok").effect(s, v)
    return t.replace(s_free=add(s.s_free, s.s_blocks), s_other=s.s_other)


def _commit_keeps_slot(s: State, v: Flags) -> State:
    return _base("d_commit").effect(s, v).replace(d_slot=s.d_slot)


def _slip(name: str, expect: str, doc: str, base: Variant = SAFE,
          overrides: Mapping[str, Action] | None = None, **flags: object) -> tuple[str, str, str, Variant]:
    return name, expect, doc, base.derive(f"slip:{name}", doc, overrides, **flags)


# (name, the property that must catch it, what the slip is, the variant)
SLIPS: tuple[tuple[str, str, str, Variant], ...] = (
    # history: S drops its copy before the commit could have been sent
    _slip("drop_before_commit_on_dead_d", "handover_after_commit",
          "When D dies after the final copy but before S sent the commit, S counts the request "
          "as handed over (the branch for an unknown commit taken one state early).",
          overrides={"s_d_dead": replace(_base("s_d_dead"), effect=_drop_when(
              lambda s: and_(s.final, one_of(s.pc, (Pc.COPY, Pc.COMMIT, Pc.RESOLVE)))))}),
    _slip("drop_on_dead_d_any_stage", "handover_after_commit",
          "S drops its copy whenever it learns that D died, at any stage (a dead D 'may have it').",
          overrides={"s_d_dead": replace(_base("s_d_dead"), effect=_drop_when(lambda s: True))}),
    _slip("pd_drop_before_commit_on_dead_d", "handover_after_commit",
          "P/D: D dies while pulling; the prefill instance drops the request anyway (it 'was "
          "already sent to decode').", base=PD,
          overrides={"s_d_dead": replace(_base("s_d_dead"), effect=_drop_when(
              lambda s: one_of(s.pc, (Pc.COPY, Pc.COMMIT, Pc.RESOLVE))))}),
    # content: D gets blocks whose tokens are not S's at the pause
    _slip("precopy_partial_block", "kv_intact",
          "A non-final stage copies the partly filled last block too; later tokens land in it on "
          "S, and the final stage never copies it again.",
          overrides=_effect("begin_stage", _precopy_partial)),
    _slip("final_skips_partial_block", "kv_intact",
          "The final stage asks for full blocks only and the pull counts the partial last block "
          "as copied: D runs with a last block it never received.",
          overrides={**_effect("begin_final", _final_skips_partial),
                     **_effect("d_copy", _pull_counts_partial)}),
    _slip("pull_from_block_zero", "kv_intact",
          "D's pull reads S's blocks from the request's first block at every stage, not from "
          "the first block not yet copied (a source offset left at 0).",
          overrides=_effect("d_copy", lambda s, v: pull(s.replace(m_copy=False, ack=Ack.OK), 0))),
    _slip("readmit_from_block_start", "token_continuity",
          "Re-admission after a preemption recomputes up to the last full block only: the tokens "
          "of the partial last block are lost, and the migration copies the shorter KV.",
          overrides=_effect("readmit", _readmit_from_block_start)),
    # shared prefix blocks (vllm-v1's prefix cache)
    _slip("commit_frees_shared_prefix", "shared_blocks_kept",
          "After the hand-over S frees every block of the request, the prefix blocks other "
          "requests still share too.",
          overrides=_effect("s_commit_ok", _commit_frees_shared)),
    # a paused request is aborted by its client
    _slip("client_abort_while_paused_ignored", "abort_honoured",
          "The client aborts a request while it is paused for the final stage; S's coordinator "
          "does not look before sending the commit, and D runs it after its client left.",
          overrides=_guard("s_send_commit", lambda s, v: and_(reply(s, Pc.COPY, Ack.OK), s.final))),
    # controls: slips today's properties already see
    _slip("deferred_pause_unreported_token", "at_most_once",
          "S pauses after the step already due (HEAD), but that step's token is not in what D "
          "is told to run.", pause_deferred=True,
          overrides=_effect("step_before_pause", lambda s, v: _base("decode").effect(s, v))),
    _slip("commit_fails_holding_blocks", "no_leak",
          "D's commit handler takes the reservation as the request's blocks, then fails and "
          "answers FAIL with the blocks held (A3').",
          overrides={"d_commit_refuse": replace(
              _base("d_commit_refuse"), guard=lambda s, v: and_(s.d_alive, s.m_commit),
              effect=_refuse_commit_holding)}),
    _slip("fence_answers_by_reservation", "no_loss",
          "D answers S's 'did you commit?' with yes when it still holds the reservation.",
          overrides=_effect("d_fence", _fence_by_reservation)),
    _slip("copy_timeout_drops_final", "no_loss",
          "A copy timeout in the final stage is handled like an unknown commit: S drops its copy.",
          overrides=_effect("timeout_copy", _copy_timeout_drops_final)),
    _slip("pd_full_blocks_only", "commit_after_copy",
          "P/D: the hand-off asks D for the full blocks only; the partial last block is left "
          "behind.", base=PD, overrides=_effect("begin_final", _pd_full_blocks_only)),
    _slip("pull_from_dead_source", "crash_stop",
          "D's pull completes although S crashed while it ran (the transfer's error is dropped): "
          "D counts blocks it never received.",
          overrides=_guard("d_copy", lambda s, v: and_(s.d_alive, s.m_copy, s.fenced == False))),  # noqa: E712
    _slip("commit_keeps_slot", "slot_released",
          "D's commit turns the reservation into the request's blocks but keeps its migration "
          "slot taken.", overrides=_effect("d_commit", _commit_keeps_slot)),
)
