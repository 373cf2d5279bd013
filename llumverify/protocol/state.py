"""The migration's state: one request moving from source S to destination D.

Small, flat and immutable: every field is an int or a bool so the same dataclass holds Python
values (simulator, Hypothesis) or Z3 terms (model checker). Enumerations are IntEnums; their
domain constraints live in `well_formed`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from llumverify.protocol.ops import Val, and_, le, lt, one_of


class Req(IntEnum):
    """Where the request is on S (the source). `preempted` is a separate flag (see State)."""

    RUNNING = 0  # in S's running batch, decoding
    PAUSED = 1  # taken out of the running batch for the final stage (downtime)
    WAITING = 2  # in S's waiting queue after a recompute preemption (holds no blocks)
    FINISHED = 3  # completed on S
    MIGRATED = 4  # handed over: S dropped it after D committed


class Mig(IntEnum):
    """Migration status, named as in the code."""

    RUNNING = 0
    ABORTED_SRC = 1
    ABORTED_DST = 2
    FINISHED = 3  # committed


class Pc(IntEnum):
    """Where S's migration coordinator is (what it waits for)."""

    STAGE = 0  # about to begin a stage (abort checks, then pre-allocate)
    ALLOC = 1  # waiting for D's pre-allocation reply
    COPY = 2  # waiting for D to pull this stage's blocks
    COMMIT = 3  # waiting for D's commit reply
    RESOLVE = 4  # commit outcome unknown: asked D to fence, waiting (safe variant only)
    DONE = 5


class DReq(IntEnum):
    """The committed request on D."""

    NONE = 0
    RUNNING = 1
    FINISHED = 2


class Slot(IntEnum):
    """D's single migration-in slot."""

    FREE = 0
    OURS = 1
    OTHER = 2  # another migration into D holds it


class Ack(IntEnum):
    """The reply from D that S is waiting for (one channel: S waits for one reply at a time)."""

    NONE = 0
    OK = 1
    FAIL = 2


@dataclass(frozen=True)
class State:
    """All fields of one migration. Capacities, block size, watermark and threshold never change."""

    # constants (symbolic in Z3: the proofs hold for every value)
    bs: Val  # tokens per block (16 in vLLM)
    wm: Val  # D's watermark blocks
    s_cap: Val  # S's KV capacity in blocks
    d_cap: Val
    thr: Val  # the final stage begins when at most thr blocks remain (16 in HEAD)
    # the request on S
    req: Val  # Req
    preempted: Val  # bool: S preempted it since the migration began
    late_preempt: Val  # bool: ... after this stage's copy began, when v0.1.0 stamps the stage (its
    #                   post-copy check sees only such preemptions; `stamped_abort_check`)
    nblk: Val  # the request's KV length in blocks (its last block may be partial)
    tok: Val  # tokens in the last block, 0 <= tok < bs (keeps decoding linear)
    s_blocks: Val  # blocks S holds for the request
    s_shared: Val  # ... of which other requests also reference (vllm-v1's prefix cache shares
    #               full blocks by refcount): S's release keeps them for those requests
    s_free: Val
    s_other: Val  # S's blocks used by other requests
    s_alive: Val  # bool
    kv_pending: Val  # bool: the request's prefill (the forward pass writing its prompt's KV) is
    #                 still running on S, so the KV S holds is not complete (AE: LCFS can pick it)
    # D
    d_req: Val  # DReq
    d_nblk: Val  # KV length (blocks) the committed request has on D
    d_blocks: Val  # blocks D owns for the committed request
    d_full: Val  # KV contents on D: its leading blocks that hold what S's held when full (each
    #             pulled, at its own offset, from blocks S held for the request, once full) ...
    d_tail: Val  # ... and the tokens of the next block (0: none) if it was pulled partly filled
    d_res: Val  # blocks reserved on D for this migration (count as used)
    d_free: Val
    d_other: Val
    d_alive: Val  # bool
    d_slot: Val  # Slot
    lease: Val  # bool: the reservation is under a lease that will expire
    fenced: Val  # bool: D has disowned this migration and refuses its later messages (safe)
    d_recv: Val  # bool: D's receive of the final stage is posted and not yet over (AE: D posts it
    #              when it grants the final pre-allocation; its end installs the request on D)
    # the migration, as S's coordinator sees it
    status: Val  # Mig
    pc: Val  # Pc
    stage: Val  # stages begun so far (0-based index of the current stage)
    final: Val  # bool: the final stage has begun
    n: Val  # blocks to pre-allocate and copy in the current stage
    copied: Val  # blocks copied to D so far
    p_nblk: Val  # nblk and tok when the request was paused (what the final stage copies)
    p_tok: Val
    c_sent: Val  # bool: S has sent the commit (history: S may drop its copy only after this)
    aborted: Val  # bool: the client aborted the request while it was paused, before the commit was
    #              sent (after that the abort goes to wherever the request runs: D's `d_finish`);
    #              whether S ever learns it is the variant's (`abort_finds_paused`)
    # messages in flight (S -> D) and D's reply
    m_alloc: Val  # bool
    m_copy: Val
    m_commit: Val
    m_free: Val  # free the reservation (after an abort)
    m_fence: Val  # "did you commit? if not, never will" (safe)
    ack: Val  # Ack

    def replace(self, **changes: Val) -> "State":
        """A copy with `changes` (dataclasses.replace's result, without its per-call field walk:
        the simulator applies one per protocol action)."""
        if not _FIELD_SET.issuperset(changes):  # no set built on the usual path
            unknown = changes.keys() - _FIELD_SET
            raise TypeError(f"State has no field(s) {', '.join(sorted(unknown))}")
        return with_fields(self, changes)

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in FIELDS}


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(State))
_FIELD_SET = frozenset(FIELDS)
BOOL_FIELDS: frozenset[str] = frozenset(
    {"preempted", "late_preempt", "s_alive", "kv_pending", "d_alive", "lease", "fenced", "d_recv", "final",
     "c_sent", "aborted", "m_alloc", "m_copy", "m_commit", "m_free", "m_fence"}
)
ENUM_FIELDS: dict[str, type[IntEnum]] = {
    "req": Req, "d_req": DReq, "d_slot": Slot, "status": Mig, "pc": Pc, "ack": Ack,
}
CONSTANT_FIELDS: tuple[str, ...] = ("bs", "wm", "s_cap", "d_cap", "thr")
COUNT_FIELDS: tuple[str, ...] = tuple(
    f for f in FIELDS if f not in BOOL_FIELDS and f not in ENUM_FIELDS
)


def well_formed(s: State) -> Val:
    """Domain constraints: enum ranges, non-negative counters, the token counter below bs."""
    return and_(
        *(one_of(getattr(s, f), [int(v) for v in e]) for f, e in ENUM_FIELDS.items()),
        *(le(0, getattr(s, f)) for f in COUNT_FIELDS),
        le(1, s.bs),
        lt(s.tok, s.bs),
        le(s.d_tail, s.bs),
    )


def initial(s: State) -> Val:
    """A migration just chosen by the scheduler: the request is running on S, nothing sent yet.
    Whether its prefill may still be running (`kv_pending`) is the variant's (`Variant.pinned`).

    Blocks, capacities, block size, watermark and threshold are arbitrary (symbolic), so every proof covers
    every size of request and instance; so is how many of the request's full blocks other requests
    share (the simulator's vllm-v1 migrates only requests sharing none, a stricter rule).
    """
    return and_(
        well_formed(s),
        s.req == Req.RUNNING, s.preempted == False, s.late_preempt == False,  # noqa: E712 (symbolic-friendly)
        le(1, s.nblk), s.s_blocks == s.nblk, lt(s.s_shared, s.nblk),  # only full blocks are shared
        s.s_free + s.s_other + s.s_blocks == s.s_cap,
        s.s_alive == True, s.d_alive == True,  # noqa: E712
        s.d_req == DReq.NONE, s.d_nblk == 0, s.d_blocks == 0, s.d_res == 0, s.d_full == 0, s.d_tail == 0,
        s.d_free + s.d_other == s.d_cap,
        s.d_slot == Slot.FREE, s.lease == False, s.fenced == False, s.d_recv == False,  # noqa: E712
        s.status == Mig.RUNNING, s.pc == Pc.STAGE, s.stage == 0, s.final == False,  # noqa: E712
        s.n == 0, s.copied == 0, s.p_nblk == 0, s.p_tok == 0, s.c_sent == False, s.aborted == False,  # noqa: E712
        s.m_alloc == False, s.m_copy == False, s.m_commit == False,  # noqa: E712
        s.m_free == False, s.m_fence == False, s.ack == Ack.NONE,  # noqa: E712
    )


def with_fields(s: State, changes: dict[str, Val]) -> State:
    """`s` with `changes`, field names unchecked (`State.replace` checks them; the generated
    effects of protocol/compiled.py name fields by construction). The field dict is copied whole
    and set as the new state's own rather than filled field by field: the simulator makes one
    per protocol action, and this cut a P/D run's instructions by 8.5 %."""
    new = object.__new__(State)
    fields = s.__dict__.copy()
    fields.update(changes)
    object.__setattr__(new, "__dict__", fields)
    return new
