"""Conformance: a concrete step satisfies the Z3 relation of the action that produced it.

The relation is built once per variant (models/encoding.py caches it); checking a step only
substitutes the concrete pre and post values and simplifies, which must give True.
"""

from __future__ import annotations

import z3

from llumverify.protocol.compiled import term
from llumverify.protocol.state import FIELDS, State
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import Renaming, encode


def _values(template: State, concrete: State) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    return [(getattr(template, f), term(f, getattr(concrete, f))) for f in FIELDS]


def conforms(v: Variant, action: str, pre: State, post: State) -> bool:
    """True iff (pre, post) satisfies the symbolic relation of `action` in variant v."""
    enc = encode(v)
    pairs = _values(enc.pre, pre) + _values(enc.post, post)
    return z3.is_true(z3.simplify(Renaming(pairs)(enc.relations[action])))
