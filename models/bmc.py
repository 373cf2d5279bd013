"""Bounded model checking: the shortest counterexample to each property, and reachability.

One incremental solver unrolls the transition relation step by step; at each depth the
still-open goals are checked together under push/pop (their disjunction: one unsat answer clears
them all; a model settles every goal it reaches, and the others are asked again). Since depths are tried in increasing order, the first
counterexample found for a property is a shortest one. A goal an unsat answer cleared at a depth is then asserted
false at that depth (`Unroller._cleared`): implied, so no answer and no trace changes, only the time. Each step has an action label (an Int
naming the action), so a model reads back as a list of action names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import z3

from llumverify.protocol.state import CONSTANT_FIELDS, FIELDS, State
from llumverify.protocol.variants import Variant
from llumverify.models.encoding import Encoding, encode, symbolic_state
from llumverify.models.trace import Trace

# Z3's arithmetic solver for the unrolled queries: 2 (the older simplex core) instead of the default
# 6: the same answers (every printed trace is the lexicographically least, whatever the solver
# finds first), found faster on these queries (docs/ci.md, session 29).
ARITH_SOLVER = 2

Goal = Callable[[State], z3.BoolRef]
StepGoal = Callable[[State, State], z3.BoolRef]  # over the last step (pre, post) of a trace
Settle = tuple[int, Callable[[list[str]], set[str]]]  # search's hook: at this depth, goals shown unreachable


class Unroller:
    """Init and k steps of the variant's transition relation in one incremental solver."""

    def __init__(self, v: Variant, invariant: Sequence[Goal] = ()) -> None:
        """invariant: predicates already proved to hold in every reachable state; asserting
        them at every step is sound and prunes the search (it never hides a trace)."""
        self.enc: Encoding = encode(v)
        self.invariant = tuple(invariant)
        self.names = list(self.enc.relations)
        self.solver = z3.Solver()
        self.solver.set("smt.arith.solver", ARITH_SOLVER)
        self.states = [symbolic_state("s0_")]
        self.labels: list[z3.ArithRef] = []
        self.solver.add(self.enc.at(self.enc.init, self.states[0]))
        self._assume(self.states[0])

    def _assume(self, s: State) -> None:
        self.solver.add(*(z3.And(p(s)) for p in self.invariant))

    @property
    def depth(self) -> int:
        return len(self.labels)

    def step(self) -> None:
        k = self.depth
        pre, post = self.states[k], symbolic_state(f"s{k + 1}_")
        label = z3.Int(f"act{k}")
        self.solver.add(self.enc.at(self.enc.step, pre, post, label))
        self.states.append(post)
        self.labels.append(label)
        self._assume(post)

    def find(self, goal: z3.BoolRef, timeout_ms: int = 0) -> Trace | None | str:
        """A trace of exactly the current depth ending in a state where goal holds; None if
        there is none; "unknown" if the solver ran out of time."""
        self.solver.push()
        result = z3.unknown
        try:
            self.solver.add(goal)
            self.solver.set("timeout", timeout_ms)
            result = self.solver.check()
            if result == z3.unknown:
                return "unknown"
            return self._trace(self.solver.model()) if result == z3.sat else None
        finally:
            self.solver.pop()
            self._cleared(goal, result)

    def find_any(self, goals: Mapping[str, z3.BoolRef], timeout_ms: int = 0
                 ) -> tuple[Trace, list[str]] | None | str:
        """A trace of exactly the current depth ending where some goal holds, with the names of
        all goals it reaches; None if there is none; "unknown" if the solver ran out of time."""
        self.solver.push()
        result = z3.unknown
        try:
            self.solver.add(z3.Or(*goals.values()))
            self.solver.set("timeout", timeout_ms)
            result = self.solver.check()
            if result == z3.unknown:
                return "unknown"
            if result == z3.unsat:
                return None
            m = self.solver.model()
            hit = [n for n, g in goals.items() if z3.is_true(m.eval(g, model_completion=True))]
            return self._trace(m), hit
        finally:
            self.solver.pop()
            self._cleared(z3.Or(*goals.values()), result)

    def _cleared(self, goal: z3.BoolRef, result: z3.CheckSatResult) -> None:
        """After an unsat answer, assert that goal fails in the current last state. Sound: in any
        longer unrolling that state ends a trace of this length, which the answer just ruled out.
        Not new facts, but the solver no longer re-derives them at every deeper step: the mutant
        later_alloc_no_memory_check's violation at depth 7 took 12.7 s, now 1.7 s (docs/ci.md,
        session 36). Implied lemmas leave the set of models, so every least trace, unchanged."""
        if result == z3.unsat:
            self.solver.add(z3.Not(goal))

    def least(self, goal: z3.BoolRef) -> Trace:
        """The lexicographically least trace of the current depth reaching goal (which must be
        reachable): action labels first, then the initial state's fields (constants and the
        request as printed, then the rest), then each later state's. Unlike the solver's first
        model, this does not change when lemmas or other goals change the query, so printed
        traces (and the reports that quote them) stay put."""
        order = [*self.labels]
        for s in self.states:
            shown = (*CONSTANT_FIELDS, "nblk", "tok", "s_free", "d_free") if s is self.states[0] else ()
            order += [getattr(s, f) for f in (*shown, *(f for f in FIELDS if f not in shown))]
        self.solver.push()
        try:
            self.solver.set("timeout", 0)
            self.solver.add(goal)
            assert self.solver.check() == z3.sat, "least() needs a reachable goal"
            m = self.solver.model()
            fixed_by_init = len(self.labels) + len(FIELDS)
            for i, x in enumerate(order):
                if i == fixed_by_init and self._unique(m, order[i:]):
                    break  # labels and initial state fix the rest: nothing left to choose
                m = self._fix_least(x, m)
            return self._trace(m)
        finally:
            self.solver.pop()

    def _unique(self, m: z3.ModelRef, rest: Sequence[z3.ExprRef]) -> bool:
        """No other assignment of `rest` is consistent with what is fixed so far."""
        differs = z3.Or(*(x != m.eval(x, model_completion=True) for x in rest))
        return self.solver.check(differs) == z3.unsat

    def _fix_least(self, x: z3.ExprRef, m: z3.ModelRef) -> z3.ModelRef:
        """Assert x equal to its least value consistent with what is fixed (False before True;
        for a count, by bisection from 0 up to m's value); return a model with that value."""
        v = m.eval(x, model_completion=True)
        if z3.is_bool(x):
            if z3.is_true(v) and self.solver.check(z3.Not(x)) == z3.sat:
                v, m = z3.BoolVal(False), self.solver.model()
        else:
            lo, hi = 0, v.as_long()
            while lo < hi:
                mid = (lo + hi) // 2
                if self.solver.check(x <= mid) == z3.sat:
                    m = self.solver.model()
                    hi = m.eval(x, model_completion=True).as_long()
                else:
                    lo = mid + 1
            v = z3.IntVal(hi)
        self.solver.add(x == v)
        return m

    def _trace(self, m: z3.ModelRef) -> Trace:
        def value(x: z3.ExprRef) -> int | bool:
            val = m.eval(x, model_completion=True)
            return z3.is_true(val) if z3.is_bool(val) else val.as_long()

        states = tuple(State(**{f: value(getattr(s, f)) for f in FIELDS}) for s in self.states)
        return Trace(tuple(self.names[value(lb)] for lb in self.labels), states)


@dataclass(frozen=True)
class BmcResult:
    """Per goal: the shortest trace reaching it, or None if none exists within `reached[goal]`
    steps (the requested depth, or less when the time budget ran out first)."""

    traces: Mapping[str, Trace | None]
    reached: Mapping[str, int]


def search(v: Variant, goals: Mapping[str, Goal], depth: int,
           invariant: Sequence[Goal] = (), budget_s: float = 0.0,
           step_goals: Mapping[str, StepGoal] | None = None, least: bool = False,
           settle: Settle | None = None) -> BmcResult:
    """Shortest traces (up to depth steps) to states satisfying each goal, or (for a name in
    `step_goals`) whose last step satisfies its step goal. With a budget, a goal whose search
    runs out of time keeps the depth it was cleared to (never a guess). With `least`, each
    trace is the lexicographically least of its length (`Unroller.least`), not the first the
    solver finds. With `settle` (depth k, its function), the goals still open once depth
    min(k, depth) is cleared are passed to the function, and those it returns (shown
    unreachable by other means) are searched no further."""
    deadline = time.monotonic() + budget_s if budget_s else None
    un = Unroller(v, invariant)
    steps = dict(step_goals or {})
    found: dict[str, Trace | None] = {name: None for name in goals}
    reached = {name: depth for name in goals}
    open_ = set(goals)

    def goal(name: str) -> z3.BoolRef:
        g = goals[name](un.states[-1])
        if name in steps and un.depth >= 1:
            g = z3.Or(g, steps[name](un.states[-2], un.states[-1]))
        return g

    while True:
        # One query for all open goals at this depth: unsat clears them all at once; a model
        # settles every goal it satisfies (a shortest trace for each: none was reachable in
        # fewer steps), and the rest are asked again.
        while open_:
            terms = {name: goal(name) for name in goals if name in open_}
            left = 0 if deadline is None else max(1, int(1000 * (deadline - time.monotonic())))
            got = un.find_any(terms, left)
            if got == "unknown":
                for name in terms:
                    reached[name] = un.depth - 1
                open_.clear()
            elif got is None:
                break
            else:
                trace, hit = got
                for name in hit:
                    found[name] = un.least(terms[name]) if least else trace
                    open_.discard(name)
        if open_ and settle is not None and un.depth == min(settle[0], depth):
            open_ -= settle[1]([name for name in goals if name in open_])
        if not open_ or un.depth >= depth:
            return BmcResult(found, reached)
        un.step()


def violations(v: Variant, predicates: Mapping[str, Goal], depth: int,
               invariant: Sequence[Goal] = (), budget_s: float = 0.0,
               steps: Mapping[str, StepGoal] | None = None, least: bool = False,
               settle: Settle | None = None) -> BmcResult:
    """Shortest counterexample to each predicate, or to its step predicate in `steps` (None:
    holds up to the depth reached); with `least`, the lexicographically least one; `settle`:
    as for `search` (the names it returns are proved, not violated)."""
    return search(v, {n: (lambda s, p=p: z3.Not(p(s))) for n, p in predicates.items()},
                  depth, invariant, budget_s,
                  {n: (lambda a, b, p=p: z3.Not(p(a, b))) for n, p in (steps or {}).items()},
                  least, settle)


def distinct_violations(v: Variant, predicate: Goal, depth: int, limit: int,
                        invariant: Sequence[Goal] = (), step: StepGoal | None = None) -> list[Trace]:
    """Up to `limit` counterexamples to one property, each a shortest one among the traces that
    use a different set of actions from every one found before (the first is the property's
    shortest): a second defect hidden behind a shorter one shows up as a trace through other
    actions, not as the same trace with an extra step."""
    un = Unroller(v, invariant)
    index = {a: i for i, a in enumerate(un.names)}
    found: list[Trace] = []

    def differs(t: Trace, labels: Sequence[z3.ArithRef]) -> z3.BoolRef:
        used = set(t.actions)
        return z3.Or(*(z3.Or(*(lb == index[a] for lb in labels)) != (a in used) for a in un.names))

    while len(found) < limit:
        goal = z3.Not(z3.And(predicate(un.states[-1])))
        if step is not None and un.depth >= 1:
            goal = z3.Or(goal, z3.Not(z3.And(step(un.states[-2], un.states[-1]))))
        goal = z3.And(goal, *(differs(t, un.labels) for t in found))
        got = un.find(goal)
        if isinstance(got, Trace):
            found.append(un.least(goal))
            continue
        if un.depth >= depth:
            break
        un.step()
    return found
