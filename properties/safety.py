"""The safety properties, each defined once as a predicate over `State` via the ops facade.

Z3 (models/), the Hypothesis machines (properties/machines.py) and the simulator's audit all call
these same functions. A predicate must hold in every reachable state of a correct protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from llumverify.protocol.ops import Val, add, and_, implies, le, not_, one_of, or_
from llumverify.protocol.state import DReq, Mig, Req, Slot, State

Predicate = Callable[[State], Val]


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
    after that, D does. A crash of the holder may lose it; nothing else may."""
    finished = or_(s.req == Req.FINISHED, s.d_req == DReq.FINISHED)
    on_s = or_(not_(s.s_alive), one_of(s.req, (Req.RUNNING, Req.WAITING)),
               and_(s.req == Req.PAUSED, s.status == Mig.RUNNING))
    on_d = or_(not_(s.d_alive), s.d_req == DReq.RUNNING)
    return or_(finished, live_on_d(s), and_(s.req != Req.MIGRATED, on_s),
               and_(s.req == Req.MIGRATED, on_d))


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


@dataclass(frozen=True)
class Property:
    name: str
    predicate: Predicate
    doc: str


def _prop(f: Predicate) -> Property:
    return Property(f.__name__, f, " ".join((f.__doc__ or "").split()))


PROPERTIES: Mapping[str, Property] = {
    p.name: p for p in map(_prop, (
        single_owner, no_loss, no_leak, no_source_leak, block_accounting, commit_after_copy, committed_kv_owned,
        copy_into_reserved, no_decode_after_pause, slot_discipline, slot_released, no_stale_kv,
    ))
}


def violated(s: State) -> list[str]:
    """Names of the properties a concrete state breaks (for the simulator's audit)."""
    return [name for name, p in PROPERTIES.items() if not p.predicate(s)]
