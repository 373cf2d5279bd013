"""The stage count as a symbol: one unbounded proof for every number of stages.

A variant's `max_stages` is a number (Llumnix's MIGRATION_MAX_STAGES, 3 by default), so its proof
covers that count only, and a slip that needs a fifth stage (`late_stage_skips_abort_check` in
models/mutants.py) is proved safe at 3. Where the count bounds the non-final (pre-copy) stages a
variant runs, a limit a user may set, the proof is run again with the count an unconstrained integer:
every property the proof settles at the variant's own count must be settled for all counts at once,
so nothing proved rests on the limit's value. `check` states this as one more scope obligation for
our designs (`any_stage_count`); 0 or fewer stages are covered too (no migration begins).
"""

from __future__ import annotations

import functools

import z3

from llumverify.models.check import decisive_term, implied, proof_of
from llumverify.models.scope import Obligation
from llumverify.protocol.variants import Variant

STAGES = z3.Int("max_stages")  # the symbol: one constant of every formula, never renamed by a step


def has_stage_limit(v: Variant) -> bool:
    """The variant runs non-final stages up to its count (`pd` runs one final stage, by design)."""
    return isinstance(v.max_stages, int) and any(a.name == "begin_stage" for a in v.actions)


def any_stages(v: Variant) -> Variant:
    """`v` with its stage count a symbol. It keeps `v`'s name: the lemmas models/lemmas.py gives a named variant
    are looked up by name, and the symbolic proof must have them too (variants compare by identity)."""
    return v.derive(v.name, f"{v.name} with any number of stages", max_stages=STAGES)


def _settled(v: Variant) -> frozenset[str]:
    """What the inductive invariant settles: the properties, and `decisive` (check_variant's row) where implied."""
    proof = proof_of(v)
    return proof.proved | ({"decisive"} if implied(proof, functools.partial(decisive_term, v=v)) else frozenset())


def any_stage_count(v: Variant) -> Obligation:
    """Every property the proof settles for `v` (and `decisive`) is settled with the stage count a symbol."""
    lost = sorted(_settled(v) - _settled(any_stages(v)))
    return Obligation("any_stage_count", not lost,
                      f"{', '.join(lost)} proved for {v.max_stages} stages, not for every count" if lost else "")


def stage_obligations(v: Variant) -> list[Obligation]:
    """[any_stage_count] where `v` has a stage limit, else none."""
    return [any_stage_count(v)] if has_stage_limit(v) else []
