"""Seeded bugs: `safe` with one flag flipped or one action replaced, each with the property
that must catch it. A mutant is killed when checking finds a violation of that property; a
survivor means the properties (or the checker) miss a real class of bug.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

from llumverify.protocol.actions import BASE_ACTIONS, Action, abort_dst, alloc_ok, at_pc
from llumverify.protocol.ops import Val, add, and_, le, lt, not_, one_of, or_, sub
from llumverify.protocol.state import Ack, Pc, Req, Slot, State
from llumverify.protocol.variants import SAFE, Variant
from llumverify.models.bmc import violations
from llumverify.properties.safety import PROPERTIES


@dataclass(frozen=True)
class Mutant:
    name: str
    doc: str
    expect: str  # the property that must catch it
    variant: Variant


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


def _no_requeue(s: State, v: Variant) -> State:
    return abort_dst(s, v).replace(req=s.req)


def _final_n(delta: int):  # type: ignore[no-untyped-def]
    begin = _base("begin_final")

    def effect(s: State, v: Variant) -> State:
        t = begin.effect(s, v)
        return t.replace(n=add(t.n, delta))
    return effect


def _dead_or_alive_resolve(s: State, v: Variant) -> Val:
    return or_(at_pc(s, Pc.RESOLVE), and_(at_pc(s, Pc.COMMIT), not_(s.d_alive)))


MUTANTS: Mapping[str, Mutant] = MappingProxyType({m.name: m for m in (
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
            _then("s_send_commit", lambda t, s, v: t.replace(
                req=Req.MIGRATED, s_free=add(t.s_free, t.s_blocks), s_blocks=0))),
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
            _swap("s_d_dead", guard=_dead_or_alive_resolve)),
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
)})



@dataclass(frozen=True)
class MutantResult:
    mutant: Mutant
    violated: Mapping[str, int]  # property -> shortest counterexample length

    @property
    def killed(self) -> bool:
        return self.mutant.expect in self.violated


def run_mutant(m: Mutant, depth: int) -> MutantResult:
    """BMC of the mutant against its expected property only: a violation kills it. (No proof
    first: for a killed mutant the search ends at its first, shortest, counterexample.)"""
    traces = violations(m.variant, {m.expect: PROPERTIES[m.expect].predicate}, depth).traces
    return MutantResult(m, {n: len(t) for n, t in traces.items() if t is not None})


def _run_named(name: str, depth: int) -> tuple[str, dict[str, int]]:
    result = run_mutant(MUTANTS[name], depth)
    return name, dict(result.violated)


def run_all(depth: int, workers: int = 2) -> list[MutantResult]:
    """Every mutant, spread over `workers` processes (mutants are independent; Z3 objects do
    not cross processes, so workers receive names and return plain results)."""
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(pool.map(_run_named, list(MUTANTS), [depth] * len(MUTANTS)))
    return [MutantResult(m, done[name]) for name, m in MUTANTS.items()]
