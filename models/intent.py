"""Scheduler intent: where the shared scheduler (llumverify/scheduler) sends load, stated once.

models/scope.py checks that the scheduler never does something unsafe (self-pairing, a busy or
draining destination). Intent is the stronger claim that it does what the rule (LLUMNIX.md §3-4)
says. Each property is one predicate over (instance loads, decision), written from the rule's
text, not from the code (docs/protocol.md, "Scheduler intent"):

- `dispatch_freest`: least-loaded / llumnix dispatch sends a request to an instance of highest
  dispatch freeness F_d among the non-draining ones (all, if every one drains), ties to the
  lowest id.
- `pd_decode_target`: a prefilled request goes to the non-draining decode instance of highest
  F_d, ties to the lowest id; to none only when every decode instance drains.
- `pair_roles`: a pair's source is terminating, preempted or has F_m < T; its destination is
  not terminating, has nothing preempted and F_m > T (strictly, both); never itself, each
  instance in at most one pair of a round.
- `pair_order`: the k-th lowest-F_m source (ties by id) pairs with the k-th highest-F_m
  destination (ties by id), among all instances (the artifact's rule; busy ones are ranked, and
  the pair is then skipped) or among the idle ones (HEAD's `busy_first`).
- `trigger`: a round starts exactly the migrations the rule names: one per rank k below
  min(#sources, #destinations) whose source and destination are both idle, and no other.
- `watermark`: freeness counts only blocks above the watermark (F computed with free f and
  watermark w equals F with free f - w and no watermark), so neither dispatch nor pairing counts
  the reserve as room; and D's first pre-allocation never leaves it with fewer free blocks
  than its watermark (the protocol's `d_alloc_ok`, every variant).
- `migratable_private` (issue 27 item 2): a request may be chosen for migration only when every
  prefix-cached block it pins has refcount 1 (its own), and whenever that holds: a migration
  never takes a shared block (vllm-v1; sim/engine_v1.py calls scheduler/selection.py's rule).

How each is checked (`check_intent`): the per-instance rules (roles, the watermark arithmetic,
the pre-allocation) by Z3 on the real functions run over symbolic values, so for any loads and
any number of instances; the choices (argmax, sort-and-zip) by running the real functions on
every order type of up to `instances` loads (5 by default). They compare loads only with each
other and with T, so an order type (the weak order of the values and T, plus flags and ids)
stands for every input with that order; Z3 cannot run a Python sort over a symbolic number of
instances, hence the bound (and the lemmas in `order_lemmas`, proved for any number).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import z3

from llumverify.requests import HIGH, RequestSpec
from llumverify.scheduler import pairing
from llumverify.scheduler.dispatch import least_loaded
from llumverify.scheduler import freeness
from llumverify.scheduler.freeness import dispatch_freeness, migration_freeness
from llumverify.scheduler.pairing import MigrationLoad, pair_instances
from llumverify.scheduler.pd import decode_target
from llumverify.scheduler.selection import migratable
from llumverify.scheduler.snapshot import InstanceSnapshot

INTENT: tuple[str, ...] = ("dispatch_freest", "pd_decode_target", "pair_roles", "pair_order",
                           "trigger", "watermark", "migratable_private")


def _interpreted(module: ModuleType) -> ModuleType:
    """`module` run from its source file. The checker evaluates the freeness functions on Z3 terms,
    which the mypyc-compiled build (setup.py) refuses (its arithmetic takes machine numbers); the
    simulator keeps running the compiled module, built from the same source."""
    path = Path(module.__file__ or "").parent / (module.__name__.rsplit(".", 1)[1] + ".py")
    spec = importlib.util.spec_from_file_location(f"{module.__name__}_interpreted", path)
    assert spec is not None and spec.loader is not None
    out = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(out)
    return out


_FREENESS = _interpreted(freeness)


class Subject(NamedTuple):
    """The functions whose intent is checked: the simulator's, or a seeded slip's."""

    dispatch: Callable[[Sequence[InstanceSnapshot], RequestSpec], int] = least_loaded
    decode: Callable[[Sequence[InstanceSnapshot], RequestSpec], int | None] = decode_target
    pair: Callable[..., list[tuple[int, int]]] = pair_instances
    is_source: Callable[[MigrationLoad, float], bool] = pairing.is_source
    is_destination: Callable[[MigrationLoad, float], bool] = pairing.is_destination
    dispatch_freeness: Callable[..., float] = _FREENESS.dispatch_freeness
    migration_freeness: Callable[..., float] = _FREENESS.migration_freeness
    migratable: Callable[[Sequence[int]], bool] = migratable


REAL = Subject()
NORMAL = RequestSpec(id=0, arrival_s=0.0, prompt_tokens=16, output_tokens=1)


# ---- the intent predicates: (loads, decision) -> faults, each tagged with its property ---------

def freest_faults(snaps: Sequence[InstanceSnapshot], request: RequestSpec, target: int | None,
                  fallback: bool) -> list[str]:
    """`target` has the highest F_d among the non-draining instances (fallback: all of them when
    every one drains; else none), ties to the lowest id."""
    live = [s for s in snaps if not s.terminating] or (list(snaps) if fallback else [])
    if not live:
        return [] if target is None else [f"sent to {target} though every instance drains"]
    f = {s.instance: dispatch_freeness(s, request.priority) for s in live}
    if target not in f:
        return [f"sent to {target}, not a serving instance ({sorted(f)} are)"]
    best = max(f.values())
    first = min(i for i, x in f.items() if x == best)
    if f[target] < best:
        return [f"sent to {target} (F_d {f[target]}) though {first} is freer (F_d {best})"]
    return [] if target == first else [f"tie at F_d {best} broken to {target}, not the lowest id {first}"]


def _ranks(loads: Sequence[MigrationLoad], key: Callable[[MigrationLoad], tuple[float, int]]
           ) -> dict[int, int]:
    """Each load's rank under `key` (0: first): how many loads come strictly before it (a
    bisection in the sorted keys: the bounded check ranks a million rounds)."""
    keys = [key(x) for x in loads]
    ordered = sorted(keys)
    return {x.instance: bisect_left(ordered, k) for x, k in zip(loads, keys)}


def pairing_faults(loads: Sequence[MigrationLoad], threshold: float, busy_first: bool,
                   pairs: Sequence[tuple[int, int]]) -> dict[str, list[str]]:
    """The pairing rule's intent for one round, per property (see the module doc)."""
    out: dict[str, list[str]] = {"pair_roles": [], "pair_order": [], "trigger": []}
    by_id = {x.instance: x for x in loads}
    ranked = [x for x in loads if not (busy_first and x.migrating)]
    src = [x for x in ranked if x.terminating or x.has_preempted or x.freeness < threshold]
    dst = [x for x in ranked if not x.terminating and not x.has_preempted and x.freeness > threshold]
    src_rank = _ranks(src, lambda x: (x.freeness, x.instance))
    dst_rank = _ranks(dst, lambda x: (-x.freeness, x.instance))
    used = [i for p in pairs for i in p]
    if len(used) != len(set(used)):
        out["pair_roles"].append(f"an instance in two pairs of one round: {list(pairs)}")
    for s, d in pairs:
        if s not in src_rank:
            out["pair_roles"].append(f"source {s} ({by_id.get(s)}) is not a source at T={threshold}")
        if d not in dst_rank:
            out["pair_roles"].append(f"destination {d} ({by_id.get(d)}) is not a destination at T={threshold}")
        if s in src_rank and d in dst_rank and src_rank[s] != dst_rank[d]:
            out["pair_order"].append(f"source {s} (rank {src_rank[s]} by lowest F_m) paired with "
                                     f"destination {d} (rank {dst_rank[d]} by highest F_m)")
    by_rank = {k: i for i, k in dst_rank.items()}
    named = {(s, by_rank[k]) for s, k in src_rank.items() if k in by_rank
             and not by_id[s].migrating and not by_id[by_rank[k]].migrating}
    if named != set(pairs):
        out["trigger"].append(f"round started {sorted(pairs)}; the rule names {sorted(named)}")
    return out


# ---- bounded: every order type of up to `instances` loads ---------------------------------------

def _weak_orders(n: int) -> Iterator[tuple[int, ...]]:
    """Every weak order of n labelled values, as levels 0..k-1 with every level used."""
    for levels in itertools.product(range(n), repeat=n):
        if set(levels) == set(range(max(levels) + 1)):
            yield levels


def _snapshot(i: int, level: float, terminating: bool) -> InstanceSnapshot:
    """An instance whose F_d and F_m are exactly `level` (one running request, no watermark)."""
    return InstanceSnapshot(i, 1000, 0, int(level), 1, 0, 0.0, 0, terminating=terminating)


# Per-instance kinds for pairing: (preempted, migrating, terminating). A terminating instance reports
# F = -1000 (freeness.TERMINATING); one still reporting its old F is the drain's first round.
KINDS: tuple[tuple[bool, bool, bool], ...] = ((False, False, False), (True, False, False),
                                              (False, True, False), (False, False, True))


@dataclass(frozen=True)
class IntentResult:
    name: str
    holds: bool
    how: str  # "Z3, any number of instances" or the bound
    checked: int  # inputs (bounded) or Z3 queries
    faults: tuple[str, ...] = ()
    unbounded: bool = False  # every part checked on the real code for any number of instances

    @property
    def verdict(self) -> str:
        """PROVED only when the real code was checked for any input (the legend's meaning). A
        lemma over the choice's shape does not make a bounded run of the code a proof: a slip that
        shows only past the bound (a loop stopping at 5) would pass it, so that row says HOLDS."""
        return "VIOLATED" if not self.holds else "PROVED" if self.unbounded else "HOLDS"


def _bounded_choices(subject: Subject, instances: int) -> dict[str, tuple[int, list[str]]]:
    """dispatch_freest and pd_decode_target on every weak order of F_d of 1..instances, every set
    of draining instances, both request classes' penalty absent (loads carry no priority)."""
    out: dict[str, tuple[int, list[str]]] = {"dispatch_freest": (0, []), "pd_decode_target": (0, [])}
    for n in range(1, instances + 1):
        for levels in _weak_orders(n):
            for drain in itertools.product((False, True), repeat=n):
                snaps = [_snapshot(i, lv, d) for i, (lv, d) in enumerate(zip(levels, drain))]
                for name, fn, fallback in (("dispatch_freest", subject.dispatch, True),
                                           ("pd_decode_target", subject.decode, False)):
                    count, faults = out[name]
                    faults += freest_faults(snaps, NORMAL, fn(snaps, NORMAL), fallback)
                    out[name] = (count + 1, faults)
    return out


def _bounded_pairing(subject: Subject, instances: int, flagged: int, flagged_within: int
                     ) -> dict[str, tuple[int, list[str]]]:
    """pair_roles, pair_order and trigger on every weak order of F_m of 1..instances loads, T at
    every level and between levels, both rules; with up to `flagged` instances preempted, busy
    or draining (every combination) when there are at most `flagged_within` loads."""
    faults: dict[str, list[str]] = {k: [] for k in ("pair_roles", "pair_order", "trigger")}
    rounds_checked = 0
    for n in range(1, instances + 1):
        most = flagged if n <= flagged_within else 0
        kinds = [ks for ks in itertools.product(KINDS, repeat=n) if sum(k != KINDS[0] for k in ks) <= most]
        for levels in _weak_orders(n):
            top = max(levels)
            # the loads of each kind vector, made once for every threshold (tuples: shared, so read-only)
            rounds = [tuple(MigrationLoad(i, float(lv), pre, mig, term)
                            for i, (lv, (pre, mig, term)) in enumerate(zip(levels, ks))) for ks in kinds]
            for t2 in range(-1, 2 * top + 2):
                t = t2 / 2
                for loads in rounds:
                    for busy_first in (False, True):
                        found = pairing_faults(loads, t, busy_first, subject.pair(loads, t, busy_first))
                        rounds_checked += 1
                        for name, fs in found.items():
                            if fs:
                                faults[name] += fs
    return {name: (rounds_checked, fs) for name, fs in faults.items()}


# ---- Z3: the per-instance rules for any values ---------------------------------------------------

def _valid(claim: z3.BoolRef) -> bool:
    s = z3.Solver()
    s.add(z3.Not(claim))
    return s.check() == z3.unsat


def roles_symbolic(subject: Subject) -> tuple[int, list[str]]:
    """is_source / is_destination, run on a symbolic F_m and T for each flag combination, are
    exactly the rule's roles (strict comparisons), so no instance is both (no self-pairing)."""
    f, t = z3.Reals("F T")
    faults, queries = [], 0
    for pre, term in itertools.product((False, True), repeat=2):
        load = MigrationLoad(0, f, pre, False, term)  # type: ignore[arg-type]  # symbolic F_m
        src, dst = subject.is_source(load, t), subject.is_destination(load, t)  # type: ignore[arg-type]
        want_src = z3.BoolVal(True) if pre or term else f < t
        want_dst = z3.BoolVal(False) if pre or term else f > t
        for what, got, want in (("source", src, want_src), ("destination", dst, want_dst)):
            queries += 1
            if not _valid(z3.simplify(z3.BoolVal(got) if isinstance(got, bool) else got) == want):
                faults.append(f"is_{what} (preempted={pre}, terminating={term}) is not the rule's")
    return queries, faults


def watermark_symbolic(subject: Subject) -> tuple[int, list[str]]:
    """F_d and F_m with free f and watermark w equal F with free f - w and watermark 0, for
    symbolic f, w, T, waiting blocks and head (every priority case; R and Q in 0..2: the
    division by them is exact real arithmetic either way)."""
    free, wm, total, wall, head = z3.Reals("free wm T Wall head")  # true division, as Python's /
    faults, queries = [], 0
    for r, q, hosts, prio, head_only in itertools.product(range(3), range(3), (False, True),
                                                          (0, HIGH), (False, True)):
        if r + q == 0:
            continue
        def snap(fb: z3.ArithRef, w: z3.ArithRef | int) -> InstanceSnapshot:
            return InstanceSnapshot(0, total, w, fb, r, q, wall, head, hosts_priority=hosts)  # type: ignore[arg-type]
        for name, fn in (("F_d", lambda s: subject.dispatch_freeness(s, prio)),
                         ("F_m", lambda s: subject.migration_freeness(s, head_only))):
            queries += 1
            if not _valid(fn(snap(free, wm)) == fn(snap(free - wm, 0))):
                faults.append(f"{name} (R={r}, Q={q}, [P]={hosts}) counts blocks below the watermark")
    return queries, sorted(set(faults))


def prealloc_symbolic() -> tuple[int, list[str]]:
    """Every variant's d_alloc_ok: accepted on the first call, D keeps at least its watermark free."""
    from llumverify.models.encoding import POST, PRE, encode
    from llumverify.protocol.variants import VARIANTS
    faults = []
    for v in VARIANTS.values():
        rel = encode(v).relations["d_alloc_ok"]
        if not _valid(z3.Implies(z3.And(rel, PRE.stage == 0), POST.d_free >= POST.wm)):
            faults.append(f"{v.name}: the first pre-allocation leaves D below its watermark")
    return len(VARIANTS), faults


def migratable_explicit(subject: Subject, blocks: int = 4, refs: int = 3) -> tuple[int, list[str]]:
    """Every refcount vector of 0..`blocks` pinned blocks, each used by 1..`refs` requests: the
    request may migrate exactly when no pinned block is shared. The rule reads each count alone
    (one comparison per block), so 4 blocks and counts up to 3 cover each position's cases."""
    faults, checked = [], 0
    for n in range(blocks + 1):
        for counts in itertools.product(range(1, refs + 1), repeat=n):
            checked += 1
            if subject.migratable(counts) != all(c == 1 for c in counts):
                faults.append(f"refcounts {list(counts)}: migratable={subject.migratable(counts)}")
    return checked, faults


def order_lemmas() -> tuple[int, list[str]]:
    """The two choice shapes, for any number of instances (Z3 over symbolic arrays):
    - argmax scan (`least_loaded`'s loop: replace when F > best, or F == best and a lower id):
      its invariant "best is a highest F among 0..i-1, the lowest id among those" is inductive,
      so at the end it is the rule's choice;
    - sort and zip (`pair_instances`): if S is sorted ascending and D descending by a strict
      key, the pair at index k has rank k on both sides."""
    F = z3.Array("F", z3.IntSort(), z3.RealSort())
    i, b, j, k, m = z3.Ints("i b j k m")
    inv = lambda n, best: z3.And(0 <= best, best < n, z3.ForAll(  # noqa: E731
        j, z3.Implies(z3.And(0 <= j, j < n), z3.Or(F[j] < F[best], z3.And(F[j] == F[best], j >= best)))))
    nxt = z3.If(z3.Or(F[i] > F[b], z3.And(F[i] == F[b], i < b)), i, b)
    faults = []
    if not _valid(z3.Implies(z3.And(i >= 1, inv(i, b)), inv(i + 1, nxt))):
        faults.append("argmax scan: invariant not inductive")
    if not _valid(z3.Implies(i == 0, inv(1, z3.IntVal(0)))):
        faults.append("argmax scan: invariant does not hold after the first instance")
    key = z3.Array("key", z3.IntSort(), z3.RealSort())
    sorted_ = z3.ForAll([j, i], z3.Implies(z3.And(0 <= j, j < i, i < m), key[j] < key[i]))
    # rank k: exactly the indices below k come before it (the rule's "k-th lowest")
    rank = z3.ForAll(j, z3.Implies(z3.And(0 <= j, j < m), (key[j] < key[k]) == (j < k)))
    if not _valid(z3.Implies(z3.And(sorted_, 0 <= k, k < m), rank)):
        faults.append("sort and zip: index k is not rank k")
    return 3, faults


# ---- all of it --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def check_intent(subject: Subject = REAL, instances: int = 5, flagged: int = 1,
                 flagged_within: int = 4) -> tuple[IntentResult, ...]:
    """Every intent property for `subject`: bounded parts up to `instances` loads, of which up to
    `flagged` are preempted, busy or draining when there are at most `flagged_within` (the
    default keeps `check` fast; tests/test_models_intent.py runs 5, 2, 5 as a slow test)."""
    bound = f"bounded: every order type of 1..{instances} instances"
    choices = _bounded_choices(subject, instances)
    pairs = _bounded_pairing(subject, instances, flagged, flagged_within)
    flags = f"{flagged} preempted, busy or draining among <= {flagged_within}"
    roles_q, roles_f = roles_symbolic(subject)
    wm_q, wm_f = watermark_symbolic(subject)
    pre_q, pre_f = prealloc_symbolic()
    lem_q, lem_f = order_lemmas()
    first = lambda fs: list(dict.fromkeys(fs))[:3]  # noqa: E731  # the first distinct faults
    out = [IntentResult(n, not fs and not lem_f, f"{bound}; the argmax shape's lemma for any number, Z3", c,
                        tuple(first(fs) + lem_f)) for n, (c, fs) in choices.items()]
    c, fs = pairs["pair_roles"]
    out.append(IntentResult("pair_roles", not fs and not roles_f,
                            f"{bound}, {flags}; each role by Z3 for any number", c + roles_q,
                            tuple(roles_f + first(fs))))
    for n in ("pair_order", "trigger"):
        c, fs = pairs[n]
        out.append(IntentResult(n, not fs and not lem_f, f"{bound}, {flags}; the sort-and-zip "
                                f"shape's lemma for any number, Z3", c, tuple(first(fs) + lem_f)))
    out.append(IntentResult("watermark", not wm_f and not pre_f, "Z3, any values and instances",
                            wm_q + pre_q, tuple(wm_f + pre_f), unbounded=True))
    mig_c, mig_f = migratable_explicit(subject)
    out.append(IntentResult("migratable_private", not mig_f, "bounded: every refcount vector of <= 4 blocks",
                            mig_c, tuple(first(mig_f))))
    return tuple(out)


def render_intent(results: Sequence[IntentResult]) -> str:
    """One line per intent property (what `llumverify check` prints)."""
    lines = ["scheduler intent (models/intent.py; docs/protocol.md, Scheduler intent):"]
    for r in results:
        lines.append(f"  {r.name:<22} {r.verdict} ({r.how}; {r.checked:,} checked)")
        lines += [f"    {f}" for f in r.faults]
    return "\n".join(lines)


# ---- seeded slips: each escapes models/scope.py's safety check, and intent must catch it ----------

def _pair_by(source_key: Callable[[MigrationLoad], tuple[float, int]] | None = None,
             pairs_dropped: int = 0) -> Callable[..., list[tuple[int, int]]]:
    """`pair_instances` with its source order replaced, or its last pairs dropped."""
    def pair(loads: Sequence[MigrationLoad], threshold: float, busy_first: bool = False) -> list[tuple[int, int]]:
        cands = [x for x in loads if not x.migrating] if busy_first else list(loads)
        srcs = sorted((x for x in cands if pairing.is_source(x, threshold)),
                      key=source_key or (lambda x: (x.freeness, x.instance)))
        dsts = sorted((x for x in cands if pairing.is_destination(x, threshold)),
                      key=lambda x: (-x.freeness, x.instance))
        n = max(0, min(len(srcs), len(dsts)) - pairs_dropped)
        return [(s.instance, d.instance) for s, d in list(zip(srcs, dsts))[:n]
                if not s.migrating and not d.migrating]
    return pair


def _with_roles(source: Callable[[MigrationLoad, float], bool]) -> Subject:
    def pair(loads: Sequence[MigrationLoad], threshold: float, busy_first: bool = False) -> list[tuple[int, int]]:
        from unittest import mock
        with mock.patch.object(pairing, "is_source", source):
            return pair_instances(loads, threshold, busy_first)
    return REAL._replace(pair=pair, is_source=source)


def _second_freest(snaps: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    live = [s for s in snaps if not s.terminating] or list(snaps)
    ranked = sorted(live, key=lambda s: (-dispatch_freeness(s, request.priority), s.instance))
    return ranked[min(1, len(ranked) - 1)].instance


def _busiest_decode(decode: Sequence[InstanceSnapshot], request: RequestSpec) -> int | None:
    live = [s for s in decode if not s.terminating]
    return min(live, key=lambda s: (dispatch_freeness(s, request.priority), s.instance)).instance if live else None


def _ties_to_highest(snaps: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    live = [s for s in snaps if not s.terminating] or list(snaps)
    return max(live, key=lambda s: (dispatch_freeness(s, request.priority), s.instance)).instance


def _no_watermark(fn: Callable[..., float]) -> Callable[..., float]:
    return lambda s, *a: fn(s._replace(watermark_blocks=0), *a)


INTENT_MUTANTS: dict[str, tuple[str, Subject]] = {
    "pair_sources_most_free_first": (
        "sources sorted descending: the least overloaded source gets the freest destination",
        REAL._replace(pair=_pair_by(source_key=lambda x: (-x.freeness, x.instance)))),
    "pair_source_at_threshold": (
        "source test F <= T (an instance exactly at the threshold sheds load)",
        _with_roles(lambda x, t: x.terminating or x.has_preempted or x.freeness <= t)),
    "pair_threshold_off_by_one": (
        "source test F < T + 1 (the threshold shifted by one block per request)",
        _with_roles(lambda x, t: x.terminating or x.has_preempted or x.freeness < t + 1)),
    "pair_drops_last_pair": (
        "zip stops one short: the last source/destination pair of a round never migrates",
        REAL._replace(pair=_pair_by(pairs_dropped=1))),
    "dispatch_second_freest": (
        "dispatch takes the second-freest instance",
        REAL._replace(dispatch=_second_freest)),
    "dispatch_ties_to_highest_id": (
        "dispatch breaks F_d ties to the highest id (max over (F, id))",
        REAL._replace(dispatch=_ties_to_highest)),
    "pd_busiest_decode": (
        "P/D hands a prefilled request to the busiest decode instance",
        REAL._replace(decode=_busiest_decode)),
    "freeness_ignores_watermark": (
        "F_d and F_m count free blocks, not free minus the watermark",
        REAL._replace(dispatch_freeness=_no_watermark(_FREENESS.dispatch_freeness),
                      migration_freeness=_no_watermark(_FREENESS.migration_freeness))),
    "migratable_any_private": (
        "all() written any(): one private block makes a request sharing others migratable",
        REAL._replace(migratable=lambda refs: any(n == 1 for n in refs) or not refs)),
    "migratable_shared_by_two": (
        "refcount <= 2 allowed (the migrant's own reference and the prefix cache's, miscounted)",
        REAL._replace(migratable=lambda refs: all(n <= 2 for n in refs))),
}


def intent_mutant_kills() -> dict[str, bool]:
    """Each seeded slip: does some intent property fail for it (at 4 instances, 1 flagged)?"""
    return {name: not all(r.holds for r in check_intent(subject, 4, 1, 4))
            for name, (_, subject) in INTENT_MUTANTS.items()}

