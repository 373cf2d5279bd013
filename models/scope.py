"""Scope beyond one migration: many requests and instances, concurrent migrations, re-migration,
waiting requests, and the scheduler's decisions in the model.

Two parts, stated in docs/protocol.md ("Scope"):

1. Composition (unbounded, Z3, per variant). A cluster of any number of instances and requests,
   each migration (a *link*) running the per-migration protocol, is projected onto each link as
   one `State`: everything on S or D that is not this link's is `s_other` / `d_other`, and
   another migration holding D's last slot is `d_slot = OTHER`. The per-link proof lifts to the
   cluster when these obligations hold over the variant's inductive invariant Inv:
   - `waiting_start`: a migration may start from a waiting request (in S's queue, no KV):
     such initial states satisfy Inv (so every proved property covers them);
   - `rely`: Inv is stable under interference, i.e. what other requests and migrations can do
     to this link's projection: move blocks between S's (or D's) free pool and other load, take
     or give back D's last free slot (a live instance only); interference keeps every step
     property, never changes the ranking or a liveness goal, and keeps every enabled fair
     process enabled (so the liveness proofs survive it too);
   - `guarantee`: every action keeps each instance's total (free + this link's + other) and
     changes D's slot only between FREE and OURS, so each step of this link is interference
     for every other link sharing S or D (in or out, up to any concurrency limit);
   - `handover`: once D committed, no action but the request leaving D (`d_finish`) or D's
     crash changes the committed copy, and a live D's committed copy is a valid start for a
     next link (it owns exactly its `d_nblk >= 1` blocks): re-migration is a new link whose S is
     this D, and the old link sees its hand-over as `d_finish` (plus interference for blocks the
     request grew on D). At most one copy runs: along the chain of links of one request, only
     the last link's S or D copy can run (each link's `at_most_once`).
2. Scheduler (bounded, explicit). `pair_instances` and `choose_request`, the functions the
   simulator calls, are run on every input of a small bound (`scheduler_inputs`) and inside an
   explicit cluster model (`explore_cluster`: instances that crash or drain at any point,
   requests that are preempted, re-admitted, client-aborted at any point, migrations that pause,
   commit (re-migration: twice), abort or drop their request, scheduler rounds on every order of
   reported loads), for concurrency limits 1 (every variant's and the simulator's) and 2 (one
   migration in and one out of the same instance). Each round must never pair an instance with
   itself, never exceed an instance's limit, never pick a dead or draining destination, and
   only move a running request that is not migrating yet.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, Sequence
from unittest import mock

import z3

from llumverify.protocol.state import FIELDS, DReq, Req, Slot, State, initial
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import POST, PRE, encode
from llumverify.models.intent import intent_mutant_kills
from llumverify.models.liveness import goal, invariant, ranking
from llumverify.properties.liveness import LIVENESS, fair_groups
from llumverify.properties.safety import PROPERTIES
from llumverify.scheduler.freeness import TERMINATING
from llumverify.scheduler import pairing
from llumverify.scheduler.pairing import MigrationLoad, pair_instances
from llumverify.scheduler.selection import Candidate, choose_request

# ---- 1. composition obligations (unbounded) ---------------------------------------------------

OBLIGATIONS: tuple[str, ...] = ("waiting_start", "rely", "guarantee", "handover")
ENV_SLOT = ("other_mig_in", "other_mig_out")  # the interference itself, as the model's actions


@dataclass(frozen=True)
class Obligation:
    name: str
    holds: bool
    why: str = ""  # what fails (the first failing check)


def _frame(*changed: str) -> z3.BoolRef:
    return z3.And(*(getattr(POST, f) == getattr(PRE, f) for f in FIELDS if f not in changed))


def _pool_move(alive: str, free: str, other: str) -> z3.BoolRef:
    pre_sum = getattr(PRE, free) + getattr(PRE, other)
    return z3.And(getattr(PRE, alive), _frame(free, other),
                  getattr(POST, free) + getattr(POST, other) == pre_sum,
                  getattr(POST, free) >= 0, getattr(POST, other) >= 0)


INTERFERENCE: dict[str, z3.BoolRef] = {
    "S load": _pool_move("s_alive", "s_free", "s_other"),
    "D load": _pool_move("d_alive", "d_free", "d_other"),
    "D slot": z3.And(PRE.d_alive, _frame("d_slot"), z3.Or(
        z3.And(PRE.d_slot == Slot.FREE, POST.d_slot == Slot.OTHER),
        z3.And(PRE.d_slot == Slot.OTHER, POST.d_slot == Slot.FREE))),
}


def waiting_initial(s: State) -> z3.BoolRef:
    """A migration chosen for a request in S's waiting queue: like `initial`, but the request
    waits and holds no KV (it will be recomputed if re-admitted), so no prefill of it runs."""
    running = s.replace(req=Req.RUNNING, s_blocks=s.nblk, s_cap=s.s_cap + s.nblk)
    return z3.And(initial(running), s.req == Req.WAITING, s.s_blocks == 0, s.s_shared == 0,
                  z3.Not(s.kv_pending))


def _totals(s: State) -> tuple[z3.ArithRef, z3.ArithRef]:
    return (s.s_free + s.s_other + s.s_blocks, s.d_free + s.d_other + s.d_res + s.d_blocks)


def obligations(v: Variant) -> list[Obligation]:
    """The four obligations of part 1 for a variant, each checked by Z3 over its invariant."""
    enc = encode(v)
    inv = invariant(v)
    valid = _validity(inv)
    out = [_waiting_start(v, inv), _rely(v, inv)]
    bad = []
    for name, rel in enc.relations.items():
        kept = z3.And(*(a == b for a, b in zip(_totals(PRE), _totals(POST))))
        if name not in ENV_SLOT:
            kept = z3.And(kept, z3.Or(POST.d_slot == PRE.d_slot, z3.And(
                z3.Or(PRE.d_slot == Slot.FREE, PRE.d_slot == Slot.OURS),
                z3.Or(POST.d_slot == Slot.FREE, POST.d_slot == Slot.OURS))))
        if not valid(rel, goal=kept):
            bad.append(name)
    out.append(Obligation("guarantee", not bad, f"{', '.join(bad)} changes an instance's total "
                                                f"or takes D's slot from another" if bad else ""))
    committed = PRE.d_req != DReq.NONE
    copy_kept = z3.And(POST.d_req == PRE.d_req, POST.d_nblk == PRE.d_nblk,
                       POST.d_blocks == PRE.d_blocks)
    bad = [name for name, rel in enc.relations.items()
           if name not in ("d_finish", "crash_d") and not valid(committed, rel, goal=copy_kept)]
    start = valid(PRE.d_req == DReq.RUNNING, PRE.d_alive,
                  goal=z3.And(PRE.d_blocks == PRE.d_nblk, PRE.d_nblk >= 1))
    why = (f"{', '.join(bad)} changes the committed copy" if bad else
           "" if start else "a live D's committed copy does not own exactly its blocks")
    out.append(Obligation("handover", not bad and start, why))
    return out


def _validity(inv: dict[str, z3.BoolRef]) -> Callable[..., bool]:
    """valid(*premises, goal=g): inv and the premises imply g (Z3)."""
    solver = z3.Solver()
    solver.add(*inv.values())

    def valid(*premises: z3.ExprRef, goal: z3.ExprRef) -> bool:
        return solver.check(*premises, z3.Not(goal)) == z3.unsat
    return valid


def _waiting_start(v: Variant, inv: dict[str, z3.BoolRef]) -> Obligation:
    s = z3.Solver()
    s.add(waiting_initial(PRE), v.pinned(PRE))
    bad = [n for n, c in inv.items() if s.check(z3.Not(c)) == z3.sat]
    return Obligation("waiting_start", not bad,
                      f"a waiting start breaks {', '.join(bad)}" if bad else "")


def _rely(v: Variant, inv: dict[str, z3.BoolRef]) -> Obligation:
    """Inv, the step properties, the ranking, the liveness goals and the enabled fair processes
    are all stable under each interference step."""
    enc = encode(v)
    valid = _validity(inv)
    post_inv = z3.And(*(enc.at(c, POST) for c in inv.values()))
    steps = z3.And(*(p.step(PRE, POST) for p in PROPERTIES.values() if p.step is not None))
    same_rank = z3.And(*(a == b for a, b in zip(ranking(v, PRE), ranking(v, POST))))
    goals = z3.And(*(z3.And(LIVENESS[n].predicate(PRE)) == z3.And(LIVENESS[n].predicate(POST))
                     for n in LIVENESS), z3.And(goal(tuple(LIVENESS))(PRE))
                   == z3.And(goal(tuple(LIVENESS))(POST)))
    groups = fair_groups(v)
    keep = z3.And(*(z3.Implies(z3.Or(*(enc.guards[a] for a in acts if a in enc.guards)),
                               z3.Or(*(enc.at(enc.guards[a], POST) for a in acts
                                       if a in enc.guards)))
                    for acts in groups.values()))
    for kind, rel in INTERFERENCE.items():
        for what, g in (("the invariant", post_inv), ("a step property", steps),
                        ("the ranking", same_rank), ("a liveness goal", goals),
                        ("an enabled fair process", keep)):
            if not valid(rel, goal=g):
                return Obligation("rely", False, f"{kind} interference changes {what}")
    return Obligation("rely", True)


# ---- 2. the scheduler, bounded -----------------------------------------------------------------

THRESHOLD = 0.0
# Reported migration freeness relative to the threshold: enough distinct values on each side for
# every order of three instances, the threshold itself, and a draining instance's report.
FREENESS: tuple[float, ...] = (-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)


class Scheduler(NamedTuple):
    """The decision functions the model calls: the simulator's, or a seeded bug's."""

    pair: Callable[..., list[tuple[int, int]]] = pair_instances
    choose: Callable[[Sequence[Candidate], str], int | None] = choose_request


REAL = Scheduler()


def pairing_faults(loads: Sequence[MigrationLoad], pairs: Sequence[tuple[int, int]]) -> list[str]:
    """What is wrong with one round's pairs for these loads (the caller passes live instances
    only, as the simulator's migration round does)."""
    by_id = {load.instance: load for load in loads}
    out = []
    used = [i for pair in pairs for i in pair]
    if len(used) != len(set(used)):
        out.append("an instance in two migrations of one round")
    for src, dst in pairs:
        if src == dst:
            out.append(f"instance {src} paired with itself")
        if src not in by_id or dst not in by_id:
            out.append(f"pair ({src}, {dst}) names an instance that is not serving")
            continue
        if by_id[src].migrating or by_id[dst].migrating:
            out.append(f"pair ({src}, {dst}) touches an instance at its concurrency limit")
        if by_id[dst].terminating:
            out.append(f"draining instance {dst} chosen as destination")
        if by_id[dst].has_preempted or not by_id[dst].freeness > THRESHOLD:
            out.append(f"instance {dst} has no headroom but was chosen as destination")
    return out


def selection_faults(cands: Sequence[Candidate], selection: str, chosen: int | None) -> list[str]:
    eligible = {c.request for c in cands if not c.high_priority and not c.migrating}
    if chosen is None:
        return ["no request chosen though one qualifies"] if eligible else []
    return [] if chosen in eligible else [f"request {chosen} chosen but not eligible"]


def _loads(n: int) -> Iterator[tuple[MigrationLoad, ...]]:
    per = [(f, p, m, False) for f in FREENESS for p in (False, True) for m in (False, True)]
    per += [(f, p, m, True) for f in (TERMINATING, FREENESS[-1]) for p in (False, True)
            for m in (False, True)]
    for combo in itertools.product(per, repeat=n):
        yield tuple(MigrationLoad(i, *x) for i, x in enumerate(combo))


def scheduler_inputs(instances: int = 3, candidates: int = 3,
                     sched: Scheduler = REAL, first_fault: bool = False) -> tuple[int, list[str]]:
    """Every load report of 1..`instances` serving instances (freeness in every order around the
    threshold, draining, preempted, at the limit) through `pair_instances` (both rules), and every
    candidate set of up to `candidates` requests through `choose_request` (every policy):
    (inputs checked, faults found). first_fault: stop at the first input with a fault (whether a
    seeded bug is caught, without checking the rest)."""
    checked, faults = 0, []
    for n in range(1, instances + 1):
        for loads in _loads(n):
            for busy_first in (False, True):
                checked += 1
                faults += pairing_faults(loads, sched.pair(loads, THRESHOLD, busy_first))
                if first_fault and faults:
                    return checked, faults
    per = [(kv, hp, mig, arr) for kv in (1, 2) for hp in (False, True) for mig in (False, True)
           for arr in (0, 1)]
    for n in range(candidates + 1):
        for combo in itertools.product(per, repeat=n):
            cands = [Candidate(r, kv, r, hp, mig, arr) for r, (kv, hp, mig, arr) in enumerate(combo)]
            for sel in ("lcfs", "sr", "lr"):
                checked += 1
                faults += selection_faults(cands, sel, sched.choose(cands, sel))
                if first_fault and faults:
                    return checked, faults
    return checked, faults


# The cluster model: instance status, requests (where, phase, times moved), migrations.
UP, DRAINING, DEAD = 0, 1, 2
RUNNING, WAITING, DONE, LOST = 0, 1, 2, 3  # DONE: finished or client-aborted


class Rq(NamedTuple):
    at: int  # instance (-1 once DONE or LOST)
    phase: int
    moved: int  # migrations committed so far (capped at 2)


class Mg(NamedTuple):
    req: int
    src: int
    dst: int
    paused: bool  # the final stage began: the request is out of S's batch


class Cluster(NamedTuple):
    inst: tuple[int, ...]
    reqs: tuple[Rq, ...]
    migs: tuple[Mg, ...]  # sorted; at most one per request


@dataclass(frozen=True)
class ClusterResult:
    limit: int
    states: int
    rounds: int  # scheduler rounds taken (pairs decided)
    faults: tuple[str, ...]  # scheduler safety violated (with the path to it)
    missed: tuple[str, ...]  # coverage goals never reached (vacuity)


def _count(c: Cluster, i: int) -> int:
    return sum(m.src == i or m.dst == i for m in c.migs)


@functools.lru_cache(maxsize=None)
def _pairings(sched: Scheduler, inst: tuple[int, ...], preempted: tuple[bool, ...],
              busy: tuple[bool, ...]) -> tuple[tuple[tuple[tuple[int, int], ...], tuple[str, ...]], ...]:
    """Every distinct round of `pair_instances` over these instances: each serving instance
    reports any freeness around the threshold (reports are stale anyway; a draining one reports
    TERMINATING, as `migration_freeness` does), with the faults of each."""
    serving = [i for i, st in enumerate(inst) if st != DEAD]
    out: dict[tuple[tuple[int, int], ...], tuple[str, ...]] = {}
    for fs in itertools.product((-1.0, 0.0, 1.0), repeat=len(serving)):
        loads = [MigrationLoad(i, TERMINATING if inst[i] == DRAINING else f, preempted[i],
                               busy[i], inst[i] == DRAINING) for i, f in zip(serving, fs)]
        pairs = tuple(sched.pair(loads, THRESHOLD))
        if pairs and pairs not in out:
            out[pairs] = tuple(pairing_faults(loads, pairs))
    return tuple(out.items())


def _round_outcomes(c: Cluster, limit: int, sched: Scheduler
                    ) -> Iterator[tuple[list[str], Cluster]]:
    """Every scheduler round: pairs from `pair_instances`, each source's request from
    `choose_request` (LCFS: the request that arrived last), as the simulator's round does."""
    n = range(len(c.inst))
    preempted = tuple(any(r.at == i and r.phase == WAITING for r in c.reqs) for i in n)
    busy = tuple(_count(c, i) >= limit for i in n)
    for pairs, pair_faults in _pairings(sched, c.inst, preempted, busy):
        faults = list(pair_faults)
        migs = list(c.migs)
        for src, dst in pairs:
            moving = {m.req for m in migs}
            cands = [Candidate(r, 1 + r, r, False, r in moving, r)
                     for r, q in enumerate(c.reqs) if q.at == src and q.phase == RUNNING
                     and not any(m.req == r and m.paused for m in migs)]
            rid = sched.choose(cands, "lcfs")
            faults += selection_faults(cands, "lcfs", rid)
            if rid is not None:
                migs.append(Mg(rid, src, dst, False))
        after = c._replace(migs=tuple(sorted(migs)))
        faults += [f"instance {i} in {_count(after, i)} migrations (limit {limit})"
                   for i in n if _count(after, i) > limit]
        faults += [f"migration to {'dead' if c.inst[d] == DEAD else 'draining'} instance {d}"
                   for _, _, d, _ in set(after.migs) - set(c.migs) if c.inst[d] != UP]
        yield faults, after


def _steps(c: Cluster, limit: int, sched: Scheduler) -> Iterator[tuple[str, list[str], Cluster]]:
    """Every step of the cluster model from c: (label, scheduler faults, next state)."""
    for faults, nxt in _round_outcomes(c, limit, sched):
        yield "round", faults, nxt
    reqs, migs = list(c.reqs), list(c.migs)

    def with_(rs: list[Rq] | None = None, ms: list[Mg] | None = None,
              inst: tuple[int, ...] | None = None) -> Cluster:
        return Cluster(inst or c.inst, tuple(rs if rs is not None else reqs),
                       tuple(sorted(ms if ms is not None else migs)))

    mig_of = {m.req: m for m in migs}
    for r, q in enumerate(reqs):
        if q.phase in (DONE, LOST) or c.inst[q.at] == DEAD:
            continue
        m = mig_of.get(r)
        others = [x for x in migs if x.req != r]
        gone = reqs[:r] + [Rq(-1, DONE, 0)] + reqs[r + 1:]
        yield "client_abort", [], with_(gone, others)  # at every point; its migration aborts
        if q.phase == RUNNING and not (m and m.paused):
            yield "preempt", [], with_(reqs[:r] + [q._replace(phase=WAITING)] + reqs[r + 1:])
        if q.phase == WAITING:
            yield "readmit", [], with_(reqs[:r] + [q._replace(phase=RUNNING)] + reqs[r + 1:])
    for m in migs:
        others = [x for x in migs if x != m]
        q = reqs[m.req]
        s_dead, d_dead = c.inst[m.src] == DEAD, c.inst[m.dst] == DEAD
        # S's checks, D's refusal, a timeout, D's death; a dead S's paused request is lost
        lost = reqs[:m.req] + [Rq(-1, LOST, 0)] + reqs[m.req + 1:]
        yield "abort", [], with_(lost if s_dead else reqs, others)
        if not m.paused and q.phase == RUNNING and not s_dead:
            yield "pause", [], with_(ms=others + [m._replace(paused=True)])
        if m.paused and not d_dead:  # D commits (S may have died after sending the commit)
            moved = reqs[:m.req] + [Rq(m.dst, RUNNING, min(q.moved + 1, 2))] + reqs[m.req + 1:]
            yield "commit", [], with_(moved, others)
        if m.paused and d_dead and not s_dead:  # commit outcome unknown: S drops its copy
            yield "drop", [], with_(lost, others)
    crashed, drained = DEAD in c.inst, DRAINING in c.inst  # one crash, one drain per run
    for i, st in enumerate(c.inst):
        if st == UP and not drained:
            yield "drain", [], with_(inst=c.inst[:i] + (DRAINING,) + c.inst[i + 1:])
        if st == DEAD or crashed:
            continue
        # the requests on i are lost, but for a paused one D may still commit
        paused = {m.req for m in migs if m.src == i and m.paused}
        lost_here = [Rq(-1, LOST, 0) if q.at == i and q.phase in (RUNNING, WAITING)
                     and r not in paused else q for r, q in enumerate(reqs)]
        yield "crash", [], with_(lost_here, [x for x in migs if x.src != i or x.paused],
                                 c.inst[:i] + (DEAD,) + c.inst[i + 1:])


COVERAGE: dict[str, Callable[[Cluster, int], bool]] = {
    "two migrations at once": lambda c, lim: lim < 2 or len(c.migs) >= 2,
    "in and out of one instance at once": lambda c, lim: lim < 2 or any(
        {m.src for m in c.migs} & {m.dst for m in c.migs}),
    "re-migration": lambda c, lim: any(q.moved >= 2 for q in c.reqs),
    "a migrating request paused": lambda c, lim: any(m.paused for m in c.migs),
    "migration off a draining instance": lambda c, lim: any(c.inst[m.src] == DRAINING
                                                            for m in c.migs),
    "migration whose destination died": lambda c, lim: any(c.inst[m.dst] == DEAD for m in c.migs),
    "a migrating request preempted": lambda c, lim: any(c.reqs[m.req].phase == WAITING
                                                        for m in c.migs),
}


def _initial_clusters(instances: int, requests: int) -> list[Cluster]:
    """Every request running on instance 0 (so it can migrate several out at once), or each on
    its own instance; the rest (waiting requests, other placements) is reached from these."""
    spread = tuple(Rq(r % instances, RUNNING, 0) for r in range(requests))
    packed = tuple(Rq(0, RUNNING, 0) for _ in range(requests))
    return [Cluster((UP,) * instances, reqs, ()) for reqs in dict.fromkeys((packed, spread))]


@functools.lru_cache(maxsize=8)
def explore_cluster(limit: int, instances: int = 3, requests: int = 2,
                    sched: Scheduler = REAL) -> ClusterResult:
    """Breadth-first over the cluster model; every scheduler round's decisions checked."""
    start = _initial_clusters(instances, requests)
    parent: dict[Cluster, tuple[Cluster, str] | None] = dict.fromkeys(start)
    queue = deque(start)
    faults: list[str] = []
    missed = dict(COVERAGE)
    rounds = 0
    while queue:
        c = queue.popleft()
        for goal_name in [g for g, f in missed.items() if f(c, limit)]:
            del missed[goal_name]
        for label, found, nxt in _steps(c, limit, sched):
            rounds += label == "round"
            if found:
                faults += [f"{f} (after {_path(parent, c)} round)" for f in found]
            if nxt not in parent:
                parent[nxt] = (c, label)
                queue.append(nxt)
    return ClusterResult(limit, len(parent), rounds, tuple(dict.fromkeys(faults)), tuple(missed))


def _path(parent: dict[Cluster, tuple[Cluster, str] | None], c: Cluster) -> str:
    labels = []
    step = parent[c]
    while step is not None:
        labels.append(step[1])
        step = parent[step[0]]
    return ", ".join(reversed(labels)) + ("," if labels else "")


LIMITS: tuple[int, ...] = (1, 2)


# ---- seeded scheduler bugs: each must be caught ------------------------------------------------

def _pair_with(source: Callable[[MigrationLoad, float], bool] | None = None,
               destination: Callable[[MigrationLoad, float], bool] | None = None,
               forget_busy: bool = False) -> Callable[..., list[tuple[int, int]]]:
    """`pair_instances` itself with one of its tests replaced, or fed loads without busy marks."""
    def pair(loads: Sequence[MigrationLoad], threshold: float,
             busy_first: bool = False) -> list[tuple[int, int]]:
        if forget_busy:
            loads = [dataclasses.replace(load, migrating=False) for load in loads]
        with mock.patch.object(pairing, "is_source", source or pairing.is_source), \
                mock.patch.object(pairing, "is_destination", destination or pairing.is_destination):
            return pair_instances(loads, threshold, busy_first)
    return pair


def _choose_ignoring_migration(cands: Sequence[Candidate], selection: str = "lcfs") -> int | None:
    return choose_request([dataclasses.replace(c, migrating=False) for c in cands], selection)


SCHEDULER_MUTANTS: dict[str, tuple[str, Scheduler]] = {
    "pair_overlapping_boundary": (
        "source F <= T and destination F >= T (HEAD's inverted comparison, H-HEAD-10): an "
        "instance at the threshold is both",
        Scheduler(pair=_pair_with(
            source=lambda x, t: x.terminating or x.has_preempted or x.freeness <= t,
            destination=lambda x, t: not x.terminating and not x.has_preempted and x.freeness >= t))),
    "pair_forgets_busy": (
        "the round's loads lose the busy marks (a stale report): a migrating instance is paired",
        Scheduler(pair=_pair_with(forget_busy=True))),
    "destination_ignores_drain": (
        "the destination test forgets `not terminating`: a draining instance whose report is not "
        "yet the sentinel receives a request",
        Scheduler(pair=_pair_with(
            destination=lambda x, t: not x.has_preempted and x.freeness > t))),
    "choose_migrating_request": (
        "the selection forgets `not migrating`: a request already migrating is chosen again",
        Scheduler(choose=_choose_ignoring_migration)),
}


def scheduler_mutant_kills() -> dict[str, bool]:
    """Each seeded scheduler bug: caught by the exhaustive inputs or the cluster model? Then each
    seeded intent slip (models/intent.py), which these miss: caught by an intent property?"""
    return {**{name: bool(scheduler_inputs(sched=sched, first_fault=True)[1] or explore_cluster(1, sched=sched).faults)
               for name, (_, sched) in SCHEDULER_MUTANTS.items()}, **intent_mutant_kills()}
