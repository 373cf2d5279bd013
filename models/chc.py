"""Unbounded proofs that the Houdini invariant alone does not give (models/induction.py).

A property left open by the inductive proof and by BMC up to CHC_AFTER steps is posed to Z3's
Spacer as constrained Horn clauses: Reach(s) <- Init(s); Reach(s') <- Reach(s) /\\ T(s, s') /\\
Inv(s) /\\ Inv(s'); false <- a reachable state or step breaking the property (Inv: the proved
invariant, sound to assume since it holds in every reachable state). When Spacer answers "safe"
its inductive strengthening C is read back and checked here with plain SMT queries before it
counts: Init => C /\\ P, and Inv /\\ C /\\ T /\\ Inv' => C' /\\ P' (with the step predicate). So
a PROVED verdict from this path rests on the same kind of query as Houdini's, not on Spacer being
right. Spacer's work is capped in Z3's resource units, not seconds, so a verdict does not depend
on the machine's load. The units a proof takes do depend on what the process ran before (0.2-19.8 M
for the four proofs, benchmarks/chc_units.py): `check` runs each variant's task in a fresh
process, where the count repeats. A property Spacer cannot settle within the cap stays with BMC. BMC runs to
CHC_AFTER steps (or the depth asked for, if smaller) before Spacer is tried; under a time budget
Spacer is tried only if BMC got that far, and its cap is not counted against the budget.
"""

from __future__ import annotations

from typing import Callable, Sequence

import z3

from llumverify.protocol.state import FIELDS, State
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import Encoding, encode

Goal = Callable[[State], object]
StepGoal = Callable[[State, State], object]

CHC_AFTER = 13  # BMC depth before Spacer is tried: every shortest counterexample found so far is this long or shorter
RLIMIT = 60_000_000  # Spacer's resource cap per property: the proofs of reports/protocol-findings.md took 0.2-19.8 M (benchmarks/chc_units.py)


def _holds(enc: Encoding, pred: Goal, step: StepGoal | None, pre: State, post: State) -> z3.BoolRef:
    """The property in post, and on the step pre -> post."""
    terms = [z3.And(pred(post))]
    if step is not None:
        terms.append(z3.And(step(pre, post)))
    return z3.And(*terms)


def strengthening(v: Variant, pred: Goal, step: StepGoal | None, invariant: Sequence[Goal],
                  rlimit: int = RLIMIT) -> z3.BoolRef | None:
    """Spacer's inductive strengthening of the property (a formula over the template state
    encode(v).pre), or None if it found a counterexample or ran out of resources."""
    enc = encode(v)
    pre = [getattr(enc.pre, f) for f in FIELDS]
    post = [getattr(enc.post, f) for f in FIELDS]
    reach = z3.Function("reach", *(x.sort() for x in pre), z3.BoolSort())
    error = z3.Bool("error")
    inv = [z3.And(*(z3.And(p(s)) for p in invariant)) for s in (enc.pre, enc.post)]
    fp = z3.Fixedpoint()
    fp.set(engine="spacer", rlimit=rlimit)
    fp.register_relation(reach, error.decl())
    fp.declare_var(*pre, *post, enc.label)
    fp.rule(reach(*pre), [enc.init])
    fp.rule(reach(*post), [reach(*pre), enc.step, *inv])
    fp.rule(error, [enc.init, z3.Not(z3.And(pred(enc.pre)))])
    fp.rule(error, [reach(*pre), enc.step, inv[0], z3.Not(_holds(enc, pred, step, enc.pre, enc.post))])
    try:
        if fp.query(error) != z3.unsat:
            return None
    except z3.Z3Exception:  # resource cap reached mid-query
        return None
    cover = fp.get_cover_delta(-1, reach)  # (:var i) is the i-th field
    return z3.substitute_vars(cover, *pre)


def _free_constants(e: z3.ExprRef) -> set[z3.ExprRef]:
    """The uninterpreted constants e mentions outside any quantifier's bound variables."""
    seen: set[int] = set()
    out: set[z3.ExprRef] = set()
    todo = [e]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_quantifier(x):
            todo.append(x.body())  # bound variables are de Bruijn indices there, not constants
        elif z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x)
        elif z3.is_app(x):
            todo.extend(x.children())
    return out


def certified(v: Variant, cert: z3.BoolRef, pred: Goal, step: StepGoal | None,
              invariant: Sequence[Goal]) -> bool:
    """cert (over encode(v).pre) with the invariant proves the property for every reachable
    state and step: it reads only the pre-state's fields, holds initially and is inductive, and
    implies the property."""
    enc = encode(v)
    if not _free_constants(cert) <= {getattr(enc.pre, f) for f in FIELDS}:
        return False  # e.g. a formula over the post-state or the action label is no state invariant
    at_post = z3.substitute(cert, *((getattr(enc.pre, f), getattr(enc.post, f)) for f in FIELDS))
    inv = [z3.And(*(z3.And(p(s)) for p in invariant)) for s in (enc.pre, enc.post)]
    init = z3.Solver()
    init.add(enc.init)
    if init.check(z3.Not(z3.And(cert, z3.And(pred(enc.pre))))) != z3.unsat:
        return False
    trans = z3.Solver()
    trans.add(enc.step, cert, *inv)
    return trans.check(z3.Not(z3.And(at_post, _holds(enc, pred, step, enc.pre, enc.post)))) == z3.unsat


def proves(v: Variant, pred: Goal, step: StepGoal | None, invariant: Sequence[Goal],
           rlimit: int = RLIMIT) -> bool:
    """The property holds in every reachable state (and step), for all sizes: Spacer's
    strengthening, certified."""
    cert = strengthening(v, pred, step, invariant, rlimit)
    return cert is not None and certified(v, cert, pred, step, invariant)
