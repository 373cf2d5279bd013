"""Liveness under weak fairness once failures stop: the explicit state graph, and a ranking proof.

Explicit (small bounds). From every initial configuration of `BOUND` (tiny requests and pools:
one block, a free block or none on S, thresholds 0 and 1) the reachable concrete states of the
variant are enumerated into a networkx DiGraph. The successor function is the variant's own
guards and effects (their Z3 terms compiled back to Python, models/compile.py; a test checks it
against the protocol's actions state for state). Then, with failure edges removed (failures
stop), every strongly connected component is a candidate for the rest of an execution: it is
*fair* if each fair process (properties/liveness.py) either takes a step inside it or is disabled
somewhere in it; a single state where no fair process is enabled is fair too (the execution
stutters there). A fair component reachable from an initial state that contains a state where a
property's goal is false is a lasso counterexample: the shortest path to it (failures allowed),
then a cycle through it that takes or disables every fair process.

Unbounded (where a ranking function exists). A lexicographic ranking r over the state (S's
remaining stages and coordinator point; messages in flight to a live D; a live D's lease; a
reservation a dead S left) and Q = every goal plus nothing in flight. Z3 checks, over the
variant's Houdini invariant Inv plus a few liveness lemmas (pruned by Houdini too):
  (0) Q is stable under every non-failure step;
  (1) no non-failure step from a non-Q state increases r (or it reaches Q);
  (2) every step of a fair process from a non-Q state decreases r (or reaches Q);
  (3) in a non-Q state some fair process is enabled;
  (4) a step of the unfair world that keeps r keeps every enabled fair process enabled;
  (5) r's components are never negative.
Then no fair execution whose failures stop avoids Q for ever: after finitely many decreases r
stays put, only the world moves, and by (3, 4) some process stays enabled without acting,
which weak fairness forbids. Q is stable (0), so every goal holds for good: <>[]goal.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import networkx as nx
import z3

from llumverify.protocol.api import start_migration
from llumverify.protocol.ops import Val, add, and_, implies, ite, le, lt, not_, one_of
from llumverify.protocol.state import FIELDS, Ack, Mig, Pc, Req, State
from llumverify.protocol.variants import Variant
from llumverify.models.compile import source, tuple_successors
from llumverify.models.encoding import PRE, encode
from llumverify.models.induction import candidates_for, houdini
from llumverify.models.trace import Trace
from llumverify.properties.liveness import (
    FAILURE_UNLESS_DISABLED, FAILURES, LIVENESS, Liveness, fair_groups, quiescent,
)
from llumverify.properties.safety import PROPERTIES

# The explicit bound: a one-block request, D with exactly room for it (other load can always
# take that: d_oom), watermark 0, one token per block; S with no free block (threshold 0: a
# non-final stage first; threshold 1: final at once) or one (so the request can grow).
BOUND: tuple[dict[str, int], ...] = (
    dict(blocks=1, src_free=0, dst_free=1, block_size=1, last_stage_blocks=0),
    dict(blocks=1, src_free=0, dst_free=1, block_size=1, last_stage_blocks=1),
    dict(blocks=1, src_free=1, dst_free=1, block_size=1, last_stage_blocks=1),
)
BOUND_TEXT = "1-block request, D free 1, S free 0 (threshold 0, 1) or 1 (threshold 1)"


# ---- the explicit state graph ----------------------------------------------------------------

@dataclass
class StateGraph:
    """The reachable states of a variant within a bound. `labels` holds its failure-free steps
    (what an execution may do once failures stop) with the actions of each, `graph` the same as
    a networkx DiGraph; `out` keeps every step, failures included, for the shortest prefixes."""

    variant: Variant
    names: tuple[str, ...]  # action names, by index
    states: list[tuple[Any, ...]]  # node id -> state as a tuple in FIELDS order
    enabled: list[frozenset[int]]  # node id -> actions enabled there
    out: list[list[tuple[int, int]]]  # node id -> (action, next node) for every step
    roots: list[int]
    labels: dict[tuple[int, int], frozenset[int]]  # failure-free steps (u, w) -> their actions
    violation: tuple[int, list[str]] | None = None  # the monitor's first finding (then partial)

    @functools.cached_property
    def graph(self) -> nx.DiGraph:
        """The failure-free steps as a DiGraph, built when first read: only the liveness checks
        read it, and building it was a quarter of exploring for the checks that only read the
        states (coverage, a monitor's finding)."""
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.states)))
        g.add_edges_from(self.labels)
        return g

    def state(self, i: int) -> State:
        return State(**dict(zip(FIELDS, self.states[i])))

    def full_graph(self) -> nx.DiGraph:
        """Every step, failures included (for inspection; the checks use `graph` and `out`)."""
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.states)))
        for u, steps in enumerate(self.out):
            for a, w in steps:
                if g.has_edge(u, w):
                    g.edges[u, w]["actions"] |= {a}
                else:
                    g.add_edge(u, w, actions={a})
        return g


@functools.lru_cache(maxsize=64)
def _successors(v: Variant) -> tuple[tuple[str, ...], Callable[[tuple[Any, ...]], list[Any]]]:
    enc = encode(v)
    names = tuple(enc.relations)
    succ = tuple_successors([enc.guards[n] for n in names], [enc.effects[n] for n in names],
                            enc.pre)
    return names, succ


@functools.lru_cache(maxsize=256)
def tuple_predicate(pred: Callable[[State], Val]) -> Callable[[tuple[Any, ...]], bool]:
    """A state predicate compiled to a function of a tuple state (via its Z3 term)."""
    src = source(z3.And(pred(PRE)), "tuple", str)
    env: dict[str, Any] = {}
    exec(f"def p(t):\n    ({', '.join(FIELDS)},) = t\n    return {src}", env)  # noqa: S102
    return env["p"]  # type: ignore[no-any-return]


def roots(v: Variant, bound: Sequence[Mapping[str, int]] = BOUND) -> list[tuple[Any, ...]]:
    """The bound's initial states; where the variant may pick a request mid-prefill, each also
    with the prefill still running."""
    out: list[tuple[Any, ...]] = []
    for cfg in bound:
        for prefill in ((False, True) if v.picks_in_prefill else (False,)):
            s = start_migration(variant=v, prefill_running=prefill, **cfg).state  # type: ignore[arg-type]
            t = tuple(getattr(s, f) for f in FIELDS)
            if t not in out:
                out.append(t)
    return out


def _failures(v: Variant, names: Sequence[str]) -> tuple[frozenset[int], dict[int, int]]:
    pos = {n: i for i, n in enumerate(names)}
    always = frozenset(pos[n] for n in FAILURES if n in pos)
    cond = {pos[a]: pos[b] for a, b in FAILURE_UNLESS_DISABLED.items() if a in pos and b in pos}
    return always, cond


Monitor = Callable[[tuple[Any, ...] | None, tuple[Any, ...], bool], list[str]]
StateMonitor = Callable[[tuple[Any, ...], frozenset[int]], list[str]]


def explore(v: Variant, bound: Sequence[Mapping[str, int]] = BOUND,
            limit: int = 2_000_000, monitor: Monitor | None = None,
            at_state: StateMonitor | None = None) -> StateGraph:
    """Every state reachable from the bound's initial states, breadth first. A monitor, if
    given, sees every initial state (pre None), every step and whether its target is new, and
    returns what it finds wrong; `at_state` sees each state with the actions enabled in it as it
    is expanded. Exploring stops at the first finding (with one monitor, a shortest one: states
    and steps are seen in breadth-first order), recorded with its length; the graph is then partial
    (`enabled` and `out` cover the expanded states only) and only `violation` may be read."""
    names, succ = _successors(v)
    always, cond = _failures(v, names)
    index: dict[tuple[Any, ...], int] = {}
    states: list[tuple[Any, ...]] = []
    enabled: list[frozenset[int]] = []
    out: list[list[tuple[int, int]]] = []
    free: dict[tuple[int, int], set[int]] = {}
    queue: deque[int] = deque()
    root_ids = []
    dist: list[int] = []
    found: tuple[int, list[str]] | None = None
    for t in roots(v, bound):
        index[t] = len(states)
        states.append(t)
        dist.append(0)
        root_ids.append(index[t])
        queue.append(index[t])
        bad = monitor(None, t, True) if monitor is not None else None
        if bad:
            found = (0, bad)
            queue.clear()
            break
    while queue:
        u = queue.popleft()
        steps = []
        here = succ(states[u])
        en = frozenset([i for i, _ in here])
        bad = at_state(states[u], en) if at_state is not None else None
        if bad:
            found = (dist[u], bad)
            queue.clear()
            here = []
        for i, t in here:
            w = index.get(t)
            new = w is None
            if w is None:
                w = index[t] = len(states)
                states.append(t)
                dist.append(dist[u] + 1)
                queue.append(w)
                if len(states) > limit:
                    raise RuntimeError(f"{v.name}: more than {limit} states")
            steps.append((i, w))
            if monitor is not None:
                bad = monitor(states[u], t, new)
                if bad:
                    found = (dist[u] + 1, bad)
                    queue.clear()
                    break
            if i not in always and cond.get(i, -1) not in en:
                free.setdefault((u, w), set()).add(i)
        enabled.append(en)  # node ids are handed out in queue order
        out.append(steps)
    return StateGraph(v, names, states, enabled, out, root_ids, {e: frozenset(a) for e, a in free.items()}, found)


def covered(sg: StateGraph, goals: Mapping[str, Callable[[State], Val]]) -> set[str]:
    """The goals some explored state meets (each looked for in breadth-first order: most are met
    near the initial states)."""
    return {n for n, g in goals.items() if any(map(tuple_predicate(g), sg.states))}


# ---- lassos ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Lasso:
    """An execution that never (for good) reaches a liveness goal: `prefix` from an initial
    state, then `loop` (from prefix's last state back to it) for ever; an empty loop means
    the execution stays in that state, where no fair process is enabled."""

    prefix: Trace
    loop: Trace

    def __len__(self) -> int:
        return len(self.prefix) + len(self.loop)

    def render(self) -> str:
        lines = [self.prefix.render()]
        if not self.loop.actions:
            lines.append("  then for ever: no step of S, D or the lease watcher is enabled")
            return "\n".join(lines)
        lines.append("  then for ever, repeating:")
        body = self.loop.render().splitlines()[1:]  # its initial line is the prefix's last state
        n = len(self.prefix)
        for j, line in enumerate(body):
            lines.append(f"  {n + j + 1:2d}." + line[5:])
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix.to_json(),
                "loop": [{"action": a, "changes": self.loop.changes(i)}
                         for i, a in enumerate(self.loop.actions)]}


@dataclass(frozen=True)
class LivenessResult:
    name: str
    verdict: str  # PROVED | HOLDS | VIOLATED
    states: int  # explicit states explored
    lasso: Lasso | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"property": self.name, "verdict": self.verdict,
                               "explicit_states": self.states, "bound": BOUND_TEXT}
        if self.lasso is not None:
            out["length"] = len(self.lasso)
            out["prefix_length"] = len(self.lasso.prefix)
            out["loop_length"] = len(self.lasso.loop)
            out["lasso"] = self.lasso.to_json()
        return out


class Fairness:
    """Which components of the failure-free graph are fair, and fair cycles through them."""

    def __init__(self, sg: StateGraph) -> None:
        self.sg = sg
        pos = {n: i for i, n in enumerate(sg.names)}
        self.group_of: dict[int, str] = {}
        self.groups: dict[str, frozenset[int]] = {}
        for g, acts in fair_groups(sg.variant).items():
            ids = frozenset(pos[a] for a in acts if a in pos)
            self.groups[g] = ids
            for i in ids:
                self.group_of[i] = g
        self.fair_all = frozenset(self.group_of)
        graph = sg.graph
        comps = []
        for comp in nx.strongly_connected_components(graph):
            if len(comp) == 1:
                (x,) = comp
                if not graph.has_edge(x, x):
                    continue
            c = frozenset(comp)
            if self._fair(c):
                comps.append(c)
        self.fair_components = comps
        self.stutter = frozenset(x for x in range(len(sg.states))
                                 if not (sg.enabled[x] & self.fair_all))

    def _taken(self, c: frozenset[int]) -> dict[str, tuple[int, int, int]]:
        """Per fair process, one edge inside c where it takes a step: (u, w, action)."""
        taken: dict[str, tuple[int, int, int]] = {}
        graph = self.sg.graph
        for u in sorted(c):
            for w in sorted(graph.successors(u)):
                if w in c:
                    for a in sorted(self.sg.labels[u, w]):
                        g = self.group_of.get(a)
                        if g is not None and g not in taken:
                            taken[g] = (u, w, a)
        return taken

    def _fair(self, c: frozenset[int]) -> bool:
        taken = self._taken(c)
        return all(g in taken or any(not (self.sg.enabled[x] & ids) for x in c)
                   for g, ids in self.groups.items())

    def cycle(self, c: frozenset[int], start: int) -> list[tuple[int, int, int]]:
        """Edges (u, w, action) of a cycle from start through c that is fair: it takes each
        process that acts in c, and visits a state where each other one is disabled."""
        sub = self.sg.graph.subgraph(c)
        taken = self._taken(c)
        out: list[tuple[int, int, int]] = []
        at = start

        def walk(to: int) -> None:
            nonlocal at
            path = nx.shortest_path(sub, at, to)
            for a, b in zip(path, path[1:]):
                out.append((a, b, min(self.sg.labels[a, b])))
            at = to

        for g, ids in self.groups.items():
            if g in taken:
                u, w, a = taken[g]
                walk(u)
                out.append((u, w, a))
                at = w
            else:
                walk(min(x for x in c if not (self.sg.enabled[x] & ids)))
        if at == start and not out:  # nothing required: go round once
            nxt = min(sub.successors(start))
            out.append((start, nxt, min(self.sg.labels[start, nxt])))
            at = nxt
        walk(start)
        return out


def _bfs_tree(sg: StateGraph) -> tuple[list[int], list[tuple[int, int]]]:
    """Shortest distance from an initial state (every step counts, failures too) and the
    (predecessor, action) it is reached by."""
    n = len(sg.states)
    dist = [-1] * n
    parent = [(-1, -1)] * n
    for r in sg.roots:
        dist[r] = 0
    queue = deque(sg.roots)
    while queue:
        u = queue.popleft()
        for a, w in sg.out[u]:
            if dist[w] < 0:
                dist[w] = dist[u] + 1
                parent[w] = (u, a)
                queue.append(w)
    return dist, parent


def _trace(sg: StateGraph, start: int, steps: list[tuple[int, int, int]]) -> Trace:
    states = [sg.state(start)] + [sg.state(w) for _, w, _ in steps]
    return Trace(tuple(sg.names[a] for _, _, a in steps), tuple(states))


def lassos(sg: StateGraph, props: Mapping[str, Liveness] = LIVENESS) -> dict[str, Lasso | None]:
    """Per property, the lasso with the shortest prefix (None: none within the graph)."""
    assert sg.violation is None, "lassos need the whole graph, not one a monitor cut short"
    fair = Fairness(sg)
    dist, parent = _bfs_tree(sg)
    owner: dict[int, frozenset[int]] = {x: c for c in fair.fair_components for x in c}
    candidates = sorted(set(owner) | fair.stutter, key=lambda x: (dist[x], x))
    out: dict[str, Lasso | None] = {}
    for name, prop in props.items():
        good = tuple_predicate(prop.predicate)
        x = next((y for y in candidates if not good(sg.states[y])), None)
        if x is None:
            out[name] = None
            continue
        path: list[tuple[int, int, int]] = []
        y = x
        while parent[y][0] >= 0:
            u, a = parent[y]
            path.append((u, y, a))
            y = u
        path.reverse()
        loop = [] if x in fair.stutter else fair.cycle(owner[x], x)
        out[name] = Lasso(_trace(sg, y, path), _trace(sg, x, loop))
    return out


# ---- the ranking proof -----------------------------------------------------------------------

def ranking(v: Variant, s: State) -> tuple[Val, ...]:
    """Lexicographic: S's remaining work (stages left, then where its coordinator is); messages
    on their way to a live D; a live D's lease; a reservation a dead S left on a live D (the
    v0.1.0 manager's clean-up)."""
    pc_rank = ite(s.pc == Pc.STAGE, 5, ite(s.pc == Pc.ALLOC, 4, ite(s.pc == Pc.COPY, 3, ite(
        s.pc == Pc.COMMIT, 2, ite(s.pc == Pc.RESOLVE, 1, 0)))))
    coordinating = and_(s.s_alive, s.status == Mig.RUNNING)
    work = ite(coordinating, add(1, 6 * (v.max_stages - s.stage), pc_rank), 0)
    msgs = add(*(ite(and_(s.d_alive, m), 1, 0)
                 for m in (s.m_alloc, s.m_copy, s.m_commit, s.m_free, s.m_fence)))
    lease = ite(and_(s.d_alive, s.lease), 1, 0)
    orphan = ite(and_(s.d_alive, not_(s.s_alive), lt(0, s.d_res)), 1, 0)
    return (work, msgs, lease, orphan)


def liveness_lemmas(v: Variant) -> dict[str, Callable[[State], Val]]:
    """Candidates about where S's coordinator waits and how far its stages go."""
    def waiting(pc: Pc, msg: str) -> Callable[[State], Val]:
        return lambda s: implies(and_(s.status == Mig.RUNNING, s.pc == pc, s.ack == Ack.NONE),
                                 getattr(s, msg))
    return {
        "live_stage_le_max": lambda s: le(s.stage, v.max_stages),
        "live_stage_below_max": lambda s: implies(and_(s.status == Mig.RUNNING, s.pc == Pc.STAGE),
                                                  lt(s.stage, v.max_stages)),
        "live_inflight_below_max": lambda s: implies(
            and_(s.status == Mig.RUNNING, one_of(s.pc, (Pc.ALLOC, Pc.COPY, Pc.COMMIT, Pc.RESOLVE))),
            lt(s.stage, v.max_stages)),
        "live_nonfinal_below_last": lambda s: implies(
            and_(s.status == Mig.RUNNING, one_of(s.pc, (Pc.ALLOC, Pc.COPY)), not_(s.final)),
            lt(add(s.stage, 1), v.max_stages)),
        "live_alloc_waiting": waiting(Pc.ALLOC, "m_alloc"),
        "live_copy_waiting": waiting(Pc.COPY, "m_copy"),
        "live_commit_waiting": waiting(Pc.COMMIT, "m_commit"),
        "live_resolve_waiting": waiting(Pc.RESOLVE, "m_fence"),
        "live_ended_not_paused": lambda s: implies(s.status != Mig.RUNNING, s.req != Req.PAUSED),
        "live_stage_ack_none": lambda s: implies(and_(s.status == Mig.RUNNING, s.pc == Pc.STAGE),
                                                 s.ack == Ack.NONE),
        "live_no_fence_message": lambda s: not_(s.m_fence),  # variants that never fence
        "live_no_commit_wait": lambda s: implies(  # variants whose stage 1 is the commit (AE)
            s.status == Mig.RUNNING, not_(one_of(s.pc, (Pc.COMMIT, Pc.RESOLVE)))),
        "live_no_resolve_wait": lambda s: implies(  # variants that never resolve a commit
            s.status == Mig.RUNNING, s.pc != Pc.RESOLVE),
        "live_final_hands_over": lambda s: implies(  # AE: the final stage's yes is the hand-over
            and_(s.status == Mig.RUNNING, s.final), s.pc == Pc.ALLOC),
        "live_running_not_done": lambda s: implies(s.status == Mig.RUNNING, s.pc != Pc.DONE),
    }


def _lex_lt(a: Sequence[Any], b: Sequence[Any]) -> z3.BoolRef:
    """a < b lexicographically."""
    terms = []
    for i in range(len(a)):
        terms.append(z3.And(*(a[j] == b[j] for j in range(i)), a[i] < b[i]))
    return z3.Or(*terms)


def _lex_le(a: Sequence[Any], b: Sequence[Any]) -> z3.BoolRef:
    return z3.Or(_lex_lt(a, b), z3.And(*(x == y for x, y in zip(a, b))))


@dataclass(frozen=True)
class RankProof:
    proved: bool
    failed: str = ""  # the first condition that failed, with the action
    witness: State | None = None  # a pre-state (over Inv) where it fails


@functools.lru_cache(maxsize=64)
def invariant(v: Variant) -> dict[str, z3.BoolRef]:
    """The variant's Houdini invariant over the safety candidates plus the liveness lemmas, by
    candidate name, over PRE. It contains the safety proof's invariant (Houdini keeps the largest
    inductive subset, and more candidates only add to it)."""
    safety = {n: p.predicate for n, p in PROPERTIES.items()}
    cands = {**candidates_for(v, safety), **liveness_lemmas(v)}
    return {n: z3.And(cands[n](PRE)) for n in houdini(v, cands)}


def goal(names: Sequence[str]) -> Callable[[State], Val]:
    """Q for a set of liveness properties, stable once reached: for all of them, they hold, S's
    coordinator is over and nothing is in flight to a live D; for some, they hold, S's
    coordinator is over and no pre-allocation is in flight to a live D."""
    if tuple(names) == tuple(LIVENESS):
        return quiescent
    return lambda s: and_(*(LIVENESS[n].predicate(s) for n in names),
                          LIVENESS["migration_terminates"].predicate(s),
                          not_(and_(s.d_alive, s.m_alloc)))


def _value(m: z3.ModelRef, x: z3.ExprRef) -> int | bool:
    val = m.eval(x, model_completion=True)
    return z3.is_true(val) if z3.is_bool(val) else val.as_long()  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=256)
def rank_proof(v: Variant, goals: tuple[str, ...] = tuple(LIVENESS)) -> RankProof:
    """Z3 checks (0)-(5) of the module docstring for the variant, Q = goal(goals)."""
    enc = encode(v)
    pre, post = enc.pre, enc.post
    solver = z3.Solver()
    solver.add(*invariant(v).values())
    q = goal(goals)
    q_pre, q_post = z3.And(q(pre)), z3.And(q(post))
    r_pre, r_post = ranking(v, pre), ranking(v, post)
    groups = fair_groups(v)
    fair_actions = {a for acts in groups.values() for a in acts}

    def enabled(g: str, at: State) -> z3.BoolRef:
        return z3.Or(*(enc.at(enc.guards[a], at) if at is not pre else enc.guards[a]
                       for a in groups[g] if a in enc.guards))

    witness: list[State] = []

    def valid(*premises: z3.ExprRef, goal: z3.ExprRef) -> bool:
        if solver.check(*premises, z3.Not(goal)) == z3.unsat:
            return True
        m = solver.model()
        witness.append(State(**{f: _value(m, getattr(pre, f)) for f in FIELDS}))
        return False

    if not valid(goal=z3.And(*(c >= 0 for c in r_pre))):
        return RankProof(False, "(5) a component can be negative", witness[-1])
    if not valid(z3.Not(q_pre), goal=z3.Or(*(enabled(g, pre) for g in groups))):
        return RankProof(False, "(3) a non-quiescent state where no fair process is enabled", witness[-1])
    for name, rel in enc.relations.items():
        if name in FAILURES:
            continue
        step = [rel]
        if name in FAILURE_UNLESS_DISABLED and FAILURE_UNLESS_DISABLED[name] in enc.guards:
            step.append(z3.Not(enc.guards[FAILURE_UNLESS_DISABLED[name]]))
        if not valid(q_pre, *step, goal=q_post):
            return RankProof(False, f"(0) {name} leaves the quiescent states", witness[-1])
        if not valid(z3.Not(q_pre), *step, goal=z3.Or(q_post, _lex_le(r_post, r_pre))):
            return RankProof(False, f"(1) {name} increases the ranking", witness[-1])
        if name in fair_actions:
            if not valid(z3.Not(q_pre), *step, goal=z3.Or(q_post, _lex_lt(r_post, r_pre))):
                return RankProof(False, f"(2) {name} (fair) does not decrease the ranking", witness[-1])
        else:
            same = z3.And(*(x == y for x, y in zip(r_post, r_pre)))
            keep = z3.And(*(z3.Implies(enabled(g, pre), enabled(g, post)) for g in groups))
            if not valid(z3.Not(q_pre), *step, same, goal=z3.Or(q_post, keep)):
                return RankProof(False, f"(4) {name} disables a fair process without progress", witness[-1])
    return RankProof(True)


# ---- verdicts --------------------------------------------------------------------------------

def check_liveness(v: Variant, bound: Sequence[Mapping[str, int]] = BOUND
                   ) -> list[LivenessResult]:
    """Per liveness property: VIOLATED (a lasso within the bound), PROVED (unbounded, by a
    ranking: for all properties at once, else for the property alone; the bound is checked
    too), or HOLDS (no lasso within the bound, no ranking found)."""
    sg = explore(v, bound)
    found = lassos(sg)
    every = not any(found.values()) and rank_proof(v).proved
    out = []
    for name in LIVENESS:
        lasso = found[name]
        if lasso is not None:
            out.append(LivenessResult(name, "VIOLATED", len(sg.states), lasso))
        elif every or rank_proof(v, (name,)).proved:
            out.append(LivenessResult(name, "PROVED", len(sg.states)))
        else:
            out.append(LivenessResult(name, "HOLDS", len(sg.states)))
    return out
