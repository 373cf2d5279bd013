"""The handshake as guarded actions (LLUMNIX.md §5), written once over the ops facade.

An action is a guard and an effect over `State`, parameterised by a `Variant` (plain Python
flags, so `if v.lease:` is fine; anything about the *state* goes through the facade). There are
no action parameters: every choice is a choice of action, so a trace is a list of names.

Kinds: `env` (the world: decoding, completion, preemption, load, crashes, leases), `S` and `D`
(the two migration coordinators), `timeout` (S gives up waiting; the message may still arrive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from llumverify.protocol.ops import Val, add, and_, as_int, is_symbolic, ite, le, lt, not_, one_of, or_, sub
from llumverify.protocol.state import FIELDS, Ack, DReq, Mig, Pc, Req, Slot, State


class Flags(Protocol):
    """The flags of a variant that the shared actions read (read-only). `variants.Variant` has
    them all, documented there; it imports this module, so this one names only the interface."""

    @property
    def max_stages(self) -> int: ...
    @property
    def final_at_max_stage(self) -> bool: ...
    @property
    def lease(self) -> bool: ...
    @property
    def lease_releases_slot(self) -> bool: ...
    @property
    def fence(self) -> bool: ...
    @property
    def resolve_commit_timeout(self) -> bool: ...
    @property
    def free_on_abort_src(self) -> bool: ...
    @property
    def free_on_abort_dst(self) -> bool: ...
    @property
    def refusal_frees(self) -> bool: ...
    @property
    def failed_call_drops_lease(self) -> bool: ...
    @property
    def free_needs_lease(self) -> bool: ...
    @property
    def slot_check(self) -> bool: ...
    @property
    def later_alloc_checks_slot(self) -> bool: ...
    @property
    def watermark_every_stage(self) -> bool: ...
    @property
    def early_abort_checks(self) -> bool: ...
    @property
    def copy_failure_raises(self) -> bool: ...
    @property
    def timeouts(self) -> bool: ...
    @property
    def requeue_on_rpc_error(self) -> bool: ...
    @property
    def atomic_stage_start(self) -> bool: ...
    @property
    def stamped_abort_check(self) -> bool: ...
    @property
    def commit_unknown_drops(self) -> bool: ...
    @property
    def commit_fail_holds(self) -> bool: ...

    @property
    def abort_finds_paused(self) -> bool: ...

    @property
    def pause_deferred(self) -> bool: ...
    @property
    def pause_mid_step(self) -> bool: ...
    @property
    def picks_in_prefill(self) -> bool: ...


Guard = Callable[[State, Flags], Val]
Effect = Callable[[State, Flags], State]


@dataclass(frozen=True)
class Action:
    """A named guarded command. `applies` says whether a variant has this action at all."""

    name: str
    kind: str  # env | S | D | timeout
    guard: Guard
    effect: Effect
    doc: str
    applies: Callable[[Flags], bool] = lambda v: True


# ---- shared pieces -------------------------------------------------------------------------

def coordinating(s: State) -> Val:
    """S's coordinator is alive and the migration still runs: S may act on it."""
    return and_(s.s_alive, s.status == Mig.RUNNING)


def abort_seen(s: State, v: Flags) -> Val:
    """S knows that the client aborted the paused request: where S's abort handler finds a
    request paused for the final stage (`abort_finds_paused`). Elsewhere the abort is lost:
    `aborted` records only that the client asked."""
    return s.aborted if v.abort_finds_paused else False


def abort_cond(s: State, v: Flags) -> Val:
    """S's abort check: the request finished or was preempted since the migration began
    (v0.1.0 checks before a stage only that the request is still in the running batch)."""
    gone = or_(not_(one_of(s.req, (Req.RUNNING, Req.PAUSED))), abort_seen(s, v))
    if v.stamped_abort_check:  # ... and what its post-copy check saw (a preemption after the stamp)
        return or_(gone, s.late_preempt)
    return or_(gone, s.preempted) if v.early_abort_checks else gone


def _raises_at_stage(s: State) -> Val:
    """v0.1.0 (`stamped_abort_check`): the request was preempted before this stage's stamp and is
    still waiting, so the post-copy check missed it and the next stage's block-table lookup raises."""
    return and_(s.req == Req.WAITING, not_(s.late_preempt))


def _abort_src_guard(s: State, v: Flags) -> Val:
    where = or_(s.pc == Pc.STAGE, and_(s.pc == Pc.ALLOC, s.ack == Ack.OK)) if v.early_abort_checks \
        else s.pc == Pc.STAGE
    if v.abort_finds_paused:  # ... and before sending the commit: a client abort may land while paused
        where = or_(where, and_(s.pc == Pc.COPY, s.ack == Ack.OK, s.final))
    if v.stamped_abort_check:
        return and_(coordinating(s), abort_cond(s, v), not_(_raises_at_stage(s)), where)
    return and_(coordinating(s), abort_cond(s, v), where)


def is_final(s: State, v: Flags) -> Val:
    """The stage about to begin is the final one: few blocks remain, or no stage is left."""
    remaining = sub(s.nblk, s.copied)
    last = le(v.max_stages, add(s.stage, 1)) if v.final_at_max_stage else False
    return or_(le(remaining, s.thr), last)


def end(s: State, status: Mig, free: bool, finds_abort: bool = True) -> State:
    """End the migration; a paused request goes back into S's running batch, or, if its client
    aborted it meanwhile and S's abort handler found it (`finds_abort`: the variant's
    `abort_finds_paused`; the default is our designs'), ends there (S frees its blocks)."""
    t = s.replace(
        status=status, pc=Pc.DONE, ack=Ack.NONE,
        req=ite(s.req == Req.PAUSED, Req.RUNNING, s.req),
        m_free=or_(s.m_free, free),
    )
    if not finds_abort:
        return t
    return ite_state(and_(s.aborted, s.req == Req.PAUSED), _free_on_s(t, Req.FINISHED), t)


def end_as(s: State, v: Flags, status: Mig, free: bool) -> State:
    """`end` as variant `v` handles a client abort of the paused request."""
    return end(s, status, free, v.abort_finds_paused)


def abort_dst(s: State, v: Flags) -> State:
    return end_as(s, v, Mig.ABORTED_DST, v.free_on_abort_dst)


def release_slot(s: State) -> Val:
    return ite(s.d_slot == Slot.OURS, Slot.FREE, s.d_slot)


def release_reservation(s: State, v: Flags, slot: bool = True) -> State:
    """D frees this migration's reservation (and slot); with fencing, an uncommitted migration
    is also disowned for good (its later messages are refused)."""
    return s.replace(
        d_free=add(s.d_free, s.d_res), d_res=0, lease=False,
        d_slot=release_slot(s) if slot else s.d_slot,
        fenced=or_(s.fenced, and_(v.fence, s.d_req == DReq.NONE)),
    )


def refuse(s: State, v: Flags) -> State:
    """D answers FAIL to a call. What happens to the reservation is the variant's:
    freed (AE, v0.1.0), orphaned with its lease record consumed (HEAD), or kept for S's free."""
    s = s.replace(ack=Ack.FAIL)
    if v.refusal_frees:  # D forgets the migration: its later calls would fail
        return release_reservation(s, v).replace(fenced=True)
    if v.failed_call_drops_lease:
        return s.replace(lease=False, fenced=True, d_slot=release_slot(s))
    return s


def alloc_ok(s: State, v: Flags) -> Val:
    """D accepts a pre-allocation: the first call keeps the watermark and needs a free slot."""
    keeps_wm = le(s.wm, sub(s.d_free, s.n))
    first = and_(keeps_wm, s.d_slot == Slot.FREE) if v.slot_check else keeps_wm
    later = keeps_wm if v.watermark_every_stage else le(s.n, s.d_free)
    if v.later_alloc_checks_slot:
        later = and_(later, s.d_slot == Slot.OURS)
    return and_(ite(s.stage == 0, first, later), not_(s.fenced))


def at_pc(s: State, pc: Pc) -> Val:
    return and_(coordinating(s), s.pc == pc)


def reply(s: State, pc: Pc, ack: Ack) -> Val:
    return and_(at_pc(s, pc), s.ack == ack)


def awaiting_commit(s: State) -> Val:
    return and_(coordinating(s), one_of(s.pc, (Pc.COMMIT, Pc.RESOLVE)))


# ---- environment ---------------------------------------------------------------------------

def _decode_guard(s: State, v: Flags) -> Val:
    boundary = add(s.tok, 1) == s.bs
    g = and_(s.s_alive, s.req == Req.RUNNING, or_(not_(boundary), le(1, s.s_free)))
    return and_(g, not_(s.kv_pending)) if v.picks_in_prefill else g


def _scheduler_may_act(s: State, v: Flags) -> Val:
    """S's scheduler runs (it may preempt or re-admit the request) unless S's coordinator is
    between stages and does not yield there (`atomic_stage_start`)."""
    return and_(s.s_alive, s.pc != Pc.STAGE) if v.atomic_stage_start else s.s_alive


def _preempt_guard(s: State, v: Flags) -> Val:
    """S's scheduler preempts at a step's start; with a prefill of the request in flight (a
    step is running) the next schedule comes only after that step has ended."""
    g = and_(_scheduler_may_act(s, v), s.req == Req.RUNNING)
    return and_(g, not_(s.kv_pending)) if v.picks_in_prefill else g


def _preempt(s: State, v: Flags) -> State:
    """Recompute preemption; under `stamped_abort_check` one during a copy (after the stage's
    stamp) is marked for the post-copy check."""
    t = _free_on_s(s, Req.WAITING).replace(preempted=True)
    return t.replace(late_preempt=or_(s.late_preempt, s.pc == Pc.COPY)) if v.stamped_abort_check else t


def _decode(s: State, v: Flags) -> State:
    boundary = add(s.tok, 1) == s.bs
    grow = as_int(boundary)
    return s.replace(
        tok=ite(boundary, 0, add(s.tok, 1)), nblk=add(s.nblk, grow),
        s_blocks=add(s.s_blocks, grow), s_free=sub(s.s_free, grow),
    )


def _step_before_pause(s: State, v: Flags) -> State:
    """A decode that lands after S counted the final stage's blocks: the request leaves the
    batch only after it, so its length at the pause (what D will run) includes it."""
    t = _decode(s, v)
    return t.replace(p_nblk=t.nblk, p_tok=t.tok)


def _free_on_s(s: State, req: Req) -> State:
    """S releases the request's blocks: its private ones go back to S's free pool; those other
    requests share stay theirs (their refcount drops, the blocks stay in use)."""
    return s.replace(req=req, s_free=add(s.s_free, sub(s.s_blocks, s.s_shared)),
                     s_other=add(s.s_other, s.s_shared), s_blocks=0, s_shared=0)


def full_blocks(nblk: Val, tok: Val, bs: Val) -> Val:
    """How many of a KV's `nblk` blocks are full (the last one is when it holds bs tokens)."""
    return add(sub(nblk, 1), as_int(tok == sub(bs, 1)))


def pull(s: State, src: Val) -> State:
    """D pulls this stage's n blocks into positions [copied, copied + n) of its copy, reading S's
    blocks [src, src + n) of the request now. What D's copy then holds (`d_full`, `d_tail`) grows
    only if the read is right: from the same offset, of blocks S holds for the request with its
    KV complete (no prefill writing it), contiguous with what D already holds complete; full
    blocks count as full, a partly filled last block as its tokens. Anything else (S freed or
    never had them, a gap, a stale partial block before them) leaves D's copy short, for good."""
    full = full_blocks(s.nblk, s.tok, s.bs)
    end = add(s.copied, s.n)
    read_ok = and_(one_of(s.req, (Req.RUNNING, Req.PAUSED)), s.s_blocks == s.nblk, not_(s.kv_pending),
                   src == s.copied, s.d_full == s.copied, s.d_tail == 0, le(end, s.nblk))
    return s.replace(
        copied=end,
        d_full=ite(read_ok, ite(lt(end, full), end, full), s.d_full),
        d_tail=ite(and_(read_ok, lt(full, end)), add(s.tok, 1), s.d_tail),
    )


ENV: tuple[Action, ...] = (
    Action("decode", "env", _decode_guard, _decode,
           "S decodes one token; every bs tokens the request needs a new block from S's free pool."),
    Action("prefill_done", "env", lambda s, v: and_(s.s_alive, s.kv_pending),
           lambda s, v: s.replace(kv_pending=False),
           "The forward pass that writes the request's prompt KV (its prefill, running when the "
           "migration picked it) ends: S's copy of the KV is complete. It ends whether or not S "
           "has since paused, finished or handed over the request.",
           lambda v: v.picks_in_prefill),
    Action("step_before_pause", "env",
           lambda s, v: and_(_decode_guard(s.replace(req=Req.RUNNING), v), s.req == Req.PAUSED,
                             s.final, s.m_alloc),
           _step_before_pause,
           "S's step already due when S counted the final stage's blocks runs before the request "
           "leaves the batch: one more token (a new block if the last was full) that D is not asked for.",
           lambda v: v.pause_deferred),
    Action("finish", "env", lambda s, v: and_(s.s_alive, s.req == Req.RUNNING),
           lambda s, v: _free_on_s(s, Req.FINISHED), "The request completes on S; S frees its blocks."),
    Action("finish_in_flight", "env",
           lambda s, v: and_(s.s_alive, s.req == Req.PAUSED, s.final),
           lambda s, v: _free_on_s(s, Req.FINISHED),
           "The forward pass that was running when S paused the request ends it (its last token): "
           "S's output processing still handles the paused request and frees its blocks.",
           lambda v: v.pause_mid_step),
    Action("client_abort", "env",
           lambda s, v: and_(s.s_alive, s.req == Req.PAUSED, not_(s.c_sent), not_(s.aborted)),
           lambda s, v: s.replace(aborted=True),
           "The client aborts the request while S has it paused for the final stage and has not "
           "sent the commit (the abort goes to S, where the request last ran): S must not hand it "
           "over, and ends it when the migration ends, if its abort handler finds the paused "
           "request (`abort_finds_paused`); else the abort is lost."),
    Action("preempt", "env", _preempt_guard, _preempt,
           "S preempts the request by recompute: blocks freed, back to S's waiting queue."),
    Action("readmit", "env",
           lambda s, v: and_(_scheduler_may_act(s, v), s.req == Req.WAITING, le(s.nblk, s.s_free)),
           lambda s, v: s.replace(req=Req.RUNNING, s_blocks=s.nblk, s_free=sub(s.s_free, s.nblk)),
           "S re-admits the preempted request and recomputes its KV."),
    Action("crash_s", "env", lambda s, v: s.s_alive, lambda s, v: s.replace(s_alive=False),
           "S crashes (crash-stop)."),
    Action("crash_d", "env", lambda s, v: s.d_alive, lambda s, v: s.replace(d_alive=False),
           "D crashes (crash-stop)."),
    Action("d_oom", "env", lambda s, v: and_(s.d_alive, lt(0, s.d_free)),
           lambda s, v: s.replace(d_other=add(s.d_other, s.d_free), d_free=0),
           "Other load takes all of D's free blocks."),
    Action("s_oom", "env", lambda s, v: and_(s.s_alive, lt(0, s.s_free)),
           lambda s, v: s.replace(s_other=add(s.s_other, s.s_free), s_free=0),
           "Other load takes all of S's free blocks."),
    Action("other_mig_in", "env", lambda s, v: and_(s.d_alive, s.d_slot == Slot.FREE),
           lambda s, v: s.replace(d_slot=Slot.OTHER), "Another migration into D takes D's slot."),
    Action("other_mig_out", "env", lambda s, v: and_(s.d_alive, s.d_slot == Slot.OTHER),
           lambda s, v: s.replace(d_slot=Slot.FREE), "That other migration ends."),
    Action("lease_expire", "env", lambda s, v: and_(s.d_alive, s.lease),
           lambda s, v: release_reservation(s, v, slot=v.lease_releases_slot),
           "D's lease watcher frees a reservation older than the lease.", lambda v: v.lease),
    Action("d_finish", "env", lambda s, v: and_(s.d_alive, s.d_req == DReq.RUNNING),
           lambda s, v: s.replace(d_req=DReq.FINISHED, d_free=add(s.d_free, s.d_blocks), d_blocks=0),
           "The migrated request completes on D."),
)

# ---- S's coordinator -----------------------------------------------------------------------


def _begin(s: State, v: Flags, final: bool) -> State:
    """Begin a stage: the final one pauses the request first (downtime starts here)."""
    if final:
        s = s.replace(req=Req.PAUSED, final=True, p_nblk=s.nblk, p_tok=s.tok)
        n = sub(s.nblk, s.copied)
    else:
        n = sub(sub(s.nblk, 1), s.copied)  # full blocks only: the last one still grows
    return s.replace(n=n, m_alloc=True, pc=Pc.ALLOC)


def _can_begin(s: State, v: Flags) -> Val:
    return and_(at_pc(s, Pc.STAGE), not_(abort_cond(s, v)), lt(s.stage, v.max_stages))


def _call_raised(s: State, v: Flags) -> State:
    """S's call raised (D's actor died, or D's pull raised): the migration ends with nothing
    freed; the request is re-queued only where the variant does that on an RPC error."""
    if v.requeue_on_rpc_error:
        return abort_dst(s, v)
    return end_as(s, v, Mig.ABORTED_DST, False).replace(req=s.req)


def _d_dead(s: State, v: Flags) -> State:
    """S learns that D died. Before the commit was sent D cannot have committed: S resumes the
    request (if the variant re-queues at all). Once the commit was sent (waiting for its reply
    or for the fence's) D may have committed and run the request before dying; with
    `commit_unknown_drops` S then does not run it again (at most once): it frees its copy and
    counts the request as handed over, lost with D like every request D was running."""
    if not v.requeue_on_rpc_error:
        return _call_raised(s, v)
    resumed = abort_dst(s, v)
    if not v.commit_unknown_drops:
        return resumed
    return ite_state(one_of(s.pc, (Pc.COMMIT, Pc.RESOLVE)), drop_copy(s, v), resumed)


def drop_copy(s: State, v: Flags) -> State:
    """S ends the migration counting the request as handed over and frees its copy (`safe`, once
    the commit was sent and D died)."""
    return _free_on_s(end_as(s, v, Mig.ABORTED_DST, v.free_on_abort_dst), Req.MIGRATED)


S_ACTIONS: tuple[Action, ...] = (
    Action("begin_stage", "S", lambda s, v: and_(_can_begin(s, v), not_(is_final(s, v))),
           lambda s, v: _begin(s, v, final=False),
           "S begins a non-final stage: ask D to pre-allocate the full blocks not yet copied."),
    Action("begin_final", "S", lambda s, v: and_(_can_begin(s, v), is_final(s, v)),
           lambda s, v: _begin(s, v, final=True),
           "S pauses the request (out of the running batch) and asks D for the remaining blocks."),
    Action("abort_src", "S", _abort_src_guard,
           lambda s, v: end_as(s, v, Mig.ABORTED_SRC, v.free_on_abort_src),
           "S's check finds the request finished or preempted: ABORTED_SRC (at a stage's start, "
           "or after D's pre-allocation reply where the variant checks before each copy)."),
    Action("abort_src_raise", "S",
           lambda s, v: and_(coordinating(s), s.pc == Pc.STAGE, _raises_at_stage(s)),
           lambda s, v: end_as(s, v, Mig.ABORTED_SRC, False),
           "v0.1.0: the stage's block-table lookup raises for a request preempted before the "
           "stage's stamp: the migration ends, and nothing tells D to free.",
           lambda v: v.stamped_abort_check),
    Action("abort_stages", "S",
           lambda s, v: and_(at_pc(s, Pc.STAGE), not_(abort_cond(s, v)), le(v.max_stages, s.stage)),
           lambda s, v: end_as(s, v, Mig.ABORTED_SRC, v.free_on_abort_src),
           "Too many non-final stages: S gives up (ABORTED_SRC, as the code does).",
           lambda v: not v.final_at_max_stage),
    Action("s_alloc_ok", "S",
           lambda s, v: and_(reply(s, Pc.ALLOC, Ack.OK), not_(abort_cond(s, v)))
           if v.early_abort_checks else reply(s, Pc.ALLOC, Ack.OK),
           lambda s, v: s.replace(pc=Pc.COPY, m_copy=True, ack=Ack.NONE,
                                  **({"late_preempt": False} if v.stamped_abort_check else {})),
           "D reserved the blocks; S asks D to pull them (after its abort check, where it has one)."),
    Action("s_alloc_fail", "S", lambda s, v: reply(s, Pc.ALLOC, Ack.FAIL), abort_dst,
           "D refused the pre-allocation: ABORTED_DST."),
    Action("s_copy_done", "S", lambda s, v: and_(reply(s, Pc.COPY, Ack.OK), not_(s.final)),
           lambda s, v: s.replace(stage=add(s.stage, 1), pc=Pc.STAGE, ack=Ack.NONE),
           "A non-final stage's copy finished; on to the next stage."),
    Action("s_send_commit", "S",
           lambda s, v: and_(reply(s, Pc.COPY, Ack.OK), s.final, not_(abort_seen(s, v))),
           lambda s, v: s.replace(pc=Pc.COMMIT, m_commit=True, ack=Ack.NONE, c_sent=True),
           "The final copy finished; S sends the request to D to commit."),
    Action("s_copy_fail", "S", lambda s, v: reply(s, Pc.COPY, Ack.FAIL),
           lambda s, v: _call_raised(s, v) if v.copy_failure_raises else abort_dst(s, v),
           "D reports the copy failed: ABORTED_DST (or S's call raises the pull's error)."),
    Action("s_commit_ok", "S", lambda s, v: and_(awaiting_commit(s), s.ack == Ack.OK),
           lambda s, v: _free_on_s(s, Req.MIGRATED).replace(
               status=Mig.FINISHED, pc=Pc.DONE, ack=Ack.NONE),
           "D committed; S frees its blocks and drops the request."),
    Action("s_commit_fail", "S", lambda s, v: and_(awaiting_commit(s), s.ack == Ack.FAIL), abort_dst,
           "D refused the commit (it had fenced the migration): S resumes the request.",
           lambda v: v.fence),
    Action("s_d_dead", "S",
           lambda s, v: and_(coordinating(s), not_(s.d_alive),
                             one_of(s.pc, (Pc.ALLOC, Pc.COPY, Pc.COMMIT, Pc.RESOLVE))),
           lambda s, v: _d_dead(s, v),
           "S's call fails because D's actor died (Ray reports it; crash-stop, accurate)."),
)

# ---- D -------------------------------------------------------------------------------------

D_ACTIONS: tuple[Action, ...] = (
    Action("d_alloc_ok", "D", lambda s, v: and_(s.d_alive, s.m_alloc, alloc_ok(s, v)),
           lambda s, v: s.replace(
               m_alloc=False, ack=Ack.OK, d_res=add(s.d_res, s.n), d_free=sub(s.d_free, s.n),
               lease=v.lease, d_slot=ite(s.d_slot == Slot.FREE, Slot.OURS, s.d_slot)),
           "D reserves n blocks (under a lease, if the variant has one)."),
    Action("d_alloc_refuse", "D", lambda s, v: and_(s.d_alive, s.m_alloc, not_(alloc_ok(s, v))),
           lambda s, v: refuse(s.replace(m_alloc=False), v),
           "D refuses: out of memory, no free slot (or the migration is fenced)."),
    Action("d_copy", "D", lambda s, v: and_(s.d_alive, s.s_alive, s.m_copy, not_(s.fenced)),
           lambda s, v: pull(s.replace(m_copy=False, ack=Ack.OK), s.copied),
           "D pulls this stage's n blocks from S into its reservation."),
    Action("d_copy_fail", "D", lambda s, v: and_(s.d_alive, s.m_copy),
           lambda s, v: s.replace(m_copy=False, ack=Ack.FAIL) if v.copy_failure_raises
           else refuse(s.replace(m_copy=False), v),
           "D's pull fails (a transfer error; always, once the migration is fenced)."),
    Action("d_commit", "D", lambda s, v: and_(s.d_alive, s.m_commit, not_(s.fenced)),
           lambda s, v: s.replace(
               m_commit=False, ack=Ack.OK, d_req=DReq.RUNNING, d_nblk=s.p_nblk,
               d_blocks=s.d_res, d_res=0, lease=False,
               d_slot=ite(s.d_slot == Slot.OURS, Slot.FREE, s.d_slot)),
           "D turns the reservation into the request's blocks and runs it."),
    Action("d_commit_refuse", "D", lambda s, v: and_(s.d_alive, s.m_commit, s.fenced),
           lambda s, v: s.replace(m_commit=False, ack=Ack.FAIL, d_slot=release_slot(s))
           if v.failed_call_drops_lease else s.replace(m_commit=False, ack=Ack.FAIL),
           "D refuses to commit a fenced migration (HEAD's handler, like every refused call, "
           "also gives back D's slot once the lease record is gone).", lambda v: v.fence),
    Action("d_commit_fail", "D", lambda s, v: and_(s.d_alive, s.m_commit, not_(s.fenced)),
           lambda s, v: refuse(s.replace(m_commit=False, d_blocks=s.d_res, d_res=0, lease=False), v),
           "D's commit handler takes the reservation as the request's blocks, then fails before "
           "the request joins a queue (A3'): D answers FAIL holding the blocks under no request; "
           "the failed call consumes what the variant's refusals consume.",
           lambda v: v.commit_fail_holds),
    Action("d_free_res", "D", lambda s, v: and_(s.d_alive, s.m_free),
           lambda s, v: release_reservation(s, v).replace(m_free=False)
           if not v.free_needs_lease else ite_state(
               s.lease, release_reservation(s, v), s.replace(d_slot=release_slot(s))
           ).replace(m_free=False),
           "D frees the reservation at S's request (after an abort)."),
    Action("d_fence", "D", lambda s, v: and_(s.d_alive, s.m_fence),
           lambda s, v: release_reservation(s, v).replace(
               m_fence=False, ack=ite(s.d_req == DReq.NONE, Ack.FAIL, Ack.OK)),
           "D answers whether it committed; if not, it fences the migration for good.",
           lambda v: v.resolve_commit_timeout),
)

# ---- timeouts (spurious: the message stays in flight) --------------------------------------


def ite_state(c: Val, a: State, b: State) -> State:
    """Field-wise if-then-else of two states (an effect that branches on the state). On Python
    values it picks one state whole; with any Z3 term in play every field gets its If, as always
    (the checker's terms stay exactly as they were). A State's __dict__ holds just its fields, so
    the test reads them without building a dict per state (the Hypothesis machines run this)."""
    if not is_symbolic(c, *a.__dict__.values(), *b.__dict__.values()):
        return a if c else b
    xs, ys = a.as_dict().values(), b.as_dict().values()
    return State(**{f: ite(c, x, y) for f, x, y in zip(FIELDS, xs, ys)})


def _commit_timeout(s: State, v: Flags) -> State:
    if v.resolve_commit_timeout:
        return s.replace(pc=Pc.RESOLVE, m_fence=True, ack=Ack.NONE)
    return abort_dst(s, v)


TIMEOUTS: tuple[Action, ...] = (
    Action("timeout_alloc", "timeout", lambda s, v: at_pc(s, Pc.ALLOC), abort_dst,
           "The pre-allocation RPC times out: ABORTED_DST.", lambda v: v.timeouts),
    Action("timeout_copy", "timeout", lambda s, v: at_pc(s, Pc.COPY), abort_dst,
           "The copy RPC times out: ABORTED_DST.", lambda v: v.timeouts),
    Action("timeout_commit", "timeout", lambda s, v: at_pc(s, Pc.COMMIT), _commit_timeout,
           "The commit RPC times out: the variant decides what S does with the request.",
           lambda v: v.timeouts),
)

BASE_ACTIONS: tuple[Action, ...] = ENV + S_ACTIONS + D_ACTIONS + TIMEOUTS
