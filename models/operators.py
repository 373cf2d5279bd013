"""Mutation operators: the slips a generated mutant of `safe` makes in one action's Z3 form.

Structure (a missing or inverted test, a missing or misplaced update):
- `drop`: a guard conjunct left out (at every level of its conjunction, inside if-branches too);
- `ack-flip`: a guard's test of a reply turned (ack OK <-> FAIL);
- `skip`: one field's update left out;
- `other-side`: one field's update applied to the S <-> D counterpart (and the terms it reads);
- `flip`: success and failure swapped in an update (ack OK <-> FAIL, status FINISHED <-> ABORTED).
Values and conditions (issue #27, item 8):
- `const+1` / `const-1`: an integer literal of an arithmetic term, a comparison or a numeric
  field's new value off by one (`n + wm` -> `n + wm + 1`, `stage := 0` -> `stage := 1`); enum
  codes (`pc == ALLOC`) are not numbers and are left alone;
- `strict` / `reversed`: a comparison's bound made strict or non-strict (`<=` <-> `<`), or its
  operands swapped (`a <= b` -> `b <= a`);
- `read-swap`: every read of one S-side field in the action made of its D-side counterpart (or
  back): `s_free` where `d_free` was meant;
- `reorder`: one update computed after another instead of from the same old state (`x := f(y)`
  reads y's new value: the two statements swapped in sequential code).
A mutated subterm is replaced everywhere it occurs in the action (guard and every update), as
a slip in the one line of source that computes it would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import z3

from llumverify.protocol.actions import Action
from llumverify.protocol.state import BOOL_FIELDS, FIELDS, Ack, Mig
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import PRE, action_terms

# S <-> D counterparts for "apply the update to the other side" and "read the other side"
OTHER_SIDE = {"s_free": "d_free", "s_other": "d_other", "s_blocks": "d_blocks",
              "s_alive": "d_alive", "s_cap": "d_cap", "nblk": "d_nblk"}
OTHER_SIDE |= {d: s for s, d in list(OTHER_SIDE.items())}
# success <-> failure, per field (enum values)
FLIP = {"ack": {int(Ack.OK): int(Ack.FAIL), int(Ack.FAIL): int(Ack.OK)},
        "status": {int(Mig.FINISHED): int(Mig.ABORTED_DST), int(Mig.ABORTED_DST): int(Mig.FINISHED),
                   int(Mig.ABORTED_SRC): int(Mig.FINISHED)}}
# fields holding an enum code (Req, Mig, Pc, DReq, Slot, Ack): their literals are not numbers
ENUM_FIELDS = frozenset({"req", "status", "pc", "d_req", "d_slot", "ack"})
_ENUM_VARS = frozenset(getattr(PRE, f).get_id() for f in ENUM_FIELDS)


@dataclass(frozen=True)
class Spec:
    """A generated mutant before compilation: one action with a new guard and/or effect."""

    name: str
    doc: str
    action: str
    guard: z3.BoolRef
    effect: tuple[z3.ExprRef, ...]


def show(e: z3.ExprRef, width: int = 70) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _conjunct_drops(e: z3.ExprRef) -> Iterator[tuple[str, z3.ExprRef]]:
    """Every conjunct of e's conjunction tree (through nested ands and the branches of a
    boolean if), and e without it."""
    if z3.is_and(e):
        kids = e.children()
        for i, k in enumerate(kids):
            rest = kids[:i] + kids[i + 1:]
            yield show(k), (z3.And(*rest) if len(rest) != 1 else rest[0]) if rest else z3.BoolVal(True)
            for what, k2 in _conjunct_drops(k):
                yield what, z3.And(*kids[:i], k2, *kids[i + 1:])
    elif z3.is_app_of(e, z3.Z3_OP_ITE) and z3.is_bool(e):
        c, a, b = e.children()
        for what, a2 in _conjunct_drops(a):
            yield what, z3.If(c, a2, b)
        for what, b2 in _conjunct_drops(b):
            yield what, z3.If(c, a, b2)


def _subterms(roots: tuple[z3.ExprRef, ...]) -> Iterator[z3.ExprRef]:
    """Every distinct subterm of the roots, each once, in a fixed (pre-)order."""
    seen: set[int] = set()
    todo = list(reversed(roots))
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        yield x
        todo.extend(reversed(x.children()))


def _ack_swaps(e: z3.ExprRef) -> Iterator[tuple[str, z3.ExprRef]]:
    """Each test `ack == OK` / `ack == FAIL` in e turned into the other."""
    ack = PRE.ack
    for site in _subterms((e,)):
        if z3.is_eq(site) and any(c.eq(ack) for c in site.children()):
            other = [c for c in site.children() if not c.eq(ack)]
            if other and z3.is_int_value(other[0]) and other[0].as_long() in FLIP["ack"]:
                flipped = ack == FLIP["ack"][other[0].as_long()]
                yield show(site), z3.substitute(e, (site, flipped))


def _flip_leaves(e: z3.ExprRef, table: Mapping[int, int]) -> z3.ExprRef:
    """The value positions (leaves of the if-tree) of a field's new value, flipped by table."""
    if z3.is_app_of(e, z3.Z3_OP_ITE):
        c, a, b = e.children()
        return z3.If(c, _flip_leaves(a, table), _flip_leaves(b, table))
    if z3.is_int_value(e) and e.as_long() in table:
        return z3.IntVal(table[e.as_long()])
    return e


def _other_side(e: z3.ExprRef) -> z3.ExprRef:
    pairs = [(getattr(PRE, f), getattr(PRE, g)) for f, g in OTHER_SIDE.items()]
    return z3.substitute(e, *pairs)


def _rebuild(e: z3.ExprRef, kids: list[z3.ExprRef]) -> z3.ExprRef:
    """e with its arguments replaced (any arity: And/Or/+ take more than two)."""
    args = (z3.Ast * len(kids))(*[k.as_ast() for k in kids])
    return z3.z3._to_expr_ref(z3.Z3_update_term(e.ctx_ref(), e.as_ast(), len(kids), args), e.ctx)


def _is_cmp(x: z3.ExprRef) -> bool:
    return z3.is_le(x) or z3.is_lt(x) or z3.is_ge(x) or z3.is_gt(x)


def _numeric_literal_parents(roots: tuple[z3.ExprRef, ...]) -> Iterator[tuple[z3.ExprRef, int]]:
    """(term, index) for each integer literal that is a number: an argument of arithmetic or a
    comparison, or a value of an if whose other value is not an enum code's; an equality with
    an enum field is a test of a code, not a number."""
    for x in _subterms(roots):
        kids = x.children()
        if z3.is_eq(x) or z3.is_distinct(x):
            if any(k.get_id() in _ENUM_VARS for k in kids) or not z3.is_int(kids[0]):
                continue
        elif not (z3.is_arith(x) or _is_cmp(x) or z3.is_app_of(x, z3.Z3_OP_ITE)):
            continue
        for i, k in enumerate(kids):
            if z3.is_int_value(k) and not (z3.is_app_of(x, z3.Z3_OP_ITE) and i == 0):
                yield x, i


def _enum_valued(e: z3.ExprRef) -> set[int]:
    """Ids of the if-terms that compute an enum field's new value (their literals are codes)."""
    out: set[int] = set()
    while z3.is_app_of(e, z3.Z3_OP_ITE):
        out.add(e.get_id())
        _, a, b = e.children()
        out |= _enum_valued(a)
        e = b
    return out


class _Action:
    """One action of a variant as the operators see it: guard, effect, updated fields."""

    def __init__(self, a: Action, base: Variant):
        raw = a.guard(PRE, base)
        self.name = a.name
        self.guard: z3.BoolRef = raw if isinstance(raw, z3.ExprRef) else z3.BoolVal(bool(raw))
        self.effect: tuple[z3.ExprRef, ...] = action_terms(a, base).effect
        self.updated = [j for j, f in enumerate(FIELDS)
                        if not z3.simplify(self.effect[j]).eq(getattr(PRE, f))]

    def spec(self, tag: str, doc: str, guard: z3.BoolRef | None = None,
             effect: tuple[z3.ExprRef, ...] | None = None) -> Spec:
        return Spec(f"{self.name}/{tag}", f"{self.name}: {doc}", self.name,
                    self.guard if guard is None else guard, self.effect if effect is None else effect)

    def everywhere(self, old: z3.ExprRef, new: z3.ExprRef) -> tuple[z3.BoolRef, tuple[z3.ExprRef, ...]]:
        """Guard and effect with `old` replaced by `new` wherever it occurs."""
        return (z3.substitute(self.guard, (old, new)),
                tuple(z3.substitute(e, (old, new)) for e in self.effect))

    def roots(self) -> tuple[z3.ExprRef, ...]:
        """The guard and each update (not the fields kept as they are)."""
        return (self.guard, *(self.effect[j] for j in self.updated))


def _structure(act: _Action) -> Iterator[Spec]:
    for i, (what, g) in enumerate(_conjunct_drops(act.guard)):
        yield act.spec(f"drop/{i}", f"guard without `{what}`", guard=g)
    for i, (what, g) in enumerate(_ack_swaps(act.guard)):
        yield act.spec(f"ack-flip/{i}", f"guard tests `{what}` the other way", guard=g)
    eff = act.effect
    for j in act.updated:
        f, e, mine = FIELDS[j], eff[j], getattr(PRE, FIELDS[j])
        skip = eff[:j] + (mine,) + eff[j + 1:]
        yield act.spec(f"skip/{f}", f"effect skips `{f} := {show(e, 50)}`", effect=skip)
        if f in OTHER_SIDE:
            moved = list(skip)
            moved[FIELDS.index(OTHER_SIDE[f])] = _other_side(e)
            yield act.spec(f"other-side/{f}", f"`{f} := ...` applied to {OTHER_SIDE[f]} instead",
                           effect=tuple(moved))
        if f in FLIP:
            flipped = _flip_leaves(e, FLIP[f])
            if not flipped.eq(e):
                yield act.spec(f"flip/{f}", f"`{f}` success and failure swapped "
                                            f"(`{show(flipped, 50)}`)", effect=eff[:j] + (flipped,) + eff[j + 1:])


def _constants(act: _Action) -> Iterator[Spec]:
    codes: set[int] = set()
    for j in act.updated:
        if FIELDS[j] in ENUM_FIELDS:
            codes |= _enum_valued(act.effect[j])
    sites = [(x, i) for x, i in _numeric_literal_parents(act.roots()) if x.get_id() not in codes]
    # a numeric field's new value that is itself a literal (`stage := 0`)
    tops = [j for j in act.updated if z3.is_int_value(act.effect[j]) and FIELDS[j] not in ENUM_FIELDS
            and FIELDS[j] not in BOOL_FIELDS]
    k = 0
    for x, i in sites:
        kids = x.children()
        for delta in (1, -1):
            new = _rebuild(x, kids[:i] + [z3.IntVal(kids[i].as_long() + delta)] + kids[i + 1:])
            g, eff = act.everywhere(x, new)
            yield act.spec(f"const{delta:+d}/{k}", f"`{show(x, 40)}` written `{show(new, 40)}`", g, eff)
        k += 1
    for j in tops:
        for delta in (1, -1):
            new = z3.IntVal(act.effect[j].as_long() + delta)
            yield act.spec(f"const{delta:+d}/{FIELDS[j]}", f"`{FIELDS[j]} := {new}`",
                           effect=act.effect[:j] + (new,) + act.effect[j + 1:])


def _comparisons(act: _Action) -> Iterator[Spec]:
    swap = {z3.Z3_OP_LE: z3.Z3_OP_LT, z3.Z3_OP_LT: z3.Z3_OP_LE,
            z3.Z3_OP_GE: z3.Z3_OP_GT, z3.Z3_OP_GT: z3.Z3_OP_GE}
    make = {z3.Z3_OP_LE: lambda a, b: a <= b, z3.Z3_OP_LT: lambda a, b: a < b,
            z3.Z3_OP_GE: lambda a, b: a >= b, z3.Z3_OP_GT: lambda a, b: a > b}
    for k, x in enumerate(s for s in _subterms(act.roots()) if _is_cmp(s)):
        a, b = x.children()
        op = x.decl().kind()
        for tag, new in (("strict", make[swap[op]](a, b)), ("reversed", make[op](b, a))):
            g, eff = act.everywhere(x, new)
            yield act.spec(f"{tag}/{k}", f"`{show(x, 40)}` written `{show(new, 40)}`", g, eff)


def _read_swaps(act: _Action) -> Iterator[Spec]:
    ids = {x.get_id() for x in _subterms(act.roots())}
    for f, g in OTHER_SIDE.items():
        old, new = getattr(PRE, f), getattr(PRE, g)
        if old.get_id() in ids:
            guard, eff = act.everywhere(old, new)
            # the swapped read, not a write: each field keeps its own variable where kept
            eff = tuple(eff[j] if j in act.updated else act.effect[j] for j in range(len(FIELDS)))
            yield act.spec(f"read-swap/{f}", f"reads `{g}` where it meant `{f}`", guard, eff)


def _reorders(act: _Action) -> Iterator[Spec]:
    for j in act.updated:
        for k in act.updated:
            mine, theirs = getattr(PRE, FIELDS[k]), act.effect[j]
            if j == k or mine.get_id() not in {x.get_id() for x in _subterms((theirs,))}:
                continue
            late = z3.substitute(theirs, (mine, act.effect[k]))
            yield act.spec(f"reorder/{FIELDS[j]}-after-{FIELDS[k]}",
                           f"`{FIELDS[j]}` computed from `{FIELDS[k]}`'s new value",
                           effect=act.effect[:j] + (late,) + act.effect[j + 1:])


OPERATORS = (_structure, _constants, _comparisons, _read_swaps, _reorders)


def specs(base: Variant, action: str | None = None) -> Iterator[Spec]:
    """Every generated mutant of `base` (or of its one `action`): per action (in order), each
    operator's sites in order. A mutation Z3 proves the same as the action, or as an earlier
    mutant of it, is not a new mutant (a literal off by one in either term of `x + 1 >= 3` is
    one slip, counted once)."""
    for a in base.actions if action is None else (base.action(action),):
        act = _Action(a, base)
        itself = act.spec("", "")
        kept: dict[tuple[bool, tuple[int, ...]], list[Spec]] = {}
        solver = z3.Solver()
        for op in OPERATORS:
            for s in op(act):
                shape = _shape(act, s)
                if not shape[0] and not shape[1]:
                    continue  # syntactically the action itself
                if not any(_same(solver, k, s) for k in [itself, *kept.get(shape, [])]):
                    kept.setdefault(shape, []).append(s)
                    yield s


def _shape(act: _Action, s: Spec) -> tuple[bool, tuple[int, ...]]:
    """Whether the guard changed, and which fields' updates did (syntactically)."""
    return (not s.guard.eq(act.guard),
            tuple(j for j, (x, y) in enumerate(zip(s.effect, act.effect)) if not x.eq(y)))


def _same(solver: z3.Solver, a: Spec, b: Spec) -> bool:
    """The two relate the same pairs of states: equal guards, equal updates where enabled."""
    diff = [z3.Not(e == f) for e, f in zip(a.effect, b.effect) if not e.eq(f)]
    claim = z3.Or(a.guard != b.guard, z3.And(a.guard, z3.Or(*diff)) if diff else False)
    return solver.check(claim) == z3.unsat
