"""Z3 terms over the template state back to Python: the bridge from the symbolic form of an
action to code that runs it again.

The translator itself (`source`) lives in llumverify/protocol/compiled.py, which also compiles
every action to plain Python over a State for the simulator. Two more targets here:
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

from typing import Callable, Mapping, Sequence

import z3

from llumverify.protocol import ops
from llumverify.protocol.compiled import attr, source
from llumverify.protocol.state import FIELDS, State

__all__ = ["source", "facade_guard", "facade_effect", "tuple_successors", "tuple_function", "tuple_failures"]

_FACADE_ENV = {n: getattr(ops, n) for n in ("and_", "or_", "not_", "implies", "ite", "le", "lt",
                                             "add", "sub")}


def facade_guard(g: z3.BoolRef) -> Callable[[State, object], object]:
    """An action guard (s, v) -> value computing g on any State (v is ignored: the variant's
    flags are already folded into g)."""
    src = source(g, "facade", attr)
    return eval(f"lambda s, v: {src}", dict(_FACADE_ENV))  # noqa: S307 (generated from a Z3 term)


def facade_effect(effect: Sequence[z3.ExprRef], pre: State) -> Callable[[State, object], State]:
    """An action effect (s, v) -> State computing each field's term; fields whose term is the
    pre-state's own variable are left as they are."""
    parts = []
    for f, e in zip(FIELDS, effect):
        if not e.eq(getattr(pre, f)):
            parts.append(f"{f}={source(e, 'facade', attr)}")
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


def _tuple_def(body: list[str], two_states: bool) -> Callable[..., object]:
    """`def f(t)` (or `f(t, u)`, POST's fields as next_*) with the fields unpacked, then body."""
    head = ["def f(t, u):" if two_states else "def f(t):", f"    ({', '.join(FIELDS)},) = t"]
    if two_states:
        head.append(f"    ({', '.join('next_' + f for f in FIELDS)},) = u")
    env: dict[str, object] = {}
    exec("\n".join(head + body), env)  # noqa: S102 (generated from Z3 terms)
    return env["f"]  # type: ignore[return-value]


def tuple_function(e: z3.ExprRef, two_states: bool = False) -> Callable[..., object]:
    """e (over PRE, and POST if two_states) as a function of one tuple state, or of two."""
    return _tuple_def([f"    return {source(e, 'tuple', str)}"], two_states)


def tuple_failures(terms: Mapping[str, z3.BoolRef], two_states: bool = False) -> Callable[..., list[str]]:
    """One function of a tuple state (or two) giving the names of the terms false there, in the
    mapping's order: the fields are unpacked once for all of them."""
    body = ["    bad = []"]
    for name, e in terms.items():
        body += [f"    if not ({source(e, 'tuple', str)}):", f"        bad.append({name!r})"]
    return _tuple_def(body + ["    return bad"], two_states)  # type: ignore[return-value]
