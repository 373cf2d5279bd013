"""The protocol's actions and predicates as plain Python for concrete states, generated from
their Z3 terms: the simulator's fast path, and the translator models/compile.py builds on.

An action is written once over the ops facade (actions.py), which works on Python values and on
Z3 terms alike; on Python values every `and_`/`or_`/`ite` is a function call that first asks
whether an argument is symbolic. Here each guard and effect is evaluated once on a state of Z3
variables (the variant's flags fold in), and the resulting term is translated back to Python
source over `s.field` with Python's own operators, then compiled. Nothing is restated: the code
is the action's own term, and tests check that both forms agree on concrete states. A term
with an operator the translator does not know keeps the facade form for that action.
"""

from __future__ import annotations

import functools
from typing import Callable

import z3

from llumverify.protocol.actions import Action, Effect, Guard
from llumverify.protocol.state import BOOL_FIELDS, FIELDS, State, with_fields
from llumverify.protocol.variants import Variant

_FIELD_SET = frozenset(FIELDS)


def symbolic_state(prefix: str) -> State:
    """A State whose every field is a fresh Z3 variable named prefix + field."""
    return State(**{f: (z3.Bool if f in BOOL_FIELDS else z3.Int)(prefix + f) for f in FIELDS})


def term(f: str, x: object) -> z3.ExprRef:
    """A field's value as a Z3 term (effects leave constants as Python values)."""
    if isinstance(x, z3.ExprRef):
        return x
    return _constant(f in BOOL_FIELDS, int(x))  # type: ignore[call-overload]


@functools.lru_cache(maxsize=4096)
def _constant(is_bool: bool, x: int) -> z3.ExprRef:
    """Fields hold small numbers: a conformance check turns every field of two states into
    constants, and making a Z3 numeral was a fifth of the property machines' time."""
    return z3.BoolVal(bool(x)) if is_bool else z3.IntVal(x)


PRE = symbolic_state("")  # the template state: its variables are named after the fields


_FACADE_NARY = {z3.Z3_OP_AND: "and_", z3.Z3_OP_OR: "or_", z3.Z3_OP_ADD: "add"}
_PY_NARY = {z3.Z3_OP_AND: " and ", z3.Z3_OP_OR: " or ", z3.Z3_OP_ADD: " + ", z3.Z3_OP_MUL: " * "}


# source's translations per (target, naming), by term id, each kept with its term so that no id is
# reused while it is here: a generated mutant shares most subterms with its action and the other
# mutants of it, and translating them again was most of the time to build the 685 of them.
_TRANSLATED: dict[tuple[str, Callable[[str], str]], dict[int, tuple[z3.ExprRef, str]]] = {}
_TRANSLATED_KEPT = 200_000  # terms per naming, then it starts again (all 685 mutants' facades: 942)


def source(e: z3.ExprRef, target: str, var: Callable[[str], str]) -> str:
    """Python source computing e; var(name) is how the target names a template variable
    (a field of PRE, or `next_` + field of POST). Translations are kept for the namings the
    package uses (attr, str); any other naming gets a table of its own for this call only, so
    that a caller passing a new function each time cannot grow what is kept."""
    memo = _TRANSLATED.setdefault((target, var), {}) if var is str or var is attr else {}
    if len(memo) > _TRANSLATED_KEPT:
        memo.clear()

    def go(x: z3.ExprRef) -> str:
        key = x.get_id()
        got = memo.get(key)
        if got is not None:
            return got[1]
        k = x.decl().kind()
        args = [go(c) for c in x.children()]
        facade = target == "facade"
        if k == z3.Z3_OP_TRUE:
            out = "True"
        elif k == z3.Z3_OP_FALSE:
            out = "False"
        elif k == z3.Z3_OP_ANUM:
            out = str(x.as_long())  # type: ignore[attr-defined]
        elif k == z3.Z3_OP_UNINTERPRETED and not args:
            name = x.decl().name()
            field = name[len("next_"):] if name.startswith("next_") else name
            if field not in _FIELD_SET:
                raise ValueError(f"not a template variable: {name}")
            out = var(name)
        elif k in _PY_NARY and not (facade and k in _FACADE_NARY):
            if not args:
                out = "True" if k == z3.Z3_OP_AND else "False" if k == z3.Z3_OP_OR else "0"
            else:
                out = "(" + _PY_NARY[k].join(args) + ")"
        elif k in _FACADE_NARY:
            out = f"{_FACADE_NARY[k]}({', '.join(args)})"
        elif k == z3.Z3_OP_NOT:
            out = f"not_({args[0]})" if facade else f"(not {args[0]})"
        elif k == z3.Z3_OP_IMPLIES:
            out = f"implies({args[0]}, {args[1]})" if facade else f"((not {args[0]}) or {args[1]})"
        elif k == z3.Z3_OP_ITE:
            out = (f"ite({args[0]}, {args[1]}, {args[2]})" if facade
                   else f"({args[1]} if {args[0]} else {args[2]})")
        elif k == z3.Z3_OP_EQ:
            out = f"({args[0]} == {args[1]})"
        elif k == z3.Z3_OP_DISTINCT and len(args) == 2:
            out = f"not_({args[0]} == {args[1]})" if facade else f"({args[0]} != {args[1]})"
        elif k in (z3.Z3_OP_LE, z3.Z3_OP_LT, z3.Z3_OP_GE, z3.Z3_OP_GT):
            a, b = args if k in (z3.Z3_OP_LE, z3.Z3_OP_LT) else args[::-1]
            strict = k in (z3.Z3_OP_LT, z3.Z3_OP_GT)
            out = (f"{'lt' if strict else 'le'}({a}, {b})" if facade
                   else f"({a} {'<' if strict else '<='} {b})")
        elif k == z3.Z3_OP_SUB:
            out = args[0]
            for a in args[1:]:
                out = f"sub({out}, {a})" if facade else f"({out} - {a})"
        elif k == z3.Z3_OP_UMINUS:
            out = f"sub(0, {args[0]})" if facade else f"(-{args[0]})"
        else:
            raise ValueError(f"cannot compile {x.decl().name()} in {x}")
        memo[key] = (x, out)
        return out

    return go(e)



def attr(name: str) -> str:
    """A field read off a State named `s` (the naming of predicates, guards and effects)."""
    return f"s.{name}"


def predicate(pred: Callable[[State], object]) -> Callable[[State], bool]:
    """pred (a function of a State through the facade) as plain Python over a concrete State."""
    src = source(z3.And(pred(PRE)), "tuple", attr)
    return eval(f"lambda s: {src}", {})  # noqa: S307 (generated from a Z3 term)


def _guard(a: Action, v: Variant) -> Guard:
    src = source(z3.And(a.guard(PRE, v)), "tuple", attr)
    return eval(f"lambda s, v: {src}", {})  # noqa: S307


def _effect(a: Action, v: Variant) -> Effect:
    out = a.effect(PRE, v)
    parts = []
    for f in FIELDS:
        e = term(f, getattr(out, f))
        if not e.eq(getattr(PRE, f)):
            parts.append(f"{f!r}: {source(e, 'tuple', attr)}")
    code = f"def effect(s, v):\n    return _with(s, {{{', '.join(parts)}}})\n"
    env: dict[str, object] = {"_with": with_fields}
    exec(code, env)  # noqa: S102 (generated from Z3 terms)
    return env["effect"]  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def actions(v: Variant) -> dict[str, Action]:
    """The variant's actions by name, guards and effects compiled for concrete states (each
    bound to this variant's flags: call them with this variant only)."""
    out = {}
    for a in v.actions:
        try:
            out[a.name] = Action(a.name, a.kind, _guard(a, v), _effect(a, v), a.doc, a.applies)
        except ValueError:  # an operator the translator does not know: keep the facade form
            out[a.name] = a
    return out
