"""The unbounded proof: Houdini over candidate invariants, checked action by action.

Method (chosen over Spacer/CHC because it is predictable in time and its result is readable):
the candidates are the safety properties, the domain constraints and the lemmas of
models/lemmas.py. Repeatedly drop every candidate that fails Init => c, or fails
Inv /\\ T_a => c' for some action a (Inv = conjunction of the surviving candidates). The
survivors form an inductive invariant. A property is PROVED if Inv => P and, for a property with
a step predicate, Inv /\\ T => step(pre, post) (one query over the whole transition relation).
Capacities, block size,
watermark, threshold, request length and token counts are unconstrained integers, so the proof
holds for any number of blocks and tokens.

Each failing check yields a model; every candidate false in it is dropped at once, so the number
of solver calls grows with the number of rounds, not the number of candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import z3

from llumverify.protocol.ops import Val
from llumverify.protocol.state import State
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import encode
from llumverify.models.lemmas import PROTOCOL_LEMMAS, VARIANT_LEMMAS, domain_lemmas

Pred = Callable[[State], Val]
StepPred = Callable[[State, State], Val]


@dataclass(frozen=True)
class Proof:
    invariant: tuple[str, ...]  # surviving candidates (an inductive invariant)
    predicates: tuple[Pred, ...]  # the same, as predicates
    proved: frozenset[str]  # properties implied by it


def _drop_false(model: z3.ModelRef, terms: Mapping[str, z3.BoolRef], live: dict[str, None]) -> None:
    for name in list(live):
        if z3.is_false(model.eval(terms[name], model_completion=True)):
            del live[name]


def houdini(v: Variant, candidates: Mapping[str, Pred]) -> tuple[str, ...]:
    """The largest subset of candidates that is inductive for the variant."""
    enc = encode(v)
    pre = {n: z3.And(c(enc.pre)) for n, c in candidates.items()}
    post = {n: z3.And(c(enc.post)) for n, c in candidates.items()}
    flags = {n: z3.Bool(f"cand!{n}") for n in candidates}
    live = dict.fromkeys(candidates)  # ordered: Z3's queries (and models) must not depend on str hashing

    init = z3.Solver()
    init.add(enc.init)
    while init.check(z3.Not(z3.And(*(pre[n] for n in live)))) == z3.sat:
        _drop_false(init.model(), pre, live)

    solvers = []
    guarded = [z3.Implies(flags[n], pre[n]) for n in candidates]  # the same terms in every solver: built once
    for rel in enc.relations.values():
        s = z3.Solver()
        s.add(rel, *guarded)
        solvers.append(s)
    changed = True
    query, query_of = [], -1  # the assumptions and goal for the live set (it only shrinks: its size names it)
    while changed:
        changed = False
        for s in solvers:
            while True:
                if query_of != len(live):
                    query, query_of = [*(flags[n] for n in live), z3.Not(z3.And(*(post[n] for n in live)))], len(live)
                if s.check(*query) != z3.sat:
                    break
                before = len(live)
                _drop_false(s.model(), post, live)
                changed = changed or len(live) < before
    return tuple(n for n in candidates if n in live)


def candidates_for(v: Variant, properties: Mapping[str, Pred]) -> dict[str, Pred]:
    """Houdini's candidates for a variant: domain constraints, lemmas, then the properties."""
    return {**domain_lemmas(), **PROTOCOL_LEMMAS, **VARIANT_LEMMAS.get(v.name, {}), **properties}


def prove(v: Variant, properties: Mapping[str, Pred],
          steps: Mapping[str, StepPred] | None = None) -> Proof:
    """Which properties hold in every reachable state (and, for those in `steps`, on every
    reachable step), for all sizes (unbounded)."""
    candidates = candidates_for(v, properties)
    inv = houdini(v, candidates)
    enc = encode(v)
    s = z3.Solver()
    s.add(*(z3.And(candidates[n](enc.pre)) for n in inv))
    proved = {
        name for name, p in properties.items()
        if name in inv or s.check(z3.Not(z3.And(p(enc.pre)))) == z3.unsat
    }
    if steps:
        s.add(enc.step)
        proved -= {name for name, st in steps.items()
                   if s.check(z3.Not(z3.And(st(enc.pre, enc.post)))) != z3.unsat}
    return Proof(inv, tuple(candidates[n] for n in inv), frozenset(proved))
