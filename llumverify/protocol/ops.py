"""The operations facade: the only way protocol code combines values.

Every function works on plain Python ints/bools and on Z3 terms alike, so one definition of an
action's guard and effect serves the simulator (concrete), the Hypothesis machines (concrete) and
the model checker (symbolic). Python's `and`/`or`/`not`/`if` cannot be overloaded by Z3, hence
these names. `==`/`!=` and `+`/`-` work on both kinds as they are; `lt`/`le`/`add`/`sub` exist
for comparisons with a constant on the left and for sums of many terms.
"""

from __future__ import annotations

from typing import Any, Iterable

import z3

Val = Any  # int | bool | z3.ExprRef


_EXPR = z3.ExprRef


def is_symbolic(*xs: Val) -> bool:
    """True if any argument is a Z3 term (then the result must be one too). A plain loop: the
    simulator evaluates every guard and property through here on Python values."""
    for x in xs:
        if isinstance(x, _EXPR):
            return True
    return False


def ite(c: Val, a: Val, b: Val) -> Val:
    """If-then-else as an expression (never branches on a symbolic condition)."""
    if is_symbolic(c, a, b):
        return z3.If(c, a, b)
    return a if c else b


def and_(*xs: Val) -> Val:
    if is_symbolic(*xs):
        return z3.And(*xs)
    return all(xs)


def or_(*xs: Val) -> Val:
    if is_symbolic(*xs):
        return z3.Or(*xs)
    return any(xs)


def not_(x: Val) -> Val:
    return z3.Not(x) if is_symbolic(x) else not x


def implies(a: Val, b: Val) -> Val:
    return z3.Implies(a, b) if is_symbolic(a, b) else (not a) or bool(b)


def eq(a: Val, b: Val) -> Val:
    """Equality; `==` and `!=` also work directly on both kinds (Z3 overloads them)."""
    return a == b


def lt(a: Val, b: Val) -> Val:
    return a < b


def le(a: Val, b: Val) -> Val:
    return a <= b


def add(*xs: Val) -> Val:
    total: Val = 0
    for x in xs:
        total = total + x
    return total


def sub(a: Val, b: Val) -> Val:
    return a - b


def one_of(x: Val, values: Iterable[int]) -> Val:
    """x equals one of the given constants (enum membership)."""
    return or_(*(eq(x, v) for v in values))


def as_int(b: Val) -> Val:
    """A boolean as 0/1 (for counters that a flag increments)."""
    return ite(b, 1, 0)
