"""The symbolic transition relation, derived by running the protocol's own actions on Z3 terms.

Nothing here restates the protocol: `relation` evaluates an action's guard and effect on a state
of Z3 variables (through the ops facade) and equates the result with a primed copy. Relations are
built once per variant and cached; BMC renames them per step, conformance substitutes values.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import z3

from llumverify.protocol.actions import Action
from llumverify.protocol.state import BOOL_FIELDS, FIELDS, State, initial
from llumverify.protocol.variants import Variant


def symbolic_state(prefix: str) -> State:
    """A State whose every field is a fresh Z3 variable named prefix + field."""
    return State(**{f: (z3.Bool if f in BOOL_FIELDS else z3.Int)(prefix + f) for f in FIELDS})


def variables(s: State) -> list[z3.ExprRef]:
    return [getattr(s, f) for f in FIELDS]


def equal(a: State, b: State) -> z3.BoolRef:
    return z3.And(*(getattr(a, f) == getattr(b, f) for f in FIELDS))


def relation(action: Action, v: Variant, pre: State, post: State) -> z3.BoolRef:
    """guard(pre) and post = effect(pre), as one Z3 formula."""
    return z3.And(action.guard(pre, v), equal(post, action.effect(pre, v)))


@dataclass(frozen=True)
class Encoding:
    """A variant's init condition and per-action relations over template states pre/post."""

    variant: Variant
    pre: State
    post: State
    init: z3.BoolRef  # over pre
    relations: dict[str, z3.BoolRef]  # action name -> relation over pre, post
    guards: dict[str, z3.BoolRef]  # action name -> guard over pre
    label: z3.ArithRef  # names the action taken, as its index in `relations`
    step: z3.BoolRef  # the whole transition relation: Or of label == i /\ relation i

    def at(self, formula: z3.ExprRef, pre: State, post: State | None = None,
           label: z3.ArithRef | None = None) -> z3.ExprRef:
        """The template formula renamed onto other states (e.g. step i and i+1 of a trace)."""
        pairs = list(zip(variables(self.pre), variables(pre)))
        if post is not None:
            pairs += list(zip(variables(self.post), variables(post)))
        if label is not None:
            pairs.append((self.label, label))
        return z3.substitute(formula, *pairs)


@cache
def encode(v: Variant) -> Encoding:
    pre, post = symbolic_state(""), symbolic_state("next_")
    relations = {a.name: relation(a, v, pre, post) for a in v.actions}
    label = z3.Int("action")
    return Encoding(
        variant=v, pre=pre, post=post,
        init=z3.And(initial(pre), v.pinned(pre)),
        relations=relations,
        guards={a.name: z3.And(a.guard(pre, v)) for a in v.actions},
        label=label,
        step=z3.Or(*(z3.And(label == i, r) for i, r in enumerate(relations.values()))),
    )
