"""Seeded bugs, each a variant of `safe`, and what checking them says.

Three kinds:
- hand-written (`HAND_WRITTEN`): one flag flipped or one action replaced, each with the property
  expected to catch it;
- issue #27's slips (`SLIP_MUTANTS`, models/slips.py), each with its property;
- named slips (`NAMED`): the three bugs of issue #11 that passed every check before KV
  integrity, at-most-once, commit integrity and liveness existed, and more plausible one-line
  slips, each with the property (safety or liveness) expected to catch it;
- generated (`generated()`), systematically from the Z3 form of every action of `safe` by the
  operators of models/operators.py: structure (a guard conjunct dropped, a reply test turned,
  an update skipped, applied to the other side or with success and failure swapped) and values
  and conditions (a literal off by one, a comparison made strict or reversed, an S-side read
  of the D-side field, two updates in sequence instead of from one old state).
  Each mutated term is compiled back into an ordinary action over the ops facade
  (models/compile.py), so the mutant runs concretely and symbolically like `safe` itself.

A hand-written or named mutant is killed when its expected property is violated (BMC for a
safety property, a lasso on the explicit graph for a liveness one). A generated mutant is first
tried for equivalence: if on every state of `safe`'s inductive invariant (a superset of its
reachable states) the mutant's relation of every action equals `safe`'s, the two have the same
reachable states and the same steps, so no property can tell them apart (proved by Z3, never
assumed); failing that, a bisimulation up to dead state (`_bisimilar`), or a reordering: the
mutant's executions are safe's with one step taken earlier and safe's are the mutant's up to a
dropped reply (`_reordered`, REORDERINGS). Otherwise it is killed by the first violation of any
safety property (BMC) or, failing that, by a lasso against any liveness property; what is left
survives.
"""

from __future__ import annotations

import functools
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping

import z3

from llumverify.protocol.actions import (
    BASE_ACTIONS, Action, Flags, _free_on_s, abort_cond, abort_dst, alloc_ok, at_pc, coordinating, end, is_final,
)
from llumverify.protocol.ops import (
    Val, add, and_, as_int, implies, ite, le, lt, not_, one_of, or_, sub,
)
from llumverify.protocol.state import FIELDS, Ack, DReq, Mig, Pc, Req, Slot, State
from llumverify.protocol.variants import SAFE, Variant
from llumverify.files.interrupt import forkserver_context
from llumverify.models.bmc import Unroller
from llumverify.models.compile import facade_effect, facade_guard, tuple_failures
from llumverify.models.encoding import (
    POST, PRE, Encoding, Renaming, action_terms, encode, equal, symbolic_state,
)
from llumverify.models.liveness import BOUND, StateGraph, StateMonitor, covered, explore, lassos
from llumverify.models.induction import prove
from llumverify.models.scope import obligations
from llumverify.models.operators import specs
from llumverify.models.slips import SLIPS
from llumverify.models.stages import stage_obligations
from llumverify.properties.liveness import LIVENESS
from llumverify.properties.safety import DEATH_NOTICE, PROPERTIES, decision_pairs


@dataclass(frozen=True)
class Mutant:
    name: str
    doc: str
    expect: str | None  # the property that must catch it (None: generated, any may)
    variant: Variant
    origin: str = "hand"  # hand | named | generated


def _base(name: str) -> Action:
    return next(a for a in BASE_ACTIONS if a.name == name)


def _swap(name: str, guard=None, effect=None) -> dict[str, Action]:  # type: ignore[no-untyped-def]
    """An override of one action: the base action with a new guard and/or effect."""
    a = _base(name)
    return {name: replace(a, guard=guard or a.guard, effect=effect or a.effect)}


def _mutant(name: str, expect: str, doc: str, overrides: Mapping[str, Action] | None = None,
            **flags: object) -> Mutant:
    return Mutant(name, doc, expect, SAFE.derive(f"mutant:{name}", doc, overrides, **flags))


def _then(name: str, extra) -> dict[str, Action]:  # type: ignore[no-untyped-def]
    """Override: the base effect followed by `extra`."""
    base = _base(name)
    return _swap(name, effect=lambda s, v: extra(base.effect(s, v), s, v))


def _no_requeue(s: State, v: Flags) -> State:
    return abort_dst(s, v).replace(req=s.req)


def _final_n(delta: int):  # type: ignore[no-untyped-def]
    begin = _base("begin_final")

    def effect(s: State, v: Flags) -> State:
        t = begin.effect(s, v)
        return t.replace(n=add(t.n, delta))
    return effect


def _decode_early(s: State, v: Flags) -> State:
    """`decode` with its block boundary one token early."""
    grow = add(s.tok, 2) == s.bs
    return s.replace(tok=ite(grow, 0, add(s.tok, 1)), nblk=add(s.nblk, as_int(grow)),
                     s_blocks=add(s.s_blocks, as_int(grow)), s_free=sub(s.s_free, as_int(grow)))


def _dead_or_alive_resolve(s: State, v: Flags) -> Val:
    return or_(at_pc(s, Pc.RESOLVE), and_(at_pc(s, Pc.COMMIT), not_(s.d_alive)))


# ---- hand-written ---------------------------------------------------------------------------

HAND_WRITTEN: tuple[Mutant, ...] = (
    _mutant("no_fence", "copy_into_reserved",
            "D keeps serving a migration whose reservation it freed (no fencing).", fence=False),
    _mutant("blind_requeue_on_commit_timeout", "single_owner",
            "On commit timeout S resumes the request without asking D (HEAD's handling).",
            resolve_commit_timeout=False),
    _mutant("no_lease", "no_leak", "Reservations never expire: a crashed S leaks them.",
            lease=False),
    _mutant("lease_not_set", "no_leak", "D reserves without starting the lease.",
            _then("d_alloc_ok", lambda t, s, v: t.replace(lease=False))),
    _mutant("no_requeue_on_abort", "no_loss",
            "A pre-allocation timeout leaves the paused request out of every batch.",
            _swap("timeout_alloc", effect=_no_requeue)),
    _mutant("free_before_commit", "no_loss",
            "S frees its blocks and drops the request when it sends the commit.",
            _then("s_send_commit", lambda t, s, v: _free_on_s(t, Req.MIGRATED))),
    _mutant("decode_while_paused", "no_decode_after_pause",
            "The decode guard also admits a paused request.",
            _swap("decode", guard=lambda s, v: and_(
                s.s_alive, one_of(s.req, (Req.RUNNING, Req.PAUSED)),
                or_(not_(add(s.tok, 1) == s.bs), le(1, s.s_free))))),
    _mutant("no_pause_in_final", "single_owner",
            "The final stage forgets to take the request out of the running batch.",
            _then("begin_final", lambda t, s, v: t.replace(req=s.req))),
    _mutant("commit_before_copy", "commit_after_copy",
            "S sends the commit without waiting for the final copy to finish.",
            _swap("s_send_commit", guard=lambda s, v: and_(at_pc(s, Pc.COPY), s.final))),
    _mutant("final_copy_off_by_one", "commit_after_copy",
            "The final stage asks for one block fewer than remain (last block lost).",
            _swap("begin_final", effect=_final_n(-1))),
    _mutant("final_copy_one_extra", "commit_after_copy",
            "The final stage asks for one block more than remain.",
            _swap("begin_final", effect=_final_n(+1))),
    _mutant("first_alloc_no_slot_check", "slot_discipline",
            "The first pre-allocation ignores D's migration slot.",
            _swap("d_alloc_ok", guard=lambda s, v: and_(s.d_alive, s.m_alloc, not_(s.fenced),
                                                        le(s.wm, sub(s.d_free, s.n))))),
    _mutant("later_alloc_no_memory_check", "block_accounting",
            "Later pre-allocations skip the free-block check.",
            _swap("d_alloc_ok", guard=lambda s, v: and_(s.d_alive, s.m_alloc, or_(
                alloc_ok(s, v), and_(lt(0, s.stage), s.d_slot == Slot.OURS, not_(s.fenced)))))),
    _mutant("first_alloc_off_by_one", "block_accounting",
            "The first pre-allocation accepts one block more than is free above the watermark.",
            _swap("d_alloc_ok", guard=lambda s, v: and_(s.d_alive, s.m_alloc, or_(
                alloc_ok(s, v), and_(s.stage == 0, s.d_slot == Slot.FREE, not_(s.fenced),
                                     le(s.wm, add(sub(s.d_free, s.n), 1))))))),
    _mutant("lease_expiry_no_fence", "copy_into_reserved",
            "The lease watcher frees a reservation without fencing its migration.",
            _then("lease_expire", lambda t, s, v: t.replace(fenced=s.fenced))),
    _mutant("resolve_without_detection", "single_owner",
            "S resumes an unresolved commit without D being declared dead.",
            _swap("s_d_dead", guard=_dead_or_alive_resolve, effect=abort_dst)),
    _mutant("fence_always_refuses", "single_owner",
            "D answers the fence with 'not committed' even after committing.",
            _then("d_fence", lambda t, s, v: t.replace(ack=Ack.FAIL))),
    _mutant("commit_ok_keeps_source_blocks", "no_source_leak",
            "After the hand-over S forgets to free the request's blocks.",
            _then("s_commit_ok", lambda t, s, v: t.replace(
                s_blocks=s.s_blocks, s_free=s.s_free))),
    _mutant("preempt_keeps_blocks", "no_source_leak",
            "Preemption moves the request to the waiting queue without freeing its blocks.",
            _then("preempt", lambda t, s, v: t.replace(s_blocks=s.s_blocks, s_free=s.s_free))),
    _mutant("commit_allocates_fresh", "block_accounting",
            "D gives the committed request fresh blocks instead of the reservation.",
            _then("d_commit", lambda t, s, v: t.replace(d_blocks=s.p_nblk, d_res=s.d_res))),
    _mutant("ignore_alloc_refusal", "copy_into_reserved",
            "S treats a refused pre-allocation as granted and asks D to copy.",
            _swap("s_alloc_fail", effect=lambda s, v: s.replace(
                pc=Pc.COPY, m_copy=True, ack=Ack.NONE))),
    _mutant("readmit_without_memory", "block_accounting",
            "S re-admits the preempted request without checking for free blocks.",
            _swap("readmit", guard=lambda s, v: and_(s.s_alive, s.req == Req.WAITING))),
    _mutant("decode_without_memory", "block_accounting",
            "A decode step takes a new block even when S has none free.",
            _swap("decode", guard=lambda s, v: and_(s.s_alive, s.req == Req.RUNNING))),
    _mutant("d_finish_keeps_blocks", "no_leak",
            "D finishes the migrated request without freeing its blocks.",
            _then("d_finish", lambda t, s, v: t.replace(d_blocks=s.d_blocks, d_free=s.d_free))),
    _mutant("commit_ignores_fence", "committed_kv_owned",
            "D commits a migration it has already fenced (its reservation is gone).",
            _swap("d_commit", guard=lambda s, v: and_(s.d_alive, s.m_commit))),
    _mutant("commit_ok_requeues", "single_owner",
            "S puts the request back into its batch after D committed it.",
            _then("s_commit_ok", lambda t, s, v: t.replace(req=Req.RUNNING))),
    _mutant("free_keeps_reservation", "block_accounting",
            "D returns a freed reservation to its pool but keeps counting it as reserved.",
            _then("d_free_res", lambda t, s, v: t.replace(d_res=s.d_res))),
    _mutant("copy_without_alloc_ack", "copy_into_reserved",
            "S asks D to copy before the pre-allocation was confirmed.",
            _swap("s_alloc_ok", guard=lambda s, v: and_(at_pc(s, Pc.ALLOC), s.ack != Ack.FAIL,
                                                        not_(s.preempted)))),
    _mutant("no_preempt_check", "no_stale_kv",
            "S checks only that the request is still running, not whether it was preempted.",
            early_abort_checks=False),
    _mutant("lease_keeps_slot", "slot_released",
            "The lease watcher frees the blocks but not D's migration slot.",
            lease_releases_slot=False),
    _mutant("abort_src_without_free", "no_leak",
            "ABORTED_SRC without telling D, and no lease to clean up after it.",
            free_on_abort_src=False, lease=False),
)


# ---- named slips: issue #11's three, and more ------------------------------------------------

def _abort_dst_frees_kv(s: State, v: Flags) -> State:
    """ABORTED_DST, but S frees the request's KV on its own side and resumes it without."""
    t = abort_dst(s, v)
    return _free_on_s(t, t.req)


_ABORT_DST_ACTIONS = ("s_alloc_fail", "s_copy_fail", "s_commit_fail", "timeout_alloc",
                      "timeout_copy")


def _named(name: str, expect: str, doc: str, overrides: Mapping[str, Action] | None = None,
           **flags: object) -> Mutant:
    return Mutant(name, doc, expect, SAFE.derive(f"mutant:{name}", doc, overrides, **flags),
                  "named")


def _to_other_pool(t: State, s: State, v: Flags) -> State:
    """After an action that releases blocks on D: what it gave back to D's free pool goes to the pool other
    requests use instead (the wrong field in one line), a leak no owner frees."""
    return t.replace(d_free=s.d_free, d_other=add(s.d_other, sub(t.d_free, s.d_free)))


def _one_more_taken(side: str) -> Callable[[State, State, Flags], State]:
    """After an action that takes blocks on `side` ("s" or "d"): one free block more taken (if any is left),
    counted as other requests' load, not as the request's or the reservation's: a leak no owner frees."""
    def extra(t: State, s: State, v: Flags) -> State:
        free, other = getattr(t, f"{side}_free"), getattr(t, f"{side}_other")
        one = ite(le(1, free), 1, 0)
        return t.replace(**{f"{side}_free": sub(free, one), f"{side}_other": add(other, one)})
    return extra


NAMED: tuple[Mutant, ...] = (
    # issue #11
    _named("abort_dst_frees_kv", "kv_integrity",
           "(#11 a) On ABORTED_DST S frees the request's KV on its own side and resumes the "
           "request without it.",
           {n: replace(_base(n), effect=_abort_dst_frees_kv) for n in _ABORT_DST_ACTIONS}),
    _named("begin_final_no_abort_check", "at_most_once",
           "(#11 b) begin_final without its abort check: a request that finished (its KV freed) "
           "is paused, copied and committed on D.",
           _swap("begin_final", guard=lambda s, v: and_(at_pc(s, Pc.STAGE), lt(s.stage, v.max_stages),
                                                        is_final(s, v)))),
    _named("swallow_copy_failure", "no_stuck_pause",
           "(#11 c) S swallows a failed copy reply and keeps waiting: the request stays paused "
           "for ever.",
           _swap("s_copy_fail", effect=lambda s, v: s.replace(ack=Ack.NONE))),
    # more one-line slips
    _named("resume_after_dead_commit", "at_most_once",
           "When D dies while S waits for the commit reply, S resumes the request although D "
           "may have committed and run it (safe before this fix).",
           _swap("s_d_dead", effect=abort_dst)),
    _named("readmit_finished", "at_most_once",
           "Re-admission checks 'not running' instead of 'waiting': a finished request re-enters "
           "S's batch.",
           _swap("readmit", guard=lambda s, v: and_(s.s_alive, one_of(s.req, (Req.WAITING, Req.FINISHED)),
                                                    le(s.nblk, s.s_free)))),
    _named("abort_src_always_resumes", "at_most_once",
           "ABORTED_SRC puts the request back into S's batch whatever happened to it (finished "
           "or preempted).",
           _swap("abort_src", effect=lambda s, v: end(s, Mig.ABORTED_SRC, v.free_on_abort_src)
                 .replace(req=Req.RUNNING))),
    _named("commit_keeps_lease", "kv_integrity",
           "D commits but leaves the reservation's lease record: the watcher will free the "
           "running request's blocks.",
           _then("d_commit", lambda t, s, v: t.replace(lease=s.lease))),
    _named("preempt_while_paused", "commit_integrity",
           "The engine may preempt a request paused for the final stage; the copy goes on and D "
           "commits the stale KV.",
           _swap("preempt", guard=lambda s, v: and_(s.s_alive, one_of(s.req, (Req.RUNNING, Req.PAUSED))))),
    _named("dead_d_ignored_while_committing", "no_stuck_pause",
           "S notices D's death only while pre-allocating or copying: if D dies after the "
           "commit was sent, S waits for its reply for ever with the request paused.",
           _swap("s_d_dead", guard=lambda s, v: and_(coordinating(s), not_(s.d_alive),
                                                     one_of(s.pc, (Pc.ALLOC, Pc.COPY))))),
    _named("retry_refused_alloc", "migration_terminates",
           "S retries a refused pre-allocation instead of aborting: while D stays full (or its "
           "slot taken) S and D go round for ever with the request paused.",
           _swap("s_alloc_fail", effect=lambda s, v: s.replace(pc=Pc.STAGE, ack=Ack.NONE))),
    _named("decode_new_block_early", "token_growth",
           "Decoding takes a new block one token early (`tok + 2 == bs`): the last block is "
           "never filled, and the request holds a block more than its tokens need.",
           _swap("decode", effect=_decode_early)),
    _named("timeout_fences_on_d", "fence_on_cause",
           "S's pre-allocation timeout also marks the migration fenced, as if D had given it up "
           "(one flag for both sides): D refuses a migration it never heard of being aborted.",
           _then("timeout_alloc", lambda t, s, v: t.replace(fenced=True))),
    _named("begin_stage_ignores_final", "decisive",
           "begin_stage's guard lost its `not is_final` (copied from the shared stage check): "
           "when few blocks remain S may still begin a non-final stage, or the final one.",
           _swap("begin_stage", guard=lambda s, v: and_(at_pc(s, Pc.STAGE), not_(abort_cond(s, v)),
                                                        lt(s.stage, v.max_stages)))),
    _named("fence_refusal_ignored", "no_stuck_pause",
           "S handles a refused commit only while waiting for the commit reply, not for the "
           "fence's: after a timeout and a refused fence the request stays paused for ever.",
           _swap("s_commit_fail", guard=lambda s, v: and_(at_pc(s, Pc.COMMIT), s.ack == Ack.FAIL))),
    _named("readmit_forgets_preemption", "preemption_seen",
           "Re-admission clears the request's preempted mark (read as 'preempted now', not 'since "
           "the migration began'): a request preempted during a stage and re-admitted before S's "
           "next check is migrated on, and D commits KV it copied from blocks S had freed.",
           _then("readmit", lambda t, s, v: t.replace(preempted=False))),
    _named("free_before_final_copy", "final_copy_from_held",
           "S frees the paused request's blocks as soon as D grants the final pre-allocation, to "
           "free memory early (the AE does this): other requests can take and overwrite them "
           "while D still pulls them.",
           _then("s_alloc_ok", lambda t, s, v: t.replace(
               s_free=ite(s.final, add(t.s_free, t.s_blocks), t.s_free),
               s_blocks=ite(s.final, 0, t.s_blocks)))),
    _named("pick_tail_mid_prefill", "no_pending_pull",
           "S's selection takes the tail of its running batch, the request admitted last, even "
           "while the step that runs its prefill is in flight (the AE's LCFS appends running[-1] "
           "where it meant the decoding request it found): D pulls KV the prefill is still "
           "writing.", picks_in_prefill=True),
    # session 32's mutant hunt: blocks handed to the wrong pool on D (no pool went negative, no count was off)
    _named("d_release_to_other_pool", "dst_blocks_freed",
           "D's handler of S's free returns the reservation to the pool other requests use, not to its free pool "
           "(the wrong field in one line): every aborted migration takes its reservation out of D for good.",
           _then("d_free_res", _to_other_pool)),
    _named("lease_expiry_to_other_pool", "dst_blocks_freed",
           "D's lease watcher frees an expired reservation into the pool other requests use: each expiry leaks "
           "its blocks on D.",
           _then("lease_expire", _to_other_pool)),
    _named("d_release_off_by_one", "dst_blocks_freed",
           "D's handler of S's free gives back all but one block of the reservation (an off-by-one in its loop): "
           "the last stays counted as used by other requests, a block lost on D per aborted migration.",
           _then("d_free_res", lambda t, s, v: t.replace(
               d_free=sub(t.d_free, ite(le(1, s.d_res), 1, 0)), d_other=add(t.d_other, ite(le(1, s.d_res), 1, 0))))),
    _named("d_release_one_too_many", "dst_blocks_freed",
           "D's handler of S's free releases one block past the reservation (an inclusive range): a block another "
           "request holds returns to the free pool, to be handed out and overwritten under it.",
           _then("d_free_res", lambda t, s, v: t.replace(
               d_free=add(t.d_free, ite(and_(le(1, s.d_res), le(1, s.d_other)), 1, 0)),
               d_other=sub(t.d_other, ite(and_(le(1, s.d_res), le(1, s.d_other)), 1, 0))))),
    _named("d_finish_to_other_pool", "dst_blocks_freed",
           "The migrated request finishes on D and its blocks go to the pool other requests use: every "
           "migrated request leaks its KV blocks on D.",
           _then("d_finish", _to_other_pool)),
    # session 33: blocks the request or its reservation takes, not checked by any property before
    _named("d_alloc_takes_one_more", "blocks_from_free",
           "D's pre-allocation takes one free block more than it records in the migration's reservation (a "
           "lookahead slot for the next token, as a block manager keeps for a running request): the extra "
           "block stays counted as other requests' load, and neither an abort nor the request's finish frees it.",
           _then("d_alloc_ok", _one_more_taken("d"))),
    _named("d_alloc_from_other", "blocks_from_free",
           "D's pre-allocation records n blocks in the reservation but takes them from the blocks its other "
           "requests hold (a free-list read after another request's allocation, without the pop): the copy "
           "overwrites KV that another request still owns, two owners of each block.",
           _then("d_alloc_ok", lambda t, s, v: t.replace(
               d_free=ite(le(s.n, s.d_other), s.d_free, t.d_free),
               d_other=ite(le(s.n, s.d_other), sub(s.d_other, s.n), s.d_other)))),
    _named("readmit_takes_one_more", "blocks_from_free",
           "S re-admits the preempted request and allocates one block more than its block table records "
           "(a lookahead slot): a block leaked on S per re-admission, as other requests' load.",
           _then("readmit", _one_more_taken("s"))),
    _named("decode_block_from_other", "blocks_from_free",
           "S's decode crosses a block boundary and appends to the request's block table a block another "
           "request holds (its free list not popped): two owners of one block, the other request's KV "
           "overwritten by this one's next tokens.",
           _then("decode", lambda t, s, v: t.replace(
               s_free=ite(le(1, s.s_other), s.s_free, t.s_free),
               s_other=sub(s.s_other, ite(le(1, s.s_other), sub(t.s_blocks, s.s_blocks), 0))))),
)

# slips only the composition obligations (models/scope.py) can see: each is safe for one
# migration from a running request, and breaks the argument for many requests and instances
SCOPE_NAMED: tuple[Mutant, ...] = (
    _named("free_frees_any_slot", "scope:guarantee",
           "D's handler of S's free marks the migration slot free whoever holds it (`d_slot = "
           "FREE` instead of releasing only its own): after a refused first pre-allocation it "
           "frees the slot of the migration that holds it.",
           _then("d_free_res", lambda t, s, v: t.replace(d_slot=Slot.FREE))),
    _named("fence_frees_committed", "scope:handover",
           "D answers a fence by freeing everything the migration has on D, the committed "
           "copy's blocks too: the request runs on D without its KV.",
           _then("d_fence", lambda t, s, v: t.replace(
               d_free=add(t.d_free, t.d_blocks), d_blocks=0))),
    # a slip the variant's own stage count (3) cannot reach: proved at 3 stages, so only the proof
    # with the count a symbol (models/stages.py) sees it
    _named("late_stage_skips_abort_check", "scope:any_stage_count",
           "From the fifth stage on, begin_final skips its abort check: a request that finished "
           "during a long pre-copy is paused, copied and committed on D (run twice). Invisible "
           "with MIGRATION_MAX_STAGES = 3, the setting a user may raise.",
           _swap("begin_final", guard=lambda s, v: and_(
               at_pc(s, Pc.STAGE), lt(s.stage, v.max_stages), is_final(s, v),
               or_(le(4, s.stage), not_(abort_cond(s, v)))))),
)

# issue #27's slips (models/slips.py), each with the property that catches it
SLIP_MUTANTS: tuple[Mutant, ...] = tuple(Mutant(name, doc, expect, v, "named") for name, expect, doc, v in SLIPS)

MUTANTS: Mapping[str, Mutant] = {m.name: m for m in (*HAND_WRITTEN, *NAMED, *SCOPE_NAMED, *SLIP_MUTANTS)}


# ---- generated (models/operators.py) ---------------------------------------------------------

def generated(base: Variant = SAFE) -> tuple[Mutant, ...]:
    """Every generated mutant of `base`, in a fixed order (action order, then site order)."""
    return tuple(m for a in base.actions for m in generated_of(a.name, base))


@functools.lru_cache(maxsize=None)
def generated_of(action: str, base: Variant = SAFE) -> tuple[Mutant, ...]:
    """The generated mutants of one action (they are told apart per action, so asking for one
    builds only its terms: a test running a few mutants does not pay for all 685)."""
    out = []
    for spec in specs(base, action):
        act = replace(base.action(action), guard=facade_guard(spec.guard), effect=facade_effect(spec.effect, PRE))
        v = base.derive(f"mutant:{spec.name}", spec.doc, {action: act})
        out.append(Mutant(spec.name, spec.doc, None, v, "generated"))
    return tuple(out)


def mutant(name: str) -> Mutant:
    """A hand-written or named mutant, or a generated one (`action/operator/site`)."""
    if name in MUTANTS:
        return MUTANTS[name]
    action = name.split("/")[0]
    found = ([m for m in generated_of(action) if m.name == name]
             if name.count("/") == 2 and action in {a.name for a in SAFE.actions} else [])
    if not found:
        raise KeyError(name)
    return found[0]


def all_mutants() -> dict[str, Mutant]:
    return {**MUTANTS, **{m.name: m for m in generated()}}


# ---- running them ----------------------------------------------------------------------------

GENERATED_BMC_DEPTH = 5  # symbolic search for a generated mutant the explicit graph misses

@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    violated: Mapping[str, int]  # property -> length of the counterexample (trace or lasso)
    equivalent: str = ""  # how Z3 proved it equivalent to `safe` ("": it did not)

    @property
    def killed(self) -> bool:
        if self.mutant.expect is not None:
            return self.mutant.expect in self.violated
        return bool(self.violated)

    @property
    def survived(self) -> bool:
        return not self.killed and not self.equivalent


@functools.lru_cache(maxsize=1)
def _base_invariant() -> tuple[z3.BoolRef, ...]:
    """safe's inductive invariant (Houdini over the safety and the liveness candidates)."""
    from llumverify.models.liveness import invariant
    return tuple(invariant(SAFE).values())


def equivalent(m: Mutant) -> str:
    """Z3 proof that no property can tell the mutant from `safe` ("" if none found):
    "same relation" - every action relates the same pairs of states on safe's invariant;
    "bisimilar up to ..." - the two are bisimilar up to a relation of RELATIONS (`_bisimilar`)."""
    base, mine = encode(SAFE), encode(m.variant)
    solver = z3.Solver()
    solver.add(*_base_invariant())
    for name in dict.fromkeys([*base.relations, *mine.relations]):
        rb = base.relations.get(name, z3.BoolVal(False))
        rm = mine.relations.get(name, z3.BoolVal(False))
        if rb.eq(rm):
            continue
        if solver.check(rb != rm) != z3.unsat:
            return _bisimilar(m) or _reordered(m)
    return "same relation"


# ---- bisimilarity up to dead state -------------------------------------------------------------
# Fields nothing reads any more: S's coordinator point and reply mailbox once S's coordinator
# is over (every S action needs it running, no property reads them), messages to a dead D
# (only D takes them; every property that looks at them asks for a live D). States s ~ t agree
# on every other field. If R = {(s, t): s satisfies safe's invariant, s ~ t} is a bisimulation
# between safe and the mutant that matches each step with a step of the same kind (S, D, a
# fair environment process, failures, the rest of the world; a step of the unfair world may
# also be matched by standing still) and keeps every property's value, then the mutant has the
# same executions as safe up to ~, fairness and failures included: no property tells them apart.

_T = symbolic_state("t_")
_DEAD: dict[str, Callable[[State], Val]] = {
    "pc": lambda s: not_(and_(s.s_alive, s.status == Mig.RUNNING)),
    "ack": lambda s: not_(and_(s.s_alive, s.status == Mig.RUNNING)),
    **{m: (lambda s: not_(s.d_alive)) for m in ("m_alloc", "m_copy", "m_commit", "m_free",
                                                 "m_fence")},
}
# A coarser relation, tried second: a free to a D that fenced the migration is moot too (a
# fenced migration holds nothing on D, so D's handling of the free changes nothing else; Z3
# checks that step by step below). It changes whether a message is in flight, which only the
# liveness goal `messages_handled` reads; so with it the liveness values are not compared state
# by state, and the mutant must pass its own liveness ranking proof (as every bisimilar one does).
RELATIONS: dict[str, dict[str, Callable[[State], Val]]] = {
    "dead state": _DEAD,
    "dead state and moot frees": {**_DEAD, "m_free": lambda s: or_(not_(s.d_alive), s.fenced)},
}


def _sim(a: State, b: State, rel: str = "dead state") -> z3.BoolRef:
    """a ~ b (a: safe's side, whose state says which fields are dead)."""
    dead = RELATIONS[rel]
    return z3.And(*(z3.Or(dead[f](a), getattr(a, f) == getattr(b, f)) if f in dead
                    else getattr(a, f) == getattr(b, f) for f in FIELDS))


def _kind(v: Variant, name: str) -> str:
    from llumverify.properties.liveness import FAILURES, FAIR_ENV
    a = v.action(name)
    if a.kind in ("S", "D"):
        return a.kind
    if name in FAILURES or a.kind == "timeout":
        return "failure"
    return name if name in FAIR_ENV else "world"


def _at(e: z3.ExprRef, state: State) -> z3.ExprRef:
    return Renaming.between(PRE, state)(e)


def _post(effect: tuple[z3.ExprRef, ...], at: State) -> State:
    rename = Renaming.between(PRE, at)
    return State(**{f: rename(e) for f, e in zip(FIELDS, effect)})


def _step_values(s: State, s2: State) -> tuple[z3.BoolRef, ...]:
    """Every step property's value on the step s -> s2."""
    return tuple(z3.And(p.step(s, s2)) for p in PROPERTIES.values() if p.step is not None)


def _agree(a: tuple[z3.BoolRef, ...], b: tuple[z3.BoolRef, ...]) -> z3.BoolRef:
    return z3.And(*(x == y for x, y in zip(a, b)))


def _steps_agree(s: State, s2: State, t: State, t2: State) -> z3.BoolRef:
    return _agree(_step_values(s, s2), _step_values(t, t2))


class _Steps:
    """One encoding's steps from s (PRE) or t (_T): guard, post-state and step-property values,
    each built once. Building these terms, not solving, was most of a bisimulation check's time
    (every step of one system is matched against every action of the other)."""

    def __init__(self, enc: Encoding) -> None:
        self.enc = enc
        self._memo: dict[tuple[str, bool], tuple[z3.BoolRef, State, tuple[z3.BoolRef, ...]]] = {}

    def step(self, name: str, from_s: bool) -> tuple[z3.BoolRef, State, tuple[z3.BoolRef, ...]]:
        key = (name, from_s)
        if key not in self._memo:
            pre = PRE if from_s else _T
            post = _post(self.enc.effects[name], pre)
            self._memo[key] = (_at(self.enc.guards[name], pre), post, _step_values(pre, post))
        return self._memo[key]


@functools.lru_cache(maxsize=1)
def _safe_steps() -> _Steps:
    return _Steps(encode(SAFE))


@functools.lru_cache(maxsize=2)
def _still(from_s: bool) -> tuple[z3.BoolRef, ...]:
    """The step properties' values on standing still at s (or t)."""
    pre = PRE if from_s else _T
    return _step_values(pre, pre)


@functools.lru_cache(maxsize=None)
def _sim_solver(rel: str = "dead state") -> z3.Solver | None:
    """A solver holding safe's invariant on s and s ~ t; None if some property reads a dead
    field (then ~ cannot be used). The liveness goals are compared for the finer relation only
    (see RELATIONS)."""
    solver = z3.Solver()
    solver.add(*_base_invariant(), _sim(PRE, _T, rel))
    preds = [p.predicate for p in PROPERTIES.values()]
    if rel == "dead state":
        preds += [p.predicate for p in LIVENESS.values()]
    for p in preds:
        if solver.check(z3.And(p(PRE)) != z3.And(p(_T))) != z3.unsat:
            return None
    return solver


def _matches(v: Variant, src: _Steps, dst: _Steps, name: str, base_side: bool,
             solver: z3.Solver, any_kind: bool = False, rel: str = "dead state") -> bool:
    """Every step of action `name` of one system (src) from a related pair is matched by a step
    of the same kind of the other (dst; any kind if any_kind), or by standing still. base_side:
    the moving system is safe's side of the relation (its state is s = PRE, the other's t)."""
    kind = None if any_kind else _kind(v, name)
    g, s2, moved = src.step(name, base_side)
    options = []
    for other in dst.enc.relations:
        if kind is not None and _kind(v, other) != kind:
            continue
        g2, t2, values = dst.step(other, not base_side)
        options.append(z3.And(g2, _sim(*((s2, t2) if base_side else (t2, s2)), rel), _agree(moved, values)))
    # or by standing still (the step changes nothing but dead state); for a fair process that
    # could change what fairness forces, so a mutant proved bisimilar this way must also pass
    # the liveness ranking proof (`_bisimilar`)
    t = _T if base_side else PRE
    options.append(z3.And(_sim(*((s2, t) if base_side else (t, s2)), rel), _agree(moved, _still(not base_side))))
    return solver.check(g, z3.Not(z3.Or(*options))) == z3.unsat


def _bisimilar(m: Mutant) -> str:
    """The first relation of RELATIONS under which the mutant is bisimilar to safe ("": none)."""
    base, mine = _safe_steps(), _Steps(encode(m.variant))
    if list(base.enc.relations) != list(mine.enc.relations):
        return ""
    for rel in RELATIONS:
        solver = _sim_solver(rel)
        if solver is not None and all(_related_steps(m, base, mine, name, solver, rel)
                                      for name in base.enc.relations):
            from llumverify.models.liveness import rank_proof
            return f"bisimilar up to {rel}" if rank_proof(m.variant).proved else ""
    return ""


def _related_steps(m: Mutant, base: _Steps, mine: _Steps, name: str, solver: z3.Solver,
                   rel: str) -> bool:
    """Action `name`'s steps are matched both ways (by the same kind of step, else any)."""
    if base.enc.relations[name].eq(mine.enc.relations[name]):
        return _respects(name, rel)  # then it matches itself in the mutant too
    return any(_matches(SAFE, base, mine, name, True, solver, k, rel)
               and _matches(SAFE, mine, base, name, False, solver, k, rel) for k in (False, True))


@functools.lru_cache(maxsize=None)
def _respects(name: str, rel: str = "dead state") -> bool:
    """An action of safe maps related states to related states (checked once per action)."""
    solver = _sim_solver(rel)
    assert solver is not None
    base = _safe_steps()
    return (_matches(SAFE, base, base, name, True, solver, rel=rel)
            and _matches(SAFE, base, base, name, False, solver, rel=rel))


# ---- equivalence up to a reordering ------------------------------------------------------------
# A mutant may take safe's steps in another order: S's commit timeout fires when D's reply is
# already in S's mailbox, and the mutant keeps the reply where safe drops it and asks D (the
# fence). No bisimulation matches that step for step (safe, having dropped the reply, waits for
# D's answer to the fence before its S can move; the mutant's S moves at once), but the two have
# the same executions up to that order. For an entry of REORDERINGS Z3 proves, on safe's
# invariant (`_reordered`):
# (A) the mutant reaches only states safe reaches. Let D be the states where the mutated
#     action's step is not one of safe's and f(s) its target there. By induction on safe's
#     executions, f(s) is reachable for every reachable s in D: at a step s -> s' into D from
#     outside, f(s') is safe's step of the mutated action from s followed by the same step
#     s -> s' (the action taken earlier: the timeout before the reply); at a step inside D,
#     f(s') is the same step from f(s). Every other step of the mutant is one of safe's.
# (B) every execution of safe is one of the mutant's up to the entry's twins: states equal but
#     for the entry's fields, related by its `twin` (safe waits for the answer the mutant
#     holds). From equal states the mutated action's steps lead to equal states or twins; from
#     twins every step of safe is the same action's step of the mutant, to equal states or
#     twins. Matched steps agree on every step property; twins on every safety property, every
#     liveness goal and every reachability goal of `check`.
# So the mutant reaches no state safe does not (it has every state property safe has, whatever
# the property), its own steps agree with safe's on every step property, and it loses nothing
# `check` looks for; its liveness is its own ranking proof (as for every bisimilar mutant).
# Its guards are safe's, so `decisive` holds on its states too.


@dataclass(frozen=True)
class Reordering:
    """Safe states and mutant states that are twins: equal but for `fields`, and `twin`."""

    name: str
    fields: tuple[str, ...]
    twin: Callable[[State, State], Val]  # (safe's state, the mutant's)


def _fence_answer(s: State) -> Val:
    """What D answers to the fence in state s (its own effect, not restated)."""
    return SAFE.action("d_fence").effect(s, SAFE).ack


REORDERINGS: tuple[Reordering, ...] = (
    # S's commit timeout fires although D's reply to the commit is already in S's mailbox: safe
    # drops it and asks D (the fence), the mutant keeps it. D answers the fence as it answered
    # the commit (committed: OK; refused, the migration fenced: FAIL), so safe waiting for that
    # answer is the mutant holding it; any reply D sends later overwrites both mailboxes alike.
    Reordering("a reply kept over the timeout", ("ack",), lambda x, y: and_(
        x.status == Mig.RUNNING, x.pc == Pc.RESOLVE, x.m_fence,
        x.ack == Ack.NONE, y.ack == _fence_answer(x))),
)


def _reordered(m: Mutant) -> str:
    """The first reordering under which Z3 proves (A) and (B) for the mutant ("": none)."""
    base, mine = encode(SAFE), encode(m.variant)
    if list(base.relations) != list(mine.relations):
        return ""
    changed = [n for n in base.relations if not base.relations[n].eq(mine.relations[n])]
    if len(changed) != 1 or not base.guards[changed[0]].eq(mine.guards[changed[0]]):
        return ""
    a = changed[0]
    fields = {f for f, x, y in zip(FIELDS, base.effects[a], mine.effects[a]) if not x.eq(y)}
    for r in REORDERINGS:
        if fields and fields <= set(r.fields) and _simulated_up_to(r, base, mine, a) \
                and _mutant_states_are_safes(base, mine, a):
            from llumverify.models.liveness import rank_proof
            return f"reordering: {r.name}" if rank_proof(m.variant).proved else ""
    return ""


def _simulated_up_to(r: Reordering, base: Encoding, mine: Encoding, a: str) -> bool:
    """(B): safe's steps are the mutant's from equal states and from twins (same action), to
    equal states or twins, keeping every property's value and every reachability goal."""
    from llumverify.models.check import reach_goals
    solver = z3.Solver()
    solver.add(*_base_invariant())

    def twins(x: State, y: State) -> z3.BoolRef:
        return z3.And(equal(x, y, r.fields), z3.And(r.twin(x, y)))

    def related(x: State, y: State) -> z3.BoolRef:
        return z3.Or(equal(x, y), twins(x, y))

    def valid(*premises: z3.ExprRef, goal: z3.ExprRef) -> bool:
        return solver.check(*premises, z3.Not(goal)) == z3.unsat

    # from equal states only the mutated action differs
    s2, t2 = _post(base.effects[a], PRE), _post(mine.effects[a], PRE)
    if not valid(base.guards[a], goal=z3.And(mine.guards[a], related(s2, t2),
                                            _steps_agree(PRE, s2, PRE, t2))):
        return False
    pair = twins(PRE, _T)
    if solver.check(pair) == z3.unsat:
        return False  # twins never exist: the entry is not about this mutant
    for name in base.relations:
        s2, t2 = _post(base.effects[name], PRE), _post(mine.effects[name], _T)
        if not valid(pair, _at(base.guards[name], PRE), goal=z3.And(
                _at(mine.guards[name], _T), related(s2, t2), _steps_agree(PRE, s2, _T, t2))):
            return False
    preds = [p.predicate for p in (*PROPERTIES.values(), *LIVENESS.values())]
    if not all(valid(pair, goal=z3.And(p(PRE)) == z3.And(p(_T))) for p in preds):
        return False
    goals_s, goals_m = reach_goals(SAFE), reach_goals(mine.variant)
    return set(goals_s) == set(goals_m) and all(
        valid(z3.Or(z3.And(equal(PRE, _T)), pair), z3.And(goals_s[g](PRE)),
              goal=z3.And(goals_m[g](_T))) for g in goals_s)


def _mutant_states_are_safes(base: Encoding, mine: Encoding, a: str) -> bool:
    """(A): where the mutant's step of `a` is not safe's (the set D), its target f(s) is
    reachable in safe whenever s is. By induction over safe's steps s -> s' into D: if s is in D,
    f(s') is the same action's step from f(s); if not, it is safe's step of `a` from s followed
    by the same action's step (the action taken earlier, the rest unchanged)."""
    def in_d(s: State) -> z3.BoolRef:
        return z3.And(_at(mine.guards[a], s), z3.Not(z3.And(
            _at(base.guards[a], s), equal(_post(mine.effects[a], s), _post(base.effects[a], s)))))

    solver = z3.Solver()
    if solver.check(base.init, in_d(PRE)) != z3.unsat:
        return False
    solver.add(*_base_invariant())
    fs = _post(mine.effects[a], PRE)  # f(s)
    after_a = _post(base.effects[a], PRE)  # safe's step of `a` from s
    for b in base.relations:
        s2 = _post(base.effects[b], PRE)
        target = _post(mine.effects[a], s2)  # f(s')
        stays = z3.And(_at(base.guards[b], fs), equal(_post(base.effects[b], fs), target))
        enters = z3.And(base.guards[a], _at(base.guards[b], after_a),
                        equal(_post(base.effects[b], after_a), target))
        for was_in_d, goal in ((True, stays), (False, enters)):
            d = in_d(PRE) if was_in_d else z3.Not(in_d(PRE))
            if solver.check(d, base.guards[b], in_d(s2), z3.Not(goal)) != z3.unsat:
                return False
    return True


def _safety_goal(un: Unroller, name: str) -> z3.BoolRef:
    p = PROPERTIES[name]
    g = z3.Not(z3.And(p.predicate(un.states[-1])))
    if p.step is not None and un.depth >= 1:
        g = z3.Or(g, z3.Not(z3.And(p.step(un.states[-2], un.states[-1]))))
    return g


def first_violations(v: Variant, names: tuple[str, ...], depth: int) -> dict[str, int]:
    """The shortest BMC depth at which any of the named safety properties is violated, with
    every one of them the found trace violates (empty: none within depth)."""
    un = Unroller(v)
    while True:
        got = un.find_any({n: _safety_goal(un, n) for n in names})
        if isinstance(got, tuple):
            return {n: un.depth for n in got[1]}
        if un.depth >= depth:
            return {}
        un.step()


def _lassos(v: Variant, names: tuple[str, ...]) -> dict[str, int]:
    found = lassos(explore(v), {n: LIVENESS[n] for n in names})
    return {n: len(lasso) for n, lasso in found.items() if lasso is not None}


@functools.lru_cache(maxsize=1)
def _compiled_checks() -> tuple[Callable[..., list[str]], Callable[..., list[str]]]:
    """Every safety property as one function of a tuple state (its state part) and one of two
    (its step part), each giving the names of the properties broken."""
    state, step = {}, {}
    for name, p in PROPERTIES.items():
        term = z3.simplify(z3.And(p.predicate(PRE)))
        if not z3.is_true(term):
            state[name] = term
        if p.step is not None:
            step[name] = z3.And(p.step(PRE, POST))
    return tuple_failures(state), tuple_failures(step, two_states=True)


def _safety_monitor(pre: tuple | None, post: tuple, new: bool) -> list[str]:  # type: ignore[type-arg]
    state, step = _compiled_checks()
    bad = state(post) if new else []
    if pre is not None:
        bad += [n for n in step(pre, post) if n not in bad]
    return bad


# The liveness bound plus a two-block request with room on D for two stages and a token left
# in its last block: stage arithmetic and decoding inside a block; and a shared prefix block.
MUTANT_BOUND: tuple[dict[str, int], ...] = (
    *BOUND, dict(blocks=2, src_free=0, dst_free=3, block_size=2, last_stage_blocks=0),
    # ... and one whose first block another request shares (vllm-v1's prefix cache): a release
    # that frees or keeps that block wrongly shows only where some block is shared
    dict(blocks=2, shared_blocks=1, src_free=0, dst_free=2, block_size=1, last_stage_blocks=1),
    # ... and one whose single (final) stage pulls a full block and the partly filled last one in
    # one pull: a pull that gets one of the two wrong (its updates in the wrong order) shows only here
    dict(blocks=2, src_free=0, dst_free=2, block_size=2, last_stage_blocks=2))


def explicit_kill(v: Variant) -> tuple[dict[str, int], StateGraph | None]:
    """On the explicit graph (MUTANT_BOUND): the shortest step sequence breaking a safety
    property, else a lasso against a liveness property (length per property found); the graph
    when it was explored to the end."""
    sg = explore(v, MUTANT_BOUND, monitor=_safety_monitor)
    if sg.violation is not None:
        length, names = sg.violation
        return {n: length for n in names}, None
    found = lassos(sg)
    return {n: len(lasso) for n, lasso in found.items() if lasso is not None}, sg


@functools.lru_cache(maxsize=1)
def _safe_coverage() -> frozenset[str]:
    from llumverify.models.check import reach_goals
    return frozenset(covered(explore(SAFE, MUTANT_BOUND), reach_goals(SAFE)))


# candidates that help prove a goal unreachable in a mutant (Houdini drops the wrong ones)
_VACUITY_LEMMAS: dict[str, Callable[[State], Val]] = {
    "vac_ack_not_ok": lambda s: s.ack != Ack.OK,
    "vac_no_copy_message": lambda s: not_(s.m_copy),
    "vac_no_commit_message": lambda s: not_(s.m_commit),
    "vac_no_fence_message": lambda s: not_(s.m_fence),
    "vac_uncommitted": lambda s: s.d_req == DReq.NONE,
    "vac_not_copying": lambda s: s.pc != Pc.COPY,
    "vac_stage_zero": lambda s: s.stage == 0,
    "vac_nonfinal_n_zero": lambda s: implies(not_(s.final), s.n == 0),
    "vac_nonfinal_nothing_copied": lambda s: implies(not_(s.final), s.copied == 0),
    "vac_s_alive": lambda s: s.s_alive,
    "vac_d_alive": lambda s: s.d_alive,
    "vac_slot_not_other": lambda s: s.d_slot != Slot.OTHER,
}


def vacuity_kill(m: Mutant, sg: StateGraph) -> dict[str, int]:
    """Goals of `check`'s vacuity test (models/check.reach_goals) that safe reaches within the
    bound, the mutant does not, and Houdini proves unreachable in the mutant for all sizes:
    `check` on the mutant would report them unreachable and fail."""
    from llumverify.models.check import reach_goals
    from llumverify.models.induction import candidates_for, houdini
    from llumverify.models.liveness import liveness_lemmas
    goals = reach_goals(m.variant)
    missing = sorted((_safe_coverage() & set(goals)) - covered(sg, goals))
    if not missing:
        return {}
    never = {f"never {n}": (lambda s, g=goals[n]: z3.Not(z3.And(g(s)))) for n in missing}
    safety = {n: p.predicate for n, p in PROPERTIES.items()}
    cands = {**candidates_for(m.variant, safety), **liveness_lemmas(m.variant),
             **_VACUITY_LEMMAS, **never}
    inv = set(houdini(m.variant, cands))
    return {f"vacuity:{n}": 0 for n in missing if f"never {n}" in inv}


def run_mutant(m: Mutant, depth: int) -> MutantResult:
    """Check one mutant (see the module docstring)."""
    if m.expect is not None:
        if m.expect in LIVENESS:
            return MutantResult(m, _lassos(m.variant, (m.expect,)))
        if m.expect.startswith("scope:"):
            return MutantResult(m, scope_kill(m.variant))
        if m.expect == "decisive":  # explored only up to the first state with two alternatives
            sg = explore(m.variant, MUTANT_BOUND, at_state=decisive_check(m.variant))
            return MutantResult(m, {} if sg.violation is None else dict.fromkeys(sg.violation[1], sg.violation[0]))
        return MutantResult(m, first_violations(m.variant, (m.expect,), depth))
    how = equivalent(m)
    if how:
        return MutantResult(m, {}, equivalent=how)
    found, sg = explicit_kill(m.variant)
    if not found:  # other sizes (block size, tokens, pools) within a few steps
        found = first_violations(m.variant, tuple(PROPERTIES), min(depth, GENERATED_BMC_DEPTH))
    if not found and sg is not None:
        found = decisive_kill(sg) or vacuity_kill(m, sg)
    return MutantResult(m, found)


def decisive_check(v: Variant) -> StateMonitor:
    """`decisive` at one explicit state, given the actions enabled in it: violated where two
    alternatives of one decision are (a death notice racing a reply already in does not count)."""
    pos = {n: i for i, n in enumerate(encode(v).relations)}
    pairs = [(pos[a], pos[b], DEATH_NOTICE in (a, b)) for a, b in decision_pairs(v)]
    ack = FIELDS.index("ack")

    def check(state: tuple[Any, ...], on: frozenset[int]) -> list[str]:
        return ["decisive"] if any(a in on and b in on and not (race and state[ack] != Ack.NONE)
                                   for a, b, race in pairs) else []
    return check


def decisive_kill(sg: StateGraph) -> dict[str, int]:
    """`decisive` on an explored graph: the depth of a shortest reachable state where two
    alternatives of one decision are enabled ({} if none)."""
    assert sg.violation is None, "decisive_kill needs the whole graph, not one a monitor cut short"
    check = decisive_check(sg.variant)
    depth = dict.fromkeys(sg.roots, 0)
    queue = deque(sg.roots)
    while queue:
        i = queue.popleft()
        if check(sg.states[i], sg.enabled[i]):
            return {"decisive": depth[i]}
        for _, w in sg.out[i]:
            if w not in depth:
                depth[w] = depth[i] + 1
                queue.append(w)
    return {}


def scope_kill(v: Variant) -> dict[str, int]:
    """The composition and stage-count obligations the variant fails, as `scope:<name>` (no trace: 0)."""
    return {f"scope:{o.name}": 0 for o in (*obligations(v), *stage_obligations(v)) if not o.holds}


def _run_named(name: str, depth: int) -> tuple[str, dict[str, int], str]:
    result = run_mutant(mutant(name), depth)
    return name, dict(result.violated), result.equivalent


def run(names: list[str], depth: int, workers: int = 2) -> list[MutantResult]:
    """The named mutants, spread over `workers` fresh processes (Z3 objects do not cross
    processes: workers receive names and return plain results)."""
    if workers <= 1:
        return [run_mutant(mutant(n), depth) for n in names]
    ctx = forkserver_context(["llumverify.models.mutants"])
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        done = {n: (viol, eq) for n, viol, eq in
                pool.map(_run_named, names, [depth] * len(names), chunksize=4)}
    return [MutantResult(mutant(n), done[n][0], done[n][1]) for n in names]


def run_all(depth: int, workers: int = 2, generated_too: bool = False) -> list[MutantResult]:
    """Every hand-written and named mutant (and, with generated_too, every generated one)."""
    names = list(MUTANTS) + ([m.name for m in generated()] if generated_too else [])
    return run(names, depth, workers)


# Generated mutants that are neither killed nor proved equivalent, each reviewed: a behaviour
# that no property of the handshake forbids, and why that is right (or outside the protocol).
# None today: the last two were `preempt/skip/preempted` (now killed by `preemption_seen`: S's
# abort check must see a preemption however soon the request is re-admitted) and
# `timeout_commit/skip/ack` (a commit reply kept over the timeout: now proved equivalent, a
# reordering of safe's executions, see REORDERINGS).
REVIEWED_SURVIVORS: Mapping[str, str] = {}


@dataclass(frozen=True)
class Census:
    generated: int
    killed: int
    equivalent: int
    survivors: tuple[str, ...]


def census(results: list[MutantResult]) -> Census:
    gen = [r for r in results if r.mutant.origin == "generated"]
    return Census(len(gen), sum(r.killed for r in gen), sum(bool(r.equivalent) for r in gen),
                  tuple(r.mutant.name for r in gen if r.survived))
