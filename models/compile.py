"""Z3 terms over the template state back to Python: the bridge from the symbolic form of an
action to code that runs it again.

Two targets:
- `facade`: source over a `State` (`s.req`, ...) through the ops facade, so the compiled function
  runs on Python values (simulator API, Hypothesis) and on Z3 terms (model checker) alike. The
  generated mutants (models/mutants.py) are actions compiled this way from a mutated Z3 term.
- `tuple`: plain Python over the fields unpacked from a tuple in FIELDS order, for the explicit
  state graph of models/liveness.py (several times faster than evaluating the facade per state).

Only the operators that `llumverify.protocol.ops` produces occur: and, or, not, implies, if,
=, distinct, <=, <, >=, >, +, -, *, unary minus, integer and boolean literals, and the template's
variables (models/encoding.py: PRE, whose variables are named after the fields).
"""

from __future__ import annotations

from typing import Callable, Sequence

import z3

from llumverify.protocol import ops
from llumverify.protocol.state import FIELDS, State

_FIELD_SET = frozenset(FIELDS)

_FACADE_NARY = {z3.Z3_OP_AND: "and_", z3.Z3_OP_OR: "or_", z3.Z3_OP_ADD: "add"}
_PY_NARY = {z3.Z3_OP_AND: " and ", z3.Z3_OP_OR: " or ", z3.Z3_OP_ADD: " + ", z3.Z3_OP_MUL: " * "}


def source(e: z3.ExprRef, target: str, var: Callable[[str], str]) -> str:
    """Python source computing e; var(name) is how the target names a template variable
    (a field of PRE, or `next_` + field of POST)."""
    memo: dict[int, str] = {}

    def go(x: z3.ExprRef) -> str:
        key = x.get_id()
        got = memo.get(key)
        if got is not None:
            return got
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
        memo[key] = out
        return out

    return go(e)


_FACADE_ENV = {n: getattr(ops, n) for n in ("and_", "or_", "not_", "implies", "ite", "le", "lt",
                                             "add", "sub")}


def facade_guard(g: z3.BoolRef) -> Callable[[State, object], object]:
    """An action guard (s, v) -> value computing g on any State (v is ignored: the variant's
    flags are already folded into g)."""
    src = source(g, "facade", lambda f: f"s.{f}")
    return eval(f"lambda s, v: {src}", dict(_FACADE_ENV))  # noqa: S307 (generated from a Z3 term)


def facade_effect(effect: Sequence[z3.ExprRef], pre: State) -> Callable[[State, object], State]:
    """An action effect (s, v) -> State computing each field's term; fields whose term is the
    pre-state's own variable are left as they are."""
    parts = []
    for f, e in zip(FIELDS, effect):
        if not e.eq(getattr(pre, f)):
            parts.append(f"{f}={source(e, 'facade', lambda n: f's.{n}')}")
    return eval(f"lambda s, v: s.replace({', '.join(parts)})", dict(_FACADE_ENV))  # noqa: S307


Successors = Callable[[tuple], list]  # tuple state -> [(action index, next tuple state)]


def tuple_successors(guards: Sequence[z3.BoolRef], effects: Sequence[Sequence[z3.ExprRef]],
                     pre: State) -> Successors:
    """One function computing, for a state as a tuple in FIELDS order, every enabled action (by
    index) with its successor tuple."""
    lines = ["def successors(t):", f"    ({', '.join(FIELDS)},) = t", "    out = []"]
    for i, (g, eff) in enumerate(zip(guards, effects)):
        fields = ", ".join(f if e.eq(getattr(pre, f)) else source(e, "tuple", str)
                           for f, e in zip(FIELDS, eff))
        lines.append(f"    if {source(g, 'tuple', str)}:")
        lines.append(f"        out.append(({i}, ({fields},)))")
    lines.append("    return out")
    env: dict[str, object] = {}
    exec("\n".join(lines), env)  # noqa: S102 (generated from Z3 terms)
    return env["successors"]  # type: ignore[return-value]


def tuple_function(e: z3.ExprRef, two_states: bool = False) -> Callable[..., object]:
    """e (over PRE, and POST if two_states) as a function of one tuple state, or of two."""
    if two_states:
        head = (f"def f(t, u):\n    ({', '.join(FIELDS)},) = t\n"
                f"    ({', '.join('next_' + f for f in FIELDS)},) = u\n")
    else:
        head = f"def f(t):\n    ({', '.join(FIELDS)},) = t\n"
    env: dict[str, object] = {}
    exec(head + f"    return {source(e, 'tuple', str)}", env)  # noqa: S102
    return env["f"]  # type: ignore[return-value]
