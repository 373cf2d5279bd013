"""Two migrations of two requests that share an instance, checked as one system by Z3.

The composition argument (models/scope.py) lifts one link's proof to many by obligations; this
checks the lift itself for two links, a and b, of the same variant, that share one instance in
any pair of roles (both out of one S, both into one D, one out of and one into it, both sharing
S and D), or both instances (same S and D, or swapped: a chain back and forth). The shared
instance is one pool: its free blocks are the same in both links, each link's `other` is the
other link's blocks plus a common outside load, it is alive in both or neither, and when both
links use it as D, its one migration slot is held by at most one of them.

A step of the product is a step of link a (b's steps are the mirror image): b sees the shared
instance as a's step left it. Z3 checks that Inv(a) /\\ Inv(b) /\\ C(a, b) (Inv: the variant's
inductive invariant, C: the coupling) is inductive for every action of a, and that the
product's initial states satisfy it. Then every property that Inv implies holds in every
reachable state of two concurrent migrations sharing instances, for every size (unbounded).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import z3

from llumverify.protocol.state import Slot, State, initial
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import POST, PRE, encode, symbolic_state
from llumverify.models.scope import Obligation, invariant

# what an instance is in each role: (free, other, alive, capacity, the link's own blocks there)
ROLES = {
    "S": ("s_free", "s_other", "s_alive", "s_cap", ("s_blocks",)),
    "D": ("d_free", "d_other", "d_alive", "d_cap", ("d_res", "d_blocks")),
}
# which instances the two links share: (role in a, role in b) per shared instance
SHARINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "same S": (("S", "S"),),
    "same D": (("D", "D"),),
    "a's D is b's S": (("D", "S"),),
    "a's S is b's D": (("S", "D"),),
    "same S and D": (("S", "S"), ("D", "D")),
    "swapped": (("S", "D"), ("D", "S")),
}


def _own(s: State, role: str) -> z3.ArithRef:
    return z3.Sum(*(getattr(s, f) for f in ROLES[role][4]))


def views(a: State, b: State, sharing: tuple[tuple[str, str], ...], outside: list[z3.ArithRef]) -> z3.BoolRef:
    """What makes b's view of each shared instance a's: same free pool, liveness and capacity,
    and each link's `other` is the other's blocks plus the outside load."""
    out = []
    for (ra, rb), x in zip(sharing, outside):
        fa, oa, la, ca, _ = ROLES[ra]
        fb, ob, lb, cb, _ = ROLES[rb]
        out += [getattr(a, fa) == getattr(b, fb), getattr(a, la) == getattr(b, lb),
                getattr(a, ca) == getattr(b, cb),
                getattr(a, oa) == _own(b, rb) + x, getattr(b, ob) == _own(a, ra) + x]
    return z3.And(*out)


def consistent(a: State, b: State, sharing: tuple[tuple[str, str], ...], outside: list[z3.ArithRef]) -> z3.BoolRef:
    """No link takes the other's blocks (the outside load stays >= 0), and a shared D's one
    migration slot is held by at most one of them (and is free for both or neither)."""
    out = [x >= 0 for x in outside]
    if ("D", "D") in sharing:
        out += [(a.d_slot == Slot.FREE) == (b.d_slot == Slot.FREE),
                z3.Implies(a.d_slot == Slot.OURS, b.d_slot == Slot.OTHER),
                z3.Implies(b.d_slot == Slot.OURS, a.d_slot == Slot.OTHER)]
    return z3.And(*out)


def coupling(a: State, b: State, sharing: tuple[tuple[str, str], ...], outside: list[z3.ArithRef]) -> z3.BoolRef:
    return z3.And(views(a, b, sharing, outside), consistent(a, b, sharing, outside))


@dataclass(frozen=True)
class ProductResult:
    sharing: str
    holds: bool
    why: str = ""


def _check(v: Variant, name: str, inv: tuple[z3.BoolRef, ...]) -> ProductResult:
    sharing = SHARINGS[name]
    enc = encode(v)
    b, b2 = symbolic_state("pb_"), symbolic_state("pb2_")
    x = [z3.Int(f"px{i}") for i in range(len(sharing))]
    x2 = [z3.Int(f"px2_{i}") for i in range(len(sharing))]
    inv_at = [lambda s, c=c: enc.at(c, s) for c in inv]

    start = z3.Solver()
    start.add(initial(PRE), v.pinned(PRE), initial(b), v.pinned(b), coupling(PRE, b, sharing, x))
    if start.check(z3.Not(z3.And(*(f(b) for f in inv_at)))) == z3.sat:
        return ProductResult(name, False, "a coupled initial state breaks b's invariant")

    # b's side of a's step: only the shared instances' fields move, as a's step left them
    shared_b = {f for _, rb in sharing for f in ROLES[rb][:4]} | \
        ({"d_slot"} if any(r == ("D", "D") for r in sharing) else set())
    frame = [getattr(b2, f) == getattr(b, f) for f in b.as_dict() if f not in shared_b]
    slot = []
    if ("D", "D") in sharing:  # b holds the slot as before; otherwise it is FREE iff a's is
        slot.append(z3.If(b.d_slot == Slot.OURS, b2.d_slot == Slot.OURS,
                          b2.d_slot == z3.If(POST.d_slot == Slot.FREE, Slot.FREE, Slot.OTHER)))
    solver = z3.Solver()
    solver.add(*(f(PRE) for f in inv_at), *(f(b) for f in inv_at), coupling(PRE, b, sharing, x),
               *frame, *slot, views(POST, b2, sharing, x2))
    goal = z3.And(*(f(POST) for f in inv_at), *(f(b2) for f in inv_at), consistent(POST, b2, sharing, x2))
    for action, rel in enc.relations.items():
        premise = rel
        if action == "other_mig_out" and ("D", "D") in sharing:  # the migration that ends is
            premise = z3.And(rel, b.d_slot != Slot.OURS)          # not b (b's own step does that)
        if solver.check(premise, z3.Not(goal)) == z3.sat:
            return ProductResult(name, False, f"{action} of one link breaks the two links' invariant")
    return ProductResult(name, True)


@functools.lru_cache(maxsize=16)
def product(v: Variant) -> tuple[ProductResult, ...]:
    """Each way two links of `v` can share instances, checked (see the module docstring)."""
    inv = tuple(invariant(v).values())
    return tuple(_check(v, name, inv) for name in SHARINGS)


def two_links(v: Variant) -> Obligation:
    """The product as one more composition obligation (`check` runs it for our designs)."""
    failed = [r for r in product(v) if not r.holds]
    return Obligation("two_links", not failed, "; ".join(f"{r.sharing}: {r.why}" for r in failed))
