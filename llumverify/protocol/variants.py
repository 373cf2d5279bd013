"""Protocol variants as data: flags read by the shared actions, plus small action overrides.

`ae`, `v010` and `head` model llumnix-ray as written (see docs/llumnix-code-notes.md and
reports/protocol-findings.md for the code each flag comes from); `safe` is our corrected design.
`pd` is `safe` cut down to the prefill->decode KV hand-off of P/D disaggregation (one blocking
stage); `pd-early-free` and `pd-resume-on-timeout` are plausible slips in such a hand-off.
Mutants (models/mutants.py) are variants too: `safe` with one flag flipped or one action replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Callable, Mapping

from llumverify.errors import UserError
from llumverify.protocol.actions import (
    BASE_ACTIONS, Action, Flags, _free_on_s, ite_state, pull, release_slot,
)
from llumverify.protocol.ops import Val, add, and_, ite, not_, or_
from llumverify.protocol.state import Ack, DReq, Mig, Pc, Req, State


@dataclass(frozen=True, eq=False)
class Variant:
    """How one version of the handshake behaves. Every field is read by some action.

    Compared and hashed by identity (caches of Z3 encodings key on the object)."""

    name: str
    doc: str
    max_stages: int  # stages allowed (the AE always runs exactly 2)
    last_stage_blocks: int | None  # pins State.thr; None leaves it symbolic when checking
    final_at_max_stage: bool  # the last allowed stage is final (else exceeding it aborts)
    lease: bool  # D's reservations expire (lease watcher)
    lease_releases_slot: bool  # ... and the expiry also frees D's migration slot
    fence: bool  # D refuses later calls of a migration whose reservation it dropped
    resolve_commit_timeout: bool  # on commit timeout S asks D instead of resuming blindly
    free_on_abort_src: bool  # S tells D to free the reservation on ABORTED_SRC
    free_on_abort_dst: bool  # ... and on ABORTED_DST
    refusal_frees: bool  # D frees the whole reservation when it refuses a call
    failed_call_drops_lease: bool  # a refused/failed call consumes the lease, keeps the blocks
    free_needs_lease: bool  # D's free handler only frees while the lease record exists
    slot_check: bool  # the first pre-allocation needs D's migration slot to be free
    later_alloc_checks_slot: bool  # later pre-allocations check D's slot is still ours
    watermark_every_stage: bool  # later pre-allocations keep the watermark too
    # S checks finished/preempted before each stage and before each copy (after D's
    # pre-allocation reply); without it S checks only at a stage's start, and copies whatever
    # D granted (v0.1.0: migration_coordinator.py:126-137)
    early_abort_checks: bool
    copy_failure_raises: bool  # a failed pull raises in S's call: D keeps its blocks, S frees nothing
    timeouts: bool  # S's RPCs time out (spuriously: the call may still complete)
    requeue_on_rpc_error: bool  # S re-queues a paused request when D's actor died
    removed: frozenset[str] = frozenset()  # shared actions this variant does not have
    # once the commit was sent, S's learning that D died does not resume the request (D may
    # have committed and run it): S drops its copy (at most once)
    commit_unknown_drops: bool = False
    # S decides on the final stage and counts the blocks to send, then takes the request out of
    # its batch only after the engine's next step, which may grow it (`step_before_pause`)
    pause_deferred: bool = False
    # S pauses the request while a forward pass that includes it may be in flight, and that
    # step's output is still applied to it: it may finish the paused request (`finish_in_flight`)
    pause_mid_step: bool = False
    # S's selection may pick a request whose prefill is still running (the AE's LCFS takes the
    # tail of the batch): the migration may start with the KV pending (`kv_pending`) until the
    # forward pass ends (`prefill_done`); meanwhile the request neither decodes nor is preempted
    picks_in_prefill: bool = False
    # S's coordinator does not yield from the pick through stage 0's pre-allocation call, nor from
    # a copy reply through the next one (v0.1.0: migration_coordinator.py:85-88, 98-110, 137-142):
    # S's scheduler cannot preempt or re-admit the request between stages (`pc=STAGE`). A decode
    # or finish there stands for one of the step in flight that ended just before the reply
    # (each commutes with `s_copy_done`); the simulator applies those at the stage point.
    atomic_stage_start: bool = False
    # S's check after a non-final copy sees a preemption only if it came after the stage's stamp,
    # taken when D's pre-allocation reply arrived (v0.1.0: migration_coordinator.py:134, 138;
    # llumlet/request.py:106-108): such a request is aborted (ABORTED_SRC, D told to free) even if
    # re-admitted since; one preempted before the stamp and still waiting makes the next stage's
    # block-table lookup raise (scheduler.py:97-100), and nothing frees D (`abort_src_raise`)
    stamped_abort_check: bool = False
    # S's abort handler finds a request paused for the final stage (`client_abort`): S's checks
    # then end the migration before the commit and finish the request. Llumnix as written does
    # not: its abort looks only in the scheduler's waiting/running/swapped queues (vLLM's
    # Scheduler.abort_seq_group; AE vllm/core/scheduler.py:114-124), which the paused request has
    # left (HEAD backends/vllm/scheduler.py:106-112, v0.1.0 :102-108, AE llm_engine.py:730), and
    # the coordinator checks nothing of the kind: the abort is lost, and the request is committed
    # on D or put back into S's batch (docs/llumnix-code-notes.md, section 7; the AE's manager
    # does not even send it, llm_engine_manager.py:320-331, which loses it the same way)
    abort_finds_paused: bool = False
    # D's commit handler can fail after it installed the reservation as the request's block
    # table and before the request joins a queue, keeping the blocks (A3', `d_commit_fail`).
    # HEAD with SPMD workers (VLLM_USE_RAY_SPMD_WORKER=1): the worker call at
    # backends/vllm/llm_engine.py:461 -> 558-562 raises on a dead or late (10 s) worker after
    # :452-454 popped and installed the reservation; nothing frees that block table
    # (docs/llumnix-code-notes.md, section 8)
    commit_fail_holds: bool = False
    overrides: Mapping[str, Action] = field(default_factory=lambda: MappingProxyType({}))

    def pinned(self, s: State) -> Val:
        """Constraints this variant puts on the initial state (beyond `initial`): its pinned
        threshold, and, unless its selection may pick a request mid-prefill
        (`picks_in_prefill`), a request whose KV is complete (no prefill running on S)."""
        pins = [] if self.last_stage_blocks is None else [s.thr == self.last_stage_blocks]
        if not self.picks_in_prefill:
            pins.append(s.kv_pending == False)  # noqa: E712 (symbolic-friendly)
        return and_(*pins) if len(pins) > 1 else pins[0] if pins else True

    @cached_property
    def actions(self) -> tuple[Action, ...]:
        """The variant's actions: the shared ones that apply, with overrides swapped in (made
        once per variant: the state machines and the explicit graphs look actions up per step)."""
        return tuple(self.overrides.get(a.name, a) for a in BASE_ACTIONS
                     if a.applies(self) and a.name not in self.removed)

    @cached_property
    def _by_name(self) -> Mapping[str, Action]:
        return MappingProxyType({a.name: a for a in self.actions})

    def action(self, name: str) -> Action:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(a.name for a in self.actions)
            raise UserError(f"variant {self.name!r} has no action {name!r} (known: {known})") from None

    def derive(self, name: str, doc: str, overrides: Mapping[str, Action] | None = None,
               **flags: object) -> "Variant":
        """A copy with some flags changed and some actions replaced (used for mutants)."""
        merged = dict(self.overrides) | dict(overrides or {})
        return replace(self, name=name, doc=doc, overrides=MappingProxyType(merged), **flags)


def _shared(name: str) -> Action:
    return next(a for a in BASE_ACTIONS if a.name == name)


HEAD = Variant(
    name="head",
    doc="llumnix-ray main at 3fb6c03 as written (llumnix/llumlet/migration_coordinator.py).",
    max_stages=3, last_stage_blocks=None, final_at_max_stage=False,
    lease=True, lease_releases_slot=False, fence=True, resolve_commit_timeout=False,
    free_on_abort_src=True, free_on_abort_dst=False, refusal_frees=False,
    failed_call_drops_lease=True, free_needs_lease=True, slot_check=True,
    later_alloc_checks_slot=False, watermark_every_stage=False, early_abort_checks=True,
    copy_failure_raises=False, timeouts=True, requeue_on_rpc_error=True,
    pause_deferred=True, commit_fail_holds=True,
)

# Our corrected design, written as the fix of HEAD: each flag below is one repair.
SAFE = HEAD.derive(
    "safe", "Corrected design: fenced leases, commit outcome resolved with D, free on every abort.",
    final_at_max_stage=True,  # the last allowed stage is final instead of aborting the migration
    lease_releases_slot=True,  # an expired lease also frees D's migration slot
    resolve_commit_timeout=True,  # on a commit timeout S asks D (and fences it) instead of resuming
    free_on_abort_dst=True,  # S tells D to free its reservation on ABORTED_DST too
    failed_call_drops_lease=False,  # a refused or failed call keeps the lease (blocks still expire)
    free_needs_lease=False,  # D's free handler frees whether or not the lease record still exists
    later_alloc_checks_slot=True,  # later pre-allocations check that D's slot is still ours
    commit_unknown_drops=True,  # once the commit was sent, a dead D does not resume the request on S
    pause_deferred=False,  # the request leaves the batch when the final stage's blocks are counted
    abort_finds_paused=True,  # a client abort while paused ends the migration before the commit (S checks)
    commit_fail_holds=False,  # D's commit installs the request whole, or undoes the install on an error
)

V010 = HEAD.derive(
    "v010", "llumnix-ray v0.1.0: stage loop, no timeouts, no lease, no slot.",
    lease=False, fence=False, refusal_frees=True, failed_call_drops_lease=False,
    free_needs_lease=False, slot_check=False, watermark_every_stage=True,
    early_abort_checks=False, timeouts=False,
    pause_deferred=False,  # its pause is not deferred to a step boundary ...
    # ... it lands while S's step awaits the forward pass (vLLM 0.4.2 runs it on a thread), and
    # that step's output is still applied to the removed request, whose sequence stays RUNNING
    # (backends/vllm/scheduler.py:102-108, llm_engine.py:179-185): it may finish it and free its
    # blocks, and the final stage does not check (migration_coordinator.py:111-142)
    pause_mid_step=True,
    # the manager's clean-up never runs: its done-callback tests the gathered list, not the
    # result, for an exception (llm_engine_manager.py:233, 255-258), so nothing frees D's
    # reservations or re-queues a paused request after an RPC error
    requeue_on_rpc_error=False,
    # a failed pull raises: worker.py:112-115 catches `ray.exceptions...` without importing ray
    copy_failure_raises=True,
    atomic_stage_start=True,
    stamped_abort_check=True,
    # its commit (backends/vllm/llm_engine.py:349-363) is synchronous, with no worker call
    commit_fail_holds=False,
)


def _ae_stage1_alloc_ok(s: State, v: Flags) -> State:
    """AE stage 1: D's yes means D took the request, so S frees its copy, then sends the last
    blocks (llm_engine.py:743-745); a non-final stage is the shared action. `m_copy` is S's
    send, which D's posted receive (`d_recv`) takes in."""
    base = _shared("s_alloc_ok").effect(s, v)
    handed = _free_on_s(s, Req.MIGRATED).replace(
        status=Mig.FINISHED, pc=Pc.DONE, m_copy=True, ack=Ack.NONE, c_sent=True)
    return ite_state(s.final, handed, base)


def _ae_grant(s: State, v: Flags) -> State:
    """AE stage 1 on D, one handler with no `await` (llm_engine.py:763-783): D reserves the last
    blocks, installs the block table under a new sequence id and posts the receive whose
    done-callback will put the request into D's running batch; then it answers yes. The receive
    is armed here, at the grant, not when S's send arrives; a non-final grant is the shared
    action (its receive, llm_engine.py:757-758, has no callback)."""
    return _shared("d_alloc_ok").effect(s, v).replace(d_recv=s.final)


def _ae_receive_guard(failed: bool) -> Callable[[State, Flags], Val]:
    """When D's final receive ends: it succeeds only by taking in S's send from a live S; it
    fails on a transfer error during the send, or because S is gone (S died before or while
    sending: the peer of the receive is dead; whether the transport reports that at once or
    after torch's process-group timeout is not verified). A transfer error while a live S has
    yet to send is taken as one during the send: the only step of S's in between is its
    handling of D's yes, which is the same either way. A non-final stage is the shared guard."""
    def guard(s: State, v: Flags) -> Val:
        base = _shared("d_copy_fail" if failed else "d_copy").guard(s, v)
        ends = (and_(s.d_alive, s.d_recv, or_(s.m_copy, not_(s.s_alive))) if failed
                else and_(s.d_alive, s.d_recv, s.s_alive, s.m_copy))
        return ite(s.final, ends, base)
    return guard


def _ae_receive(failed: bool) -> Callable[[State, Flags], State]:
    """AE stage 1 on D: when the receive D posted at its grant ends, its done-callback puts the
    request into D's running batch, whether or not the receive succeeded
    (llm_engine.py:775-782): the block table installed at the grant becomes the request's."""
    def effect(s: State, v: Flags) -> State:
        base = _shared("d_copy_fail" if failed else "d_copy").effect(s, v)
        received = s if failed else pull(s, s.copied)
        done = received.replace(
            m_copy=False, d_recv=False,
            d_req=DReq.RUNNING, d_nblk=s.p_nblk, d_blocks=s.d_res, d_res=0,
            d_slot=release_slot(s))
        return ite_state(s.final, done, base)
    return effect


AE = HEAD.derive(
    "ae", "The OSDI'24 artifact (osdi24ae): exactly two stages, stage 1 is the commit.",
    overrides={
        "s_alloc_ok": replace(_shared("s_alloc_ok"), effect=_ae_stage1_alloc_ok),
        "d_alloc_ok": replace(_shared("d_alloc_ok"), effect=_ae_grant,
                              doc="D reserves n blocks; granting the final stage it also posts "
                                  "the receive that will install the request."),
        "d_copy": replace(_shared("d_copy"), guard=_ae_receive_guard(failed=False),
                          effect=_ae_receive(failed=False),
                          doc="D pulls this stage's n blocks; the final stage's receive takes "
                              "in S's send and installs the request."),
        "d_copy_fail": replace(_shared("d_copy_fail"), guard=_ae_receive_guard(failed=True),
                               effect=_ae_receive(failed=True),
                               doc="D's pull fails; the final stage's receive fails (a transfer "
                                   "error, or S is dead) and installs the request anyway."),
    },
    removed=frozenset({"s_send_commit", "d_commit", "s_commit_ok"}),
    max_stages=2, last_stage_blocks=0, final_at_max_stage=True,
    lease=False, fence=False, free_on_abort_dst=False, refusal_frees=True,
    failed_call_drops_lease=False, free_needs_lease=False, watermark_every_stage=True,
    timeouts=False, requeue_on_rpc_error=False, pause_deferred=False,
    copy_failure_raises=True,  # S's failed stage-0 send raises (llm_engine.py:720-721); D frees nothing
    commit_fail_holds=False,  # no separate commit: stage 1's grant installs the request
    # LCFS scans the batch from its tail for a decoding request but appends the tail itself
    # (vllm/core/scheduler.py:160-170), which may be a request the step in flight admitted, its
    # prefill still running (:242-248; the migration runs while step_async awaits the forward
    # pass, llm_engine.py:807-814); S's workers send stage 0's blocks on a separate CUDA stream
    # while that forward pass may still write them (worker/cache_engine.py:206-238)
    picks_in_prefill=True,
)

# ---- prefill -> decode (P/D disaggregation) ------------------------------------------------
# Right after its first token a request on a prefill instance (S) is handed to a decode instance
# (D) in ONE blocking stage: S takes it out of its batch at once, D pre-allocates every block,
# pulls them all, commits (the request joins D's batch), then S frees its copy. A refusal or a
# failure of D puts the request back into S's batch. These are `safe`'s actions and flags with
# a single stage: max_stages=1 and final_at_max_stage make the first stage final for every
# request size, whatever the threshold; the threshold is pinned to 0 (as the AE pins it), so the
# last_stage_blocks a caller passes to `api.start_migration` is ignored. `begin_stage` and
# `s_copy_done` (non-final stages only) can never be enabled and are removed.

PD = SAFE.derive(
    "pd", "Prefill->decode KV hand-off: `safe` restricted to one blocking (final) stage.",
    max_stages=1, last_stage_blocks=0, final_at_max_stage=True,
    removed=frozenset({"begin_stage", "s_copy_done"}),
)


def _pd_early_free_send_commit(s: State, v: Flags) -> State:
    """D's pull finished: an eager S frees the request's KV and drops it (to free prefill memory
    at once), then sends the commit, trusting D to run it."""
    return _free_on_s(_shared("s_send_commit").effect(s, v), Req.MIGRATED)


PD_EARLY_FREE = PD.derive(
    "pd-early-free", "P/D hand-off whose S frees and drops the request when D's pull ends, "
                     "before D has committed.",
    overrides={"s_send_commit": replace(_shared("s_send_commit"),
                                        effect=_pd_early_free_send_commit)},
)

PD_RESUME_ON_TIMEOUT = PD.derive(
    "pd-resume-on-timeout", "P/D hand-off whose S puts the request back into its batch when the "
                            "commit RPC times out, without asking D whether it committed.",
    resolve_commit_timeout=False,
)

VARIANTS: Mapping[str, Variant] = MappingProxyType({v.name: v for v in (
    SAFE, AE, V010, HEAD, PD, PD_EARLY_FREE, PD_RESUME_ON_TIMEOUT)})

# Our designs: `llumverify check` (no options) fails unless each of these proves every property;
# every other variant's findings are only listed.
MUST_PROVE: tuple[str, ...] = ("safe", "pd")


def get_variant(name: str) -> Variant:
    try:
        return VARIANTS[name]
    except KeyError:
        raise UserError(f"unknown variant {name!r} (known: {', '.join(VARIANTS)})") from None
