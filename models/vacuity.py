"""Properties a variant satisfies trivially: true of every well-formed state once the fields that
no action of the variant ever changes are fixed at their initial values, whatever the protocol
does. Such a property is not evidence about the protocol and `check` lists it as TRIVIAL instead
of PROVED (e.g. `no_pending_pull` for a variant whose selection never picks a request mid-prefill:
`kv_pending` starts false and nothing sets it).
"""

from __future__ import annotations

import functools
from typing import Mapping

import z3

from llumverify.protocol.state import FIELDS, well_formed
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import POST, PRE, encode
from llumverify.properties.safety import PROPERTIES, Property


def _valid(*premises: z3.ExprRef, goal: z3.ExprRef) -> bool:
    s = z3.Solver()
    s.add(*premises)
    return s.check(z3.Not(goal)) == z3.unsat


@functools.lru_cache(maxsize=32)
def frozen(v: Variant) -> dict[str, z3.ExprRef]:
    """Fields that no action of the variant changes and that start at one fixed value: name ->
    that value (a Z3 constant)."""
    enc = encode(v)
    out: dict[str, z3.ExprRef] = {}
    init = z3.Solver()
    init.add(enc.init)
    if init.check() != z3.sat:
        return out
    model = init.model()
    for i, f in enumerate(FIELDS):
        x = getattr(PRE, f)
        value = model.eval(x, model_completion=True)
        if not _valid(enc.init, goal=x == value):
            continue
        if all(_valid(enc.guards[a], goal=effect[i] == x) for a, effect in enc.effects.items()):
            out[f] = value
    return out


def trivial(v: Variant, properties: Mapping[str, Property] = PROPERTIES) -> dict[str, str]:
    """Properties implied by well-formedness and the frozen fields alone (for a step property:
    of both states, with no transition relation at all): name -> the frozen fields it needs."""
    facts = frozen(v)

    def implied(fields: list[str], p: Property) -> bool:
        pre = [z3.And(well_formed(PRE)), *(getattr(PRE, f) == facts[f] for f in fields)]
        if not _valid(*pre, goal=z3.And(p.predicate(PRE))):
            return False
        if p.step is None:
            return True
        post = [z3.And(well_formed(POST)), *(getattr(POST, f) == facts[f] for f in fields)]
        return _valid(*pre, *post, goal=z3.And(p.step(PRE, POST)))

    out: dict[str, str] = {}
    for name, p in properties.items():
        if implied(list(facts), p):
            needed = [f for f in facts if not implied([g for g in facts if g != f], p)]
            out[name] = ", ".join(f"{f} is always {facts[f]}" for f in needed) or "always true"
    return out
