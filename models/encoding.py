"""The symbolic transition relation, derived by running the protocol's own actions on Z3 terms.

Nothing here restates the protocol: `relation` evaluates an action's guard and effect on a state
of Z3 variables (through the ops facade) and equates the result with a primed copy. Relations are
built once per (action, variant flags) and cached, so a mutant that replaces one action of `safe`
reuses every other relation; BMC renames them per step, conformance substitutes values, and
models/compile.py turns the same guard and effect terms back into fast Python for the explicit
state graph.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from typing import Sequence

import z3

from llumverify.protocol.actions import Action
from llumverify.protocol.compiled import PRE as _PRE, symbolic_state, term
from llumverify.protocol.state import FIELDS, State, initial
from llumverify.protocol.variants import Variant


def variables(s: State) -> list[z3.ExprRef]:
    return [getattr(s, f) for f in FIELDS]


class Renaming:
    """Replaces each pair's first term by its second in many terms. z3.substitute re-checks
    every pair in Python on each call; applied to each field of a state (a post-state) that was
    quadratic in the number of fields and most of a bisimulation check's time. Here the pairs
    are packed once; Z3 itself refuses a pair of two sorts (an error, never a wrong term)."""

    def __init__(self, pairs: Sequence[tuple[z3.ExprRef, z3.ExprRef]]) -> None:
        self.ctx = pairs[0][0].ctx
        self.n = len(pairs)
        self.src, self.dst = (z3.Ast * self.n)(), (z3.Ast * self.n)()
        for i, (a, b) in enumerate(pairs):
            self.src[i], self.dst[i] = a.as_ast(), b.as_ast()

    @classmethod
    def between(cls, src: State, dst: State) -> "Renaming":
        """State src's variables to state dst's fields."""
        return cls([(getattr(src, f), getattr(dst, f)) for f in FIELDS])

    def __call__(self, e: z3.ExprRef) -> z3.ExprRef:
        return z3.z3._to_expr_ref(z3.Z3_substitute(self.ctx.ref(), e.as_ast(), self.n, self.src, self.dst),
                                  self.ctx)


def equal(a: State, b: State, skip: tuple[str, ...] = ()) -> z3.BoolRef:
    """a and b agree on every field but those in skip."""
    return z3.And(*(getattr(a, f) == getattr(b, f) for f in FIELDS if f not in skip))


def relation(action: Action, v: Variant, pre: State, post: State) -> z3.BoolRef:
    """guard(pre) and post = effect(pre), as one Z3 formula."""
    return z3.And(action.guard(pre, v), equal(post, action.effect(pre, v)))


PRE, POST = _PRE, symbolic_state("next_")
_NOT_FLAGS = frozenset({"name", "doc", "overrides", "removed"})


def flags(v: Variant) -> tuple[object, ...]:
    """What an action may read of a variant (everything but its name, doc and action set)."""
    return tuple(getattr(v, f.name) for f in dataclasses.fields(v) if f.name not in _NOT_FLAGS)


@dataclass(frozen=True)
class ActionTerms:
    """One action evaluated on PRE: its guard and the effect's term for every field."""

    guard: z3.BoolRef
    effect: tuple[z3.ExprRef, ...]  # in FIELDS order
    relation: z3.BoolRef  # guard /\ POST = effect


_TERMS: dict[tuple[Action, tuple[object, ...]], ActionTerms] = {}


def action_terms(a: Action, v: Variant) -> ActionTerms:
    key = (a, flags(v))
    got = _TERMS.get(key)
    if got is None:
        raw = a.guard(PRE, v)
        out = a.effect(PRE, v)
        effect = tuple(term(f, getattr(out, f)) for f in FIELDS)
        got = _TERMS[key] = ActionTerms(z3.And(raw), effect, z3.And(raw, equal(POST, out)))
    return got


@dataclass(frozen=True)
class Encoding:
    """A variant's init condition and per-action relations over template states pre/post."""

    variant: Variant
    pre: State
    post: State
    init: z3.BoolRef  # over pre
    relations: dict[str, z3.BoolRef]  # action name -> relation over pre, post
    guards: dict[str, z3.BoolRef]  # action name -> guard over pre
    effects: dict[str, tuple[z3.ExprRef, ...]]  # action name -> effect term per field (FIELDS order)
    label: z3.ArithRef  # names the action taken, as its index in `relations`
    step: z3.BoolRef  # the whole transition relation: Or of label == i /\\ relation i

    def at(self, formula: z3.ExprRef, pre: State, post: State | None = None,
           label: z3.ArithRef | None = None) -> z3.ExprRef:
        """The template formula renamed onto other states (e.g. step i and i+1 of a trace). Each
        set of states' renaming is packed once (`Renaming`, kept in _RENAMINGS): the two-link
        product renames each of ~140 invariant conjuncts onto four states, and z3.substitute
        re-checked all ~100 pairs in Python on every call, most of that check's time."""
        key = (id(self.pre), id(self.post), id(self.label), id(pre), id(post), id(label))
        got = _RENAMINGS.get(key)
        if got is None:
            pairs = list(zip(variables(self.pre), variables(pre)))
            if post is not None:
                pairs += list(zip(variables(self.post), variables(post)))
            if label is not None:
                pairs.append((self.label, label))
            if len(_RENAMINGS) >= _RENAMINGS_KEPT:  # the oldest goes: a census makes thousands of states
                del _RENAMINGS[next(iter(_RENAMINGS))]
            # the states are kept with their renaming, so no id in a key is reused while it is there
            got = _RENAMINGS[key] = ((self.pre, self.post, self.label, pre, post, label), Renaming(pairs))
        return got[1](formula)


# Encoding.at's packed renamings, by the ids of the states (and labels) renamed from and onto
_RENAMINGS: dict[tuple[int, ...], tuple[object, Renaming]] = {}
_RENAMINGS_KEPT = 256


@cache
def encode(v: Variant) -> Encoding:
    terms = {a.name: action_terms(a, v) for a in v.actions}
    relations = {n: t.relation for n, t in terms.items()}
    label = z3.Int("action")
    return Encoding(
        variant=v, pre=PRE, post=POST,
        init=z3.And(initial(PRE), v.pinned(PRE)),
        relations=relations,
        guards={n: t.guard for n, t in terms.items()},
        effects={n: t.effect for n, t in terms.items()},
        label=label,
        step=z3.Or(*(z3.And(label == i, r) for i, r in enumerate(relations.values()))),
    )
