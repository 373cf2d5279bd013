"""Candidate auxiliary invariants for the unbounded proof (models/induction.py prunes them).

These are facts about reachable states that make the safety properties inductive: which
messages can be in flight at each point of S's coordinator, how reservation, copy and request
sizes relate. They are candidates, not assumptions: Houdini drops every one that is not
preserved by some action of the variant at hand, so a wrong or variant-specific lemma costs
proof strength, never soundness.
"""

from __future__ import annotations

from typing import Callable

from llumverify.protocol.ops import Val, add, and_, implies, ite, le, lt, not_, one_of, or_, sub
from llumverify.protocol.state import (
    COUNT_FIELDS, ENUM_FIELDS, Ack, DReq, Mig, Pc, Req, Slot, State,
)

Lemma = Callable[[State], Val]


def _running(s: State, *pcs: Pc) -> Val:
    return and_(s.status == Mig.RUNNING, one_of(s.pc, pcs))


def _accepting(s: State) -> Val:
    """D still holds this migration's reservation on S's behalf."""
    return and_(s.status == Mig.RUNNING, not_(s.fenced), s.d_req == DReq.NONE)


def domain_lemmas() -> dict[str, Lemma]:
    """well_formed, split so that Houdini can keep the parts that hold."""
    out: dict[str, Lemma] = {
        f"range_{f}": (lambda s, f=f, e=e: one_of(getattr(s, f), [int(x) for x in e]))
        for f, e in ENUM_FIELDS.items()
    }
    out |= {f"nonneg_{f}": (lambda s, f=f: le(0, getattr(s, f))) for f in COUNT_FIELDS}
    out["bs_positive"] = lambda s: le(1, s.bs)
    out["tok_below_bs"] = lambda s: lt(s.tok, s.bs)
    out["nblk_positive"] = lambda s: le(1, s.nblk)
    return out


PROTOCOL_LEMMAS: dict[str, Lemma] = {
    # where S holds what
    "s_blocks_match": lambda s: s.s_blocks == ite(
        one_of(s.req, (Req.RUNNING, Req.PAUSED)), s.nblk, 0),
    "final_pull_from_held": lambda s: implies(
        and_(s.final, s.m_copy, one_of(s.status, (Mig.RUNNING, Mig.FINISHED))),
        and_(one_of(s.req, (Req.RUNNING, Req.PAUSED)), le(add(s.copied, s.n), s.s_blocks))),
    "paused_only_running": lambda s: implies(s.req == Req.PAUSED, and_(s.status == Mig.RUNNING, s.final)),
    "migrated_committed": lambda s: implies(s.req == Req.MIGRATED, s.d_req != DReq.NONE),
    "finished_migration_migrated": lambda s: implies(s.status == Mig.FINISHED, s.req == Req.MIGRATED),
    "live_s_not_committed": lambda s: implies(
        and_(one_of(s.req, (Req.RUNNING, Req.WAITING, Req.FINISHED)), s.d_alive), s.d_req == DReq.NONE),
    "live_s_commit_fenced": lambda s: implies(
        and_(one_of(s.req, (Req.RUNNING, Req.WAITING, Req.FINISHED)), s.d_alive, s.m_commit), s.fenced),
    "committed_while_committing": lambda s: implies(s.d_req != DReq.NONE, or_(
        _running(s, Pc.COMMIT, Pc.RESOLVE), s.req == Req.MIGRATED,
        and_(not_(s.d_alive), s.status == Mig.ABORTED_DST, s.final))),
    "committed_while_committing_or_resumed": lambda s: implies(s.d_req != DReq.NONE, or_(
        _running(s, Pc.COMMIT, Pc.RESOLVE), s.req == Req.MIGRATED,
        and_(s.status == Mig.ABORTED_DST, s.final))),
    "committed_after_commit_sent": lambda s: implies(s.d_req != DReq.NONE, and_(
        s.final, one_of(s.pc, (Pc.COMMIT, Pc.RESOLVE, Pc.DONE)))),
    "done_iff_ended": lambda s: (s.pc == Pc.DONE) == (s.status != Mig.RUNNING),
    "commit_in_flight_origin": lambda s: implies(s.m_commit, or_(
        _running(s, Pc.COMMIT, Pc.RESOLVE), s.status == Mig.ABORTED_DST, s.fenced,
        not_(s.d_alive))),
    "commit_in_flight_reserved": lambda s: implies(
        and_(s.m_commit, not_(s.fenced), s.d_alive), s.d_res == s.p_nblk),
    "commit_alone": lambda s: implies(s.m_commit, and_(
        not_(s.m_alloc), not_(s.m_copy), or_(not_(s.m_free), s.fenced, not_(s.d_alive)))),
    "commit_message_final": lambda s: implies(s.m_commit, and_(s.final, s.d_req == DReq.NONE)),
    "free_only_after_end": lambda s: implies(s.m_free, s.status != Mig.RUNNING),
    "final_paused": lambda s: implies(and_(s.final, s.status == Mig.RUNNING), s.req == Req.PAUSED),
    "fenced_uncommitted": lambda s: implies(s.fenced, s.d_req == DReq.NONE),
    # messages against S's coordinator
    "stage_quiet": lambda s: implies(_running(s, Pc.STAGE), and_(
        s.ack == Ack.NONE, not_(s.m_alloc), not_(s.m_copy), not_(s.m_commit), not_(s.m_fence),
        not_(s.final))),
    "alloc_pending": lambda s: implies(and_(s.m_alloc, s.status == Mig.RUNNING),
                                       and_(s.pc == Pc.ALLOC, s.ack == Ack.NONE)),
    "alloc_quiet": lambda s: implies(_running(s, Pc.ALLOC), and_(
        not_(s.m_copy), not_(s.m_commit), not_(s.m_fence))),
    "copy_pending": lambda s: implies(and_(s.m_copy, s.status == Mig.RUNNING),
                                      and_(s.pc == Pc.COPY, s.ack == Ack.NONE)),
    "copy_quiet": lambda s: implies(_running(s, Pc.COPY), and_(
        not_(s.m_alloc), not_(s.m_commit), not_(s.m_fence))),
    "commit_quiet": lambda s: implies(_running(s, Pc.COMMIT, Pc.RESOLVE), and_(
        not_(s.m_alloc), not_(s.m_copy), s.final, s.req == Req.PAUSED)),
    "commit_only_from_commit": lambda s: implies(s.m_commit, and_(s.final, s.d_req == DReq.NONE, or_(
        _running(s, Pc.COMMIT, Pc.RESOLVE), s.fenced, not_(s.d_alive)))),
    "commit_wait_no_fence": lambda s: implies(_running(s, Pc.COMMIT), not_(s.m_fence)),
    "fence_only_resolving": lambda s: implies(s.m_fence, or_(_running(s, Pc.RESOLVE), s.fenced,
                                                            s.d_req != DReq.NONE, not_(s.d_alive))),
    "commit_ok_means_committed": lambda s: implies(
        and_(_running(s, Pc.COMMIT, Pc.RESOLVE), s.ack == Ack.OK), s.d_req != DReq.NONE),
    "commit_fail_means_fenced": lambda s: implies(
        and_(_running(s, Pc.COMMIT, Pc.RESOLVE), s.ack == Ack.FAIL), s.fenced),
    "committed_no_copy": lambda s: implies(s.d_req != DReq.NONE, not_(s.m_copy)),
    "commit_no_copy": lambda s: implies(s.m_commit, not_(s.m_copy)),
    # sizes: what is reserved, copied and still to copy
    "copied_le_nblk": lambda s: le(s.copied, s.nblk),
    "stage_leaves_last_block": lambda s: implies(_running(s, Pc.STAGE), lt(s.copied, s.nblk)),
    "nonfinal_pending_fits": lambda s: implies(
        and_(_running(s, Pc.ALLOC, Pc.COPY), not_(s.final), or_(s.pc == Pc.ALLOC, s.m_copy)),
        lt(add(s.copied, s.n), s.nblk)),
    "nonfinal_copied_fits": lambda s: implies(and_(_running(s, Pc.COPY), not_(s.final)),
                                              lt(s.copied, s.nblk)),
    "pending_copy_fits": lambda s: implies(s.m_copy, le(add(s.copied, s.n), s.nblk)),
    "final_pending_complete": lambda s: implies(
        and_(_running(s, Pc.ALLOC, Pc.COPY), s.final, or_(s.pc == Pc.ALLOC, s.m_copy)),
        add(s.copied, s.n) == s.p_nblk),
    "final_copied_complete": lambda s: implies(
        and_(s.final, or_(_running(s, Pc.COMMIT, Pc.RESOLVE),
                          and_(_running(s, Pc.COPY), s.ack == Ack.OK), s.m_commit)),
        s.copied == s.p_nblk),
    "reserved_is_copied": lambda s: implies(
        and_(_accepting(s), s.d_alive, or_(_running(s, Pc.STAGE, Pc.COMMIT, Pc.RESOLVE),
                                           and_(s.pc == Pc.ALLOC, s.ack != Ack.OK),
                                           and_(s.pc == Pc.COPY, s.ack == Ack.OK))),
        s.d_res == s.copied),
    "reserved_is_copied_plus_pending": lambda s: implies(
        and_(_accepting(s), s.d_alive, or_(and_(s.pc == Pc.ALLOC, s.ack == Ack.OK),
                                           and_(s.pc == Pc.COPY, s.ack != Ack.OK))),
        s.d_res == add(s.copied, s.n)),
    "paused_frozen": lambda s: implies(s.req == Req.PAUSED, and_(s.nblk == s.p_nblk, s.tok == s.p_tok)),
    "reservation_leased": lambda s: implies(le(1, s.d_res), s.lease),
    "copy_pending_uncommitted": lambda s: implies(s.m_copy, s.d_req == DReq.NONE),
    "committed_once_done": lambda s: implies(s.d_req != DReq.NONE, and_(
        s.final, not_(s.m_copy), not_(s.m_alloc), s.pc == Pc.DONE)),
    "handed_over_copy_final": lambda s: implies(and_(s.m_copy, s.status == Mig.FINISHED),
                                                and_(s.final, s.req == Req.MIGRATED)),
    "copy_alone": lambda s: implies(s.m_copy, and_(not_(s.m_alloc), not_(s.m_commit),
                                                  s.status != Mig.ABORTED_SRC)),
    "copy_in_flight_origin": lambda s: implies(s.m_copy, or_(
        _running(s, Pc.COPY), s.status == Mig.ABORTED_DST,
        and_(s.status == Mig.FINISHED, s.final))),
    "final_copy_after_handover": lambda s: implies(and_(s.final, s.m_copy),
                                                   s.status == Mig.FINISHED),
    "slot_has_lease": lambda s: implies(s.d_slot == Slot.OURS, s.lease),
    "final_not_preempted": lambda s: implies(and_(s.final, s.status == Mig.RUNNING),
                                             not_(s.preempted)),
    "committed_not_preempted": lambda s: implies(and_(s.d_req != DReq.NONE, s.d_alive),
                                                 not_(s.preempted)),
    "lease_has_slot": lambda s: implies(s.lease, s.d_slot == Slot.OURS),
    "uncommitted_nothing_owned": lambda s: implies(s.d_req != DReq.RUNNING, s.d_blocks == 0),
    # HEAD's failed commit (`d_commit_fail`) leaves blocks under no request, but fences the
    # migration: no commit can take a reservation on top of them
    "unfenced_nothing_owned": lambda s: implies(and_(s.d_req != DReq.RUNNING, not_(s.fenced)),
                                                s.d_blocks == 0),
    "nothing_committed_nblk0": lambda s: implies(s.d_req == DReq.NONE, s.d_nblk == 0),
    # after the commit: no pre-allocation can follow it, so no lease is ever taken again, and S
    # hands its copy over (or drops it when D died with the commit outcome unknown)
    "committed_no_alloc": lambda s: implies(s.d_req != DReq.NONE, not_(s.m_alloc)),
    "paused_size_positive": lambda s: implies(s.final, le(1, s.p_nblk)),
    "committed_size_positive": lambda s: implies(s.d_req != DReq.NONE, le(1, s.d_nblk)),
    "never_leased": lambda s: not_(s.lease),  # variants without leases
    "kv_complete": lambda s: not_(s.kv_pending),  # variants that never pick a request mid-prefill
    "no_late_preempt": lambda s: not_(s.late_preempt),  # variants without v0.1.0's stamped check
    "late_preempt_seen": lambda s: implies(s.late_preempt, s.preempted),
    # after an abort S's free is on its way until D has released and fenced the migration, and
    # a fenced migration holds nothing on D
    "aborted_free_or_fenced": lambda s: implies(
        and_(one_of(s.status, (Mig.ABORTED_SRC, Mig.ABORTED_DST)), s.d_alive),
        or_(s.m_free, s.fenced, s.d_req != DReq.NONE)),
    "fenced_holds_nothing": lambda s: implies(s.fenced, and_(s.d_res == 0, s.d_slot != Slot.OURS,
                                                            not_(s.lease))),
    # a pull D has not fenced lands in its reservation (also after S gave up, until S's free)
    "copy_pending_reserved": lambda s: implies(and_(s.m_copy, not_(s.fenced), s.d_alive),
                                               s.d_res == add(s.copied, s.n)),
    # a later pre-allocation D has not fenced finds the slot still ours
    "granted_slot_ours": lambda s: implies(
        and_(or_(lt(0, s.stage), one_of(s.pc, (Pc.COPY, Pc.COMMIT, Pc.RESOLVE)),
                 and_(s.pc == Pc.ALLOC, s.ack == Ack.OK)),
             not_(s.fenced), s.d_alive, s.d_req == DReq.NONE),
        s.d_slot == Slot.OURS),
    "committed_unleased": lambda s: implies(s.d_req != DReq.NONE, not_(s.lease)),
    "migrated_committed_or_d_dead": lambda s: implies(
        s.req == Req.MIGRATED, or_(s.d_req != DReq.NONE, not_(s.d_alive))),
    # history: the commit is sent once, in the final stage, and only then may S drop its copy
    "commit_sent_final": lambda s: implies(s.c_sent, s.final),
    "commit_sent_at_commit": lambda s: implies(
        and_(s.status == Mig.RUNNING, one_of(s.pc, (Pc.COMMIT, Pc.RESOLVE))), s.c_sent),
    "unsent_before_commit": lambda s: implies(
        and_(s.status == Mig.RUNNING, one_of(s.pc, (Pc.STAGE, Pc.ALLOC, Pc.COPY))), not_(s.c_sent)),
    "commit_message_sent": lambda s: implies(s.m_commit, s.c_sent),
    "committed_sent": lambda s: implies(s.d_req != DReq.NONE, s.c_sent),
    # a client abort while paused stops the hand-over before the commit is sent
    "aborted_unsent": lambda s: implies(s.aborted, and_(not_(s.c_sent), not_(s.m_commit))),
    "aborted_paused_or_ended": lambda s: implies(s.aborted, or_(
        and_(s.req == Req.PAUSED, s.status == Mig.RUNNING), and_(s.req == Req.FINISHED, s.status != Mig.RUNNING),
        not_(s.s_alive))),
    # shared blocks are among those S holds for the request
    "unheld_unshared": lambda s: implies(s.s_blocks == 0, s.s_shared == 0),
    # KV contents on D: a non-final stage pulls full blocks only, so D's copy is exactly what it
    # counts; the final stage's pull completes it with S's KV at the pause
    "content_is_count": lambda s: implies(
        and_(not_(s.preempted), or_(not_(s.final), lt(s.copied, s.p_nblk)),
             one_of(s.req, (Req.RUNNING, Req.PAUSED))),
        and_(s.d_full == s.copied, s.d_tail == 0)),
    # a waiting request never preempted is a waiting start that S has not moved on (models/scope.py)
    "waiting_start_untouched": lambda s: implies(
        and_(s.req == Req.WAITING, not_(s.preempted)),
        and_(s.copied == 0, s.d_full == 0, s.d_tail == 0, not_(s.m_copy), not_(s.final))),
    "content_at_pause": lambda s: implies(
        and_(not_(s.preempted), s.final, s.copied == s.p_nblk,
             or_(s.status == Mig.RUNNING, s.d_req != DReq.NONE, s.m_commit)),
        and_(s.d_full == add(sub(s.p_nblk, 1), ite(s.p_tok == sub(s.bs, 1), 1, 0)),
             s.d_tail == ite(s.p_tok == sub(s.bs, 1), 0, add(s.p_tok, 1)))),
    "tail_le_bs": lambda s: le(s.d_tail, s.bs),
    "paused_length_le_length": lambda s: implies(s.final, le(s.p_nblk, s.nblk)),
    "nonfinal_copy_leaves_last_block": lambda s: implies(and_(s.m_copy, not_(s.final)),
                                                         lt(add(s.copied, s.n), s.nblk)),
}


# Lemmas given only to the variants named in VARIANT_LEMMAS. Every candidate adds terms to Z3's
# context, and those change the models Z3 picks, so the printed traces of every variant; keeping
# these away from the others keeps their traces (and reports/protocol-findings.md) as they were.
HANDOVER_LEMMAS: dict[str, Lemma] = {
    # weaker forms of final_paused / commit_quiet / migrated_committed that survive S dropping
    # the request before D commits (pd-early-free): S no longer runs the request once the final
    # stage began, and a request S dropped never changes again
    "final_held": lambda s: implies(and_(s.final, s.status == Mig.RUNNING),
                                    one_of(s.req, (Req.PAUSED, Req.MIGRATED))),
    "migrated_final_frozen": lambda s: implies(s.req == Req.MIGRATED, and_(
        s.final, s.nblk == s.p_nblk, s.tok == s.p_tok)),
    "commit_wait_held": lambda s: implies(_running(s, Pc.COMMIT, Pc.RESOLVE), and_(
        not_(s.m_alloc), not_(s.m_copy), s.final, one_of(s.req, (Req.PAUSED, Req.MIGRATED)))),
}

# commit_alone without its clause on S's free: a blind resume on a commit timeout (HEAD's
# handling, pd-resume-on-timeout) sends the free while the commit is still in flight
BLIND_RESUME_LEMMAS: dict[str, Lemma] = {
    "commit_excludes_alloc_copy": lambda s: implies(s.m_commit, and_(not_(s.m_alloc),
                                                                   not_(s.m_copy))),
}

# weaker forms of final_paused / commit_quiet / live_s_not_committed that survive the forward
# pass in flight at v0.1.0's pause finishing the paused request (finish_in_flight): once the
# final stage began, S's copy is paused or finished there, with the KV it had at the pause
MID_STEP_FINISH_LEMMAS: dict[str, Lemma] = {
    "final_paused_or_finished": lambda s: implies(
        and_(s.final, s.status == Mig.RUNNING), one_of(s.req, (Req.PAUSED, Req.FINISHED))),
    "final_finished_frozen": lambda s: implies(
        and_(s.final, s.req == Req.FINISHED, s.status == Mig.RUNNING),
        and_(s.nblk == s.p_nblk, s.tok == s.p_tok)),
    "migrated_final_frozen": HANDOVER_LEMMAS["migrated_final_frozen"],
    "commit_wait_paused_or_finished": lambda s: implies(_running(s, Pc.COMMIT, Pc.RESOLVE), and_(
        not_(s.m_alloc), not_(s.m_copy), s.final, one_of(s.req, (Req.PAUSED, Req.FINISHED)))),
    "runnable_s_not_committed": lambda s: implies(
        and_(one_of(s.req, (Req.RUNNING, Req.WAITING)), s.d_alive), s.d_req == DReq.NONE),
}

# The AE's final stage (`d_recv`): D posts the final receive when it grants the last blocks and
# installs the request when the receive ends (after S's send, or with an error once S is dead);
# S hands the request over (frees, MIGRATED, FINISHED) on the grant's reply, before D installs it
AE_RECEIVE_LEMMAS: dict[str, Lemma] = {
    # a posted receive belongs to a granted final stage that S has not given up: S still waits
    # for the grant's reply, or has handed the request over (D's death freezes it as it was)
    "ae_recv_while": lambda s: implies(and_(s.d_recv, s.d_alive), or_(
        and_(s.status == Mig.RUNNING, s.pc == Pc.ALLOC, s.ack == Ack.OK, s.req == Req.PAUSED),
        and_(s.status == Mig.FINISHED, s.req == Req.MIGRATED))),
    "ae_recv_alone": lambda s: implies(and_(s.d_recv, s.d_alive), and_(
        not_(s.m_alloc), not_(s.m_commit), not_(s.m_free), not_(s.preempted))),
    # ... into the reservation of the whole paused request, under D's slot
    "ae_recv_reserved": lambda s: implies(and_(s.d_recv, s.d_alive), and_(
        s.d_res == s.p_nblk, s.d_slot == Slot.OURS)),
    # D installs only by ending that receive: after S handed the request over, or with S dead
    # while it still waited for the grant's reply
    "ae_installed_after_recv": lambda s: implies(s.d_req != DReq.NONE, and_(
        s.final, not_(s.d_recv), not_(s.m_copy), not_(s.m_alloc), not_(s.m_commit),
        or_(and_(s.status == Mig.FINISHED, s.req == Req.MIGRATED),
            and_(not_(s.s_alive), s.status == Mig.RUNNING, s.pc == Pc.ALLOC,
                 s.req == Req.PAUSED)))),
    # S asks D to free only after giving up itself (ABORTED_SRC); D's refusals free on their own
    "ae_free_after_abort_src": lambda s: implies(s.m_free, s.status == Mig.ABORTED_SRC),
    # without timeouts S stops waiting for a pre-allocation reply only when D is dead
    "ae_alloc_awaited": lambda s: implies(and_(s.m_alloc, s.d_alive), s.status == Mig.RUNNING),
    # D's slot is ours from its first grant until it refuses, frees or installs
    "ae_granted_slot_ours": lambda s: implies(
        and_(s.d_alive, s.status == Mig.RUNNING, not_(s.fenced), s.d_req == DReq.NONE,
             or_(lt(0, s.stage), s.pc == Pc.COPY, and_(s.pc == Pc.ALLOC, s.ack == Ack.OK))),
        s.d_slot == Slot.OURS),
}

VARIANT_LEMMAS: dict[str, dict[str, Lemma]] = {
    "pd-early-free": HANDOVER_LEMMAS, "pd-resume-on-timeout": BLIND_RESUME_LEMMAS,
    "v010": MID_STEP_FINISH_LEMMAS, "ae": AE_RECEIVE_LEMMAS,
}
