"""The safety properties, each defined once via the ops facade.

A property is a predicate over `State` that must hold in every reachable state, and optionally a
step predicate over a transition (pre, post) that must hold on every reachable step: the
history a state cannot show (a request that finished never runs again; what a commit may
commit). Z3 (models/), the Hypothesis machines (properties/machines.py) and the simulator's
audit all call these same functions: `violated(state)` checks the state predicates,
`violated(post, pre)` also the step predicates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Collection, Mapping

from llumverify.protocol import compiled
from llumverify.protocol.actions import full_blocks
from llumverify.protocol.ops import Val, add, and_, implies, ite, le, lt, not_, one_of, or_, sub
from llumverify.protocol.state import Ack, DReq, Mig, Pc, Req, Slot, State

if TYPE_CHECKING:
    from llumverify.protocol.variants import Variant

Predicate = Callable[[State], Val]
StepPredicate = Callable[[State, State], Val]


def live_on_s(s: State) -> Val:
    """S would run the request: in its running batch or its waiting queue, and S is up."""
    return and_(s.s_alive, one_of(s.req, (Req.RUNNING, Req.WAITING)))


def live_on_d(s: State) -> Val:
    return and_(s.d_alive, s.d_req == DReq.RUNNING)


def single_owner(s: State) -> Val:
    """Never live on both S and D (else it is decoded twice and its output duplicated)."""
    return not_(and_(live_on_s(s), live_on_d(s)))


def no_loss(s: State) -> Val:
    """While the side holding the request is alive, the request is live, paused in a stage that
    will still resolve (the migration runs), or finished. S holds it until it hands it over;
    after that, D does. Losing it takes a crash of its holder: S's, or D's once S sent the commit
    (S cannot tell whether D committed before dying, and running it again could run it twice:
    `unavoidable_loss` shows the two histories S cannot tell apart). A D that died before the
    commit was sent excuses nothing: S still has the request and must keep it."""
    finished = or_(s.req == Req.FINISHED, s.d_req == DReq.FINISHED)
    on_s = or_(not_(s.s_alive), one_of(s.req, (Req.RUNNING, Req.WAITING)),
               and_(s.req == Req.PAUSED, s.status == Mig.RUNNING))
    on_d = or_(and_(not_(s.d_alive), s.c_sent), s.d_req == DReq.RUNNING)
    return or_(finished, live_on_d(s), and_(s.req != Req.MIGRATED, on_s),
               and_(s.req == Req.MIGRATED, on_d))


def handover_after_commit(s: State) -> Val:
    """S drops its copy of the request (hands it over) only after it sent the commit: never on a
    failure, a timeout or D's death before that (history: `c_sent`)."""
    return implies(s.req == Req.MIGRATED, s.c_sent)


def block_accounting(s: State) -> Val:
    """On each side free + used + reserved = capacity, and no pool goes negative."""
    pools = (s.s_free, s.s_other, s.s_blocks, s.d_free, s.d_other, s.d_res, s.d_blocks)
    return and_(
        add(s.s_free, s.s_other, s.s_blocks) == s.s_cap,
        add(s.d_free, s.d_other, s.d_res, s.d_blocks) == s.d_cap,
        *(le(0, p) for p in pools),
    )


def migration_over(s: State) -> Val:
    """Nothing will touch D's reservation on S's behalf any more: S ended or died, and no
    message that could reserve or free is in flight."""
    return and_(or_(s.status != Mig.RUNNING, not_(s.s_alive)), not_(s.m_alloc), not_(s.m_free),
                not_(s.m_commit), not_(s.m_fence))


def no_leak(s: State) -> Val:
    """Once the migration is over and no lease is pending, D holds no reservation for it; and D
    holds blocks for the request only while it runs there."""
    return and_(implies(and_(s.d_alive, migration_over(s), not_(s.lease)), s.d_res == 0),
                implies(le(1, s.d_blocks), s.d_req == DReq.RUNNING))


def no_source_leak(s: State) -> Val:
    """S holds blocks for the request only while it runs there or is paused for the final stage
    (finishing, preemption and hand-over free them)."""
    return implies(le(1, s.s_blocks), one_of(s.req, (Req.RUNNING, Req.PAUSED)))


def commit_after_copy(s: State) -> Val:
    """D only runs the request once every block of its KV was copied."""
    return implies(s.d_req != DReq.NONE, s.copied == s.d_nblk)


def committed_kv_owned(s: State) -> Val:
    """The request D runs owns exactly its KV's blocks (the reservation was still there)."""
    return implies(s.d_req == DReq.RUNNING, s.d_blocks == s.d_nblk)


def copy_into_reserved(s: State) -> Val:
    """While D still accepts the migration, what was copied fits in D's reservation: D never
    writes KV into blocks it has given back (another request may own them)."""
    active = and_(s.d_alive, s.status == Mig.RUNNING, s.d_req == DReq.NONE, not_(s.fenced))
    return implies(active, le(s.copied, s.d_res))


def copy_into_reserved_step(pre: State, post: State) -> Val:
    """A pull writes only into a reservation D still holds for the uncommitted migration (not
    fenced: a fenced reservation was given back), and the copy fits in it."""
    pull = lt(pre.copied, post.copied)
    return implies(pull, and_(not_(pre.fenced), pre.d_req == DReq.NONE,
                              le(post.copied, pre.d_res)))


def kv_intact(s: State) -> Val:
    """The KV D runs is S's at the pause, block for block: every block full on S at the pause was
    pulled whole, from the right offset of blocks S held for the request, and the partly filled
    last block (if any) was pulled after the pause, with exactly the tokens it had then. A count
    of blocks is not enough: a block pulled early and filled later on S, or pulled from the wrong
    offset or from blocks S had freed, has the right count and the wrong tokens."""
    p_full = full_blocks(s.p_nblk, s.p_tok, s.bs)
    p_tail = ite(s.p_tok == sub(s.bs, 1), 0, add(s.p_tok, 1))
    return implies(s.d_req != DReq.NONE, and_(s.d_full == p_full, s.d_tail == p_tail))


def abort_honoured(s: State) -> Val:
    """A request its client aborted while paused (before S sent the commit) is never committed on
    D and never resumed on S."""
    return implies(s.aborted, and_(s.d_req == DReq.NONE, not_(one_of(s.req, (Req.RUNNING, Req.WAITING)))))


def token_continuity(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def token_continuity_step(pre: State, post: State) -> Val:
    """While S has the request (running, paused, or waiting to be recomputed) its KV never loses
    a token: its length, in blocks and then tokens of the last block, never goes down (a
    recompute after a preemption restores every token)."""
    held = one_of(pre.req, (Req.RUNNING, Req.PAUSED, Req.WAITING))
    longer = or_(lt(pre.nblk, post.nblk), and_(pre.nblk == post.nblk, le(pre.tok, post.tok)))
    return implies(and_(held, one_of(post.req, (Req.RUNNING, Req.PAUSED, Req.WAITING))), longer)


def shared_blocks_kept(s: State) -> Val:
    """The request shares only blocks it holds (a block other requests reference counts once),
    and never fewer than none (a reference count that goes negative frees a block twice)."""
    return and_(le(0, s.s_shared), le(s.s_shared, s.s_blocks))


def shared_blocks_kept_step(pre: State, post: State) -> Val:
    """When S releases the request's blocks (finish, preemption, hand-over), only its private
    blocks return to S's free pool: those other requests share stay in use, theirs (a block
    freed while another request still reads it would be reused under that request)."""
    release = and_(pre.s_alive, le(1, pre.s_blocks), post.s_blocks == 0)
    return implies(release, post.s_free == add(pre.s_free, sub(pre.s_blocks, pre.s_shared)))


def dst_blocks_freed(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def dst_blocks_freed_step(pre: State, post: State) -> Val:
    """What D releases of this migration (its reservation, or the committed request's blocks once
    it finishes) goes back to D's free pool, all of it (the destination's twin of
    shared_blocks_kept: block_accounting and no_leak count blocks and owners, and neither sees
    blocks released into the pool other requests use, a leak that lasts as long as D runs)."""
    held, held_after = add(pre.d_res, pre.d_blocks), add(post.d_res, post.d_blocks)
    return implies(lt(held_after, held), post.d_free == add(pre.d_free, sub(held, held_after)))


def blocks_from_free(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def blocks_from_free_step(pre: State, post: State) -> Val:
    """What the request takes on S (the block a new token starts, a re-admission's blocks) and what
    D reserves for the migration come out of that side's free pool, exactly that many (the twin of
    shared_blocks_kept and dst_blocks_freed for taking: block_accounting only counts, so a block
    taken from the ones other requests hold, two owners, or one taken more than recorded, a leak,
    would pass it)."""
    held, held_after = add(pre.d_res, pre.d_blocks), add(post.d_res, post.d_blocks)
    return and_(
        implies(lt(pre.s_blocks, post.s_blocks),
                post.s_free == sub(pre.s_free, sub(post.s_blocks, pre.s_blocks))),
        implies(lt(held, held_after), post.d_free == sub(pre.d_free, sub(held_after, held))))


def final_copy_from_held(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def final_copy_from_held_step(pre: State, post: State) -> Val:
    """The final stage's pull, while the migration goes on (not aborted: an aborted migration's
    copy is discarded), copies blocks S still holds for the request: S has neither freed them
    nor handed the request over, so no other request can have taken and overwritten them while
    D reads them."""
    pull = and_(pre.final, lt(pre.copied, post.copied), one_of(pre.status, (Mig.RUNNING, Mig.FINISHED)))
    return implies(pull, and_(one_of(pre.req, (Req.RUNNING, Req.PAUSED)), le(post.copied, pre.s_blocks)))


def no_pending_pull(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def no_pending_pull_step(pre: State, post: State) -> Val:
    """A pull, while the migration goes on (not aborted: an aborted migration's copy is
    discarded), copies KV that is complete on S: no forward pass that writes it (the request's
    prefill) is still running, else D gets blocks half written, and no later check on S can
    tell."""
    pull = and_(lt(pre.copied, post.copied), one_of(pre.status, (Mig.RUNNING, Mig.FINISHED)))
    return implies(pull, not_(pre.kv_pending))


def no_decode_after_pause(s: State) -> Val:
    """After the final-stage pause S does not decode the request (its KV is being copied)."""
    return implies(and_(s.final, one_of(s.req, (Req.PAUSED, Req.MIGRATED))),
                   and_(s.nblk == s.p_nblk, s.tok == s.p_tok))


def slot_discipline(s: State) -> Val:
    """D takes part in at most one migration: a reservation exists only under our slot."""
    return implies(le(1, s.d_res), s.d_slot == Slot.OURS)


def slot_released(s: State) -> Val:
    """When the migration is over and no lease is pending, D's slot is no longer ours (else D
    can never take part in another migration)."""
    return implies(and_(s.d_alive, migration_over(s), not_(s.lease)), s.d_slot != Slot.OURS)


def no_stale_kv(s: State) -> Val:
    """D never runs a request that S preempted during the migration: its copied blocks were
    freed (and maybe reused) on S, so the copy is stale."""
    return implies(live_on_d(s), not_(s.preempted))


# ---- KV integrity, at-most-once execution, what a commit may commit --------------------------

RUNNABLE_ON_S = (Req.RUNNING, Req.PAUSED)  # in S's batch, or paused with its KV (resumable)


def kv_integrity(s: State) -> Val:
    """Wherever the request can run (on S: running, resumed, or paused with its KV for the copy;
    on D: committed), that instance holds exactly the blocks its tokens need (a request of
    nblk blocks and tok < bs tokens in the last one needs nblk blocks) and nobody else owns
    them: the instance's pools are disjoint and add up to its capacity (no block of the request
    is also free or another request's), and on D no lease is pending over them (the lease
    watcher would free them under the running request)."""
    s_pools = and_(add(s.s_free, s.s_other, s.s_blocks) == s.s_cap, le(0, s.s_free), le(0, s.s_other))
    d_pools = and_(add(s.d_free, s.d_other, s.d_res, s.d_blocks) == s.d_cap,
                   le(0, s.d_free), le(0, s.d_other), le(0, s.d_res))
    on_s = and_(s.s_alive, one_of(s.req, RUNNABLE_ON_S))
    return and_(implies(on_s, and_(le(1, s.nblk), s.s_blocks == s.nblk, s_pools)),
                implies(live_on_d(s), and_(le(1, s.d_nblk), s.d_blocks == s.d_nblk, d_pools,
                                           not_(s.lease))))


def at_most_once(s: State) -> Val:
    """Once D committed the request (whether D still lives or not) S never runs it again: S's
    copy stays paused or handed over (never running, waiting or finished on S), and D went on
    from exactly the token where S stopped: D's KV is S's at the final pause (d_nblk = p_nblk)
    and S decoded nothing since ((nblk, tok) = (p_nblk, p_tok))."""
    return implies(s.d_req != DReq.NONE, and_(
        one_of(s.req, (Req.PAUSED, Req.MIGRATED)), s.final,
        s.d_nblk == s.p_nblk, s.nblk == s.p_nblk, s.tok == s.p_tok))


def at_most_once_step(pre: State, post: State) -> Val:
    """A request that finished (a client abort is a finish: same transition, same state) or
    that S handed over never runs again: FINISHED and MIGRATED on S and FINISHED on D are final,
    and a commit on D is never undone."""
    return and_(
        implies(one_of(pre.req, (Req.FINISHED, Req.MIGRATED)), post.req == pre.req),
        implies(pre.d_req == DReq.FINISHED, post.d_req == DReq.FINISHED),
        implies(pre.d_req != DReq.NONE, post.d_req != DReq.NONE),
    )


def commit_integrity(s: State) -> Val:
    """Nothing is committed that finished, was aborted or was preempted meanwhile: a request D
    committed was never preempted during the migration, its migration was not given up by S
    (ABORTED_SRC never; ABORTED_DST only because D died after committing), and it never
    finished on S."""
    committed = s.d_req != DReq.NONE
    return implies(committed, and_(
        not_(s.preempted), s.status != Mig.ABORTED_SRC, s.req != Req.FINISHED,
        implies(s.status == Mig.ABORTED_DST, not_(s.d_alive))))


def commit_integrity_step(pre: State, post: State) -> Val:
    """The commit itself (D's request goes from none to running) takes a request that S paused
    for the final stage (or has handed over) and still holds: not finished, resumed or
    preempted, in a migration S has not aborted."""
    commit = and_(pre.d_req == DReq.NONE, post.d_req != DReq.NONE)
    return implies(commit, and_(
        one_of(pre.req, (Req.PAUSED, Req.MIGRATED)), pre.final, not_(pre.preempted),
        one_of(pre.status, (Mig.RUNNING, Mig.FINISHED))))


# what belongs to each instance (the messages between them belong to neither)
S_FIELDS = ("req", "preempted", "late_preempt", "nblk", "tok", "s_blocks", "s_shared", "s_free", "s_other",
            "s_alive", "kv_pending", "status", "pc", "stage", "final", "n", "p_nblk", "p_tok", "c_sent", "aborted")
D_FIELDS = ("d_req", "d_nblk", "d_blocks", "d_full", "d_tail", "d_res", "d_free", "d_other", "d_alive",
            "d_slot", "lease", "fenced", "d_recv", "copied")


def crash_stop(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def crash_stop_step(pre: State, post: State) -> Val:
    """A crashed instance never acts again: nothing of a dead S (its request, pools,
    coordinator; D cannot pull from it either) or of a dead D (its request, pools, reservation,
    slot, lease, posted receive, pulled blocks) changes, whatever the other side does."""
    return and_(
        implies(not_(pre.s_alive), and_(*(getattr(post, f) == getattr(pre, f) for f in S_FIELDS),
                                        post.copied == pre.copied)),  # nothing to pull from
        implies(not_(pre.d_alive), and_(*(getattr(post, f) == getattr(pre, f) for f in D_FIELDS))),
    )


MESSAGES = ("m_alloc", "m_copy", "m_commit", "m_free", "m_fence")


def channel_discipline(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def channel_discipline_step(pre: State, post: State) -> Val:
    """Messages and replies move only as the two sides send and answer them: only a live S
    sends, only a live D takes a message off the channel, and a reply (OK or FAIL) appears only
    as D's answer to a message it takes in the same step (D never answers what S did not ask)."""
    sent = or_(*(and_(not_(getattr(pre, m)), getattr(post, m)) for m in MESSAGES))
    taken = or_(*(and_(getattr(pre, m), not_(getattr(post, m))) for m in MESSAGES))
    replied = and_(post.ack != pre.ack, post.ack != Ack.NONE)
    return and_(implies(sent, pre.s_alive), implies(taken, pre.d_alive),
                implies(replied, and_(taken, pre.d_alive)))


def truthful_outcome(s: State) -> Val:
    """S reports a migration committed (FINISHED) only when it was: D committed the request and
    S handed its copy over. (The scheduler and the metrics act on that report.)"""
    return implies(s.status == Mig.FINISHED, and_(s.req == Req.MIGRATED, s.d_req != DReq.NONE))


def abort_releases(s: State) -> Val:
    """When S ends a migration without handing the request over, while both are alive, what D
    still holds for it (reserved blocks, the migration slot) is being released: S's free is on
    its way. The lease is the backstop for a crashed S, not the way a live S cleans up."""
    holds = or_(le(1, s.d_res), s.d_slot == Slot.OURS)
    aborted = one_of(s.status, (Mig.ABORTED_SRC, Mig.ABORTED_DST))
    return implies(and_(s.s_alive, s.d_alive, aborted, holds), s.m_free)


def lease_discipline(s: State) -> Val:
    """D's lease watcher keeps a record only for a reservation D still holds for an uncommitted
    migration under its slot: a stale record would later free blocks that now belong to the
    committed request or to others."""
    return implies(s.lease, and_(s.d_slot == Slot.OURS, s.d_req == DReq.NONE))


def token_growth(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def token_growth_step(pre: State, post: State) -> Val:
    """While S runs the request its KV grows one token at a time, and S takes a new block only
    for the token that overflows a full last block (which then holds just that token)."""
    same_block = and_(post.nblk == pre.nblk, or_(post.tok == pre.tok, post.tok == add(pre.tok, 1)))
    new_block = and_(post.nblk == add(pre.nblk, 1), add(pre.tok, 1) == pre.bs, post.tok == 0)
    return implies(and_(pre.req == Req.RUNNING, post.req == Req.RUNNING), or_(same_block, new_block))


def fence_on_cause(s: State) -> Val:
    """(A step property: every state satisfies it.)"""
    return True


def fence_on_cause_step(pre: State, post: State) -> Val:
    """D disowns (fences) a migration only for a reason: while it handles one of the
    migration's messages, when the lease on its reservation expires, or (v0.1.0) when the
    manager clears up after a dead S; never on its own, which would abort a healthy migration."""
    handled = or_(*(and_(getattr(pre, m), not_(getattr(post, m))) for m in MESSAGES))
    expired = and_(pre.lease, not_(post.lease))
    return implies(and_(not_(pre.fenced), post.fenced), or_(handled, expired, not_(pre.s_alive)))


def preemption_seen(s: State) -> Val:
    """S's abort check sees every preemption of the request during the migration, however soon
    the request is re-admitted: a recompute preemption frees its KV on S while D may be pulling
    it (the freed blocks may be reused at once), and the re-admitted request is recomputed into
    new blocks, so what D copied before is stale and the migration must not go on (Llumnix keeps
    the request's last preemption time and compares it with the migration's start; `preempted`
    is that record). Once S has asked D for a stage, a request back in S's waiting queue is
    recorded as preempted (a migration may also start from a waiting request, before any
    stage)."""
    asked = and_(s.s_alive, s.status == Mig.RUNNING, or_(s.pc != Pc.STAGE, lt(0, s.stage)))
    return implies(and_(asked, s.req == Req.WAITING), s.preempted)


def preemption_seen_step(pre: State, post: State) -> Val:
    """The record of a preemption is kept: no step (re-admission included) erases it."""
    return implies(pre.preempted, post.preempted)


# ---- decisions: each process decides, the world and failures choose -----------------------

# S's coordinator is one sequential program; D answers each call with a yes or a no. Within a
# group at most one action may be enabled in any reachable state. Three choices are left to the
# world: a transfer error (`d_copy_fail` beside `d_copy`: a failure), a failure inside D's commit
# handler (`d_commit_fail` beside `d_commit`, HEAD's A3') and Ray's notice that D died racing a
# reply that already arrived (`s_d_dead` beside a reply handler).
DECISION_GROUPS: Mapping[str, tuple[str, ...] | None] = {
    "S": None,  # every action of kind S
    "D on a pre-allocation": ("d_alloc_ok", "d_alloc_refuse"),
    "D on a commit": ("d_commit", "d_commit_refuse"),
}
DEATH_NOTICE = "s_d_dead"


def decision_pairs(v: "Variant") -> list[tuple[str, str]]:
    """The pairs of one group's actions the variant has (each pair once, in action order)."""
    names = [a.name for a in v.actions]
    out = []
    for members in DECISION_GROUPS.values():
        group = [a.name for a in v.actions if a.kind == "S"] if members is None else \
            [n for n in names if n in members]
        out += [(a, b) for i, a in enumerate(group) for b in group[i + 1:]]
    return out


def decisive(s: State, v: "Variant", enabled: Collection[str] | None = None) -> Val:
    """S's coordinator and D's answer to a call each decide: no two of their alternatives are
    enabled at once (a stage is final or not, a check aborts or lets the stage go on, a call is
    granted or refused), except that D's death may be noticed while a reply already waits. An
    overlap is a decision left to chance: a final stage begun early, a stage begun for a gone
    request, a migration given up for no reason, a call refused that D would grant.
    `enabled`: the actions whose guard holds in s, where the caller has them (a concrete run):
    the guards are most of the cost."""
    pairs = decision_pairs(v)
    guard = {n: v.action(n).guard(s, v) if enabled is None else n in enabled for pair in pairs for n in pair}
    clauses = []
    for a, b in pairs:
        both = and_(guard[a], guard[b])
        if DEATH_NOTICE in (a, b):
            both = and_(both, s.ack == Ack.NONE)
        clauses.append(not_(both))
    return and_(*clauses)


@dataclass(frozen=True)
class Property:
    """`predicate` must hold in every reachable state; `step`, if any, on every reachable step."""

    name: str
    predicate: Predicate
    doc: str
    step: StepPredicate | None = None


def _doc(f: Callable[..., Val]) -> str:
    return " ".join((f.__doc__ or "").split())


def _prop(f: Predicate, step: StepPredicate | None = None) -> Property:
    doc = _doc(f) + (" Step: " + _doc(step) if step is not None else "")
    return Property(f.__name__, f, doc, step)


PROPERTIES: Mapping[str, Property] = {
    p.name: p for p in (*map(_prop, (
        single_owner, no_loss, handover_after_commit, no_leak, no_source_leak, block_accounting,
        commit_after_copy, committed_kv_owned, kv_intact)),
        _prop(copy_into_reserved, copy_into_reserved_step),
        Property("final_copy_from_held", final_copy_from_held, _doc(final_copy_from_held_step),
                 final_copy_from_held_step),
        Property("no_pending_pull", no_pending_pull, _doc(no_pending_pull_step), no_pending_pull_step),
        *map(_prop, (no_decode_after_pause, slot_discipline, slot_released, no_stale_kv,
                     kv_integrity)),
        _prop(at_most_once, at_most_once_step),
        _prop(commit_integrity, commit_integrity_step),
        Property("crash_stop", crash_stop, _doc(crash_stop_step), crash_stop_step),
        Property("channel_discipline", channel_discipline, _doc(channel_discipline_step),
                 channel_discipline_step),
        *map(_prop, (truthful_outcome, abort_releases, lease_discipline)),
        Property("token_growth", token_growth, _doc(token_growth_step), token_growth_step),
        _prop(abort_honoured),
        Property("token_continuity", token_continuity, _doc(token_continuity_step),
                 token_continuity_step),
        _prop(shared_blocks_kept, shared_blocks_kept_step),
        Property("dst_blocks_freed", dst_blocks_freed, _doc(dst_blocks_freed_step), dst_blocks_freed_step),
        Property("blocks_from_free", blocks_from_free, _doc(blocks_from_free_step), blocks_from_free_step),
        Property("fence_on_cause", fence_on_cause, _doc(fence_on_cause_step), fence_on_cause_step),
        _prop(preemption_seen, preemption_seen_step),
    )
}


def violated(s: State, pre: State | None = None) -> list[str]:
    """Names of the properties a concrete state breaks (for the simulator's audit); given the
    state before the step, also those whose step predicate the step (pre -> s) breaks. The state
    predicates run compiled (llumverify/protocol/compiled.py), first all at once (the usual
    answer: none), the step ones as written."""
    if pre is None and _all_hold()(s):
        return []
    return [name for name, p in PROPERTIES.items()
            if not _compiled_predicate(name)(s)
            or (pre is not None and p.step is not None and not p.step(pre, s))]


@functools.cache
def _compiled_predicate(name: str) -> Callable[[State], bool]:
    return compiled.predicate(PROPERTIES[name].predicate)


@functools.cache
def _all_hold() -> Callable[[State], bool]:
    return compiled.predicate(lambda s: and_(*(p.predicate(s) for p in PROPERTIES.values())))
