"""One verdict per (variant, property): PROVED (unbounded), HOLDS up to depth K, or VIOLATED.

Order matters for speed: the inductive proof (well under a second) settles most properties;
BMC, whose refutation cost grows with depth, only runs on the rest, with the proved invariant
assumed at every step; what BMC leaves open at chc.CHC_AFTER steps is posed to Spacer
(models/chc.py: a proof there is certified by plain SMT queries), and BMC goes on to the full
depth only for what that does not prove.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import z3

from llumverify.protocol.state import FIELDS, DReq, Mig, Pc, Req, Slot, State
from llumverify.protocol.variants import Variant
from llumverify.models import chc
from llumverify.models.bmc import Goal, distinct_violations, search, violations
from llumverify.models.compile import tuple_function
from llumverify.models.encoding import PRE, encode
from llumverify.models.induction import Proof, prove
from llumverify.models.liveness import covered, explore
from llumverify.models.trace import Trace
from llumverify.models.vacuity import trivial
from llumverify.properties.boundaries import boundary_goals
from llumverify.properties.safety import PROPERTIES, Property, decisive

CHC_NOTE = "CHC"  # proved by Spacer's certified strengthening (models/chc.py), not by Houdini's invariant alone
DEFAULT_DEPTH = 14  # longer than every shortest counterexample found so far (13 steps: v010's no_stale_kv)
STAGE_STEPS = 5  # a non-final stage: begin, D's grant, S's ack, D's pull, S's copy done
FINAL_STEPS = 7  # the final stage: begin, grant, ack, pull, S's commit, D's commit, S's ack


def full_depth(v: Variant) -> int:
    """BMC's default depth for a variant: DEFAULT_DEPTH, or more if a migration using all of the
    variant's stages takes longer (head, v010 and safe allow 3 stages: 17 steps), so a
    "HOLDS up to depth N" always covers every stage count the variant can run."""
    return max(DEFAULT_DEPTH, STAGE_STEPS * (v.max_stages - 1) + FINAL_STEPS)


@dataclass(frozen=True)
class Verdict:
    prop: str
    verdict: str  # PROVED | TRIVIAL (true whatever the protocol does: models/vacuity.py) | HOLDS | VIOLATED
    depth: int  # BMC depth reached (0 when proved)
    trace: Trace | None = None
    note: str = ""  # TRIVIAL: why; PROVED: CHC_NOTE when models/chc.py proved it
    others: tuple[Trace, ...] = ()  # VIOLATED: further counterexamples through other actions

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"property": self.prop, "verdict": self.verdict}
        if self.note:
            out["note"] = self.note
        if self.verdict == "HOLDS":
            out["depth"] = self.depth
        if self.trace is not None:
            out["length"] = len(self.trace)
            out["trace"] = self.trace.to_json()
        if self.others:
            out["other_traces"] = [t.to_json() for t in self.others]
        return out


@functools.lru_cache(maxsize=32)
def proof_of(v: Variant) -> Proof:
    """The unbounded proof of every property (PROPERTIES) for a variant, once per process."""
    return prove(v, {n: p.predicate for n, p in PROPERTIES.items()},
                 {n: p.step for n, p in PROPERTIES.items() if p.step is not None})


def check_variant(v: Variant, depth: int | None = None,
                  properties: Mapping[str, Property] = PROPERTIES,
                  budget_s: float = 0.0, paths: int = 1) -> list[Verdict]:
    """Prove what can be proved; search for the shortest counterexample to the rest, to `depth`
    steps (None: the variant's `full_depth`). With a
    time budget (0: none) BMC stops deepening when it is spent, and HOLDS names the depth reached;
    without one the verdicts depend only on the depth, never on the machine's load. With
    `paths` > 1, each violated property also gets up to paths - 1 further shortest
    counterexamples, each through a set of actions no earlier one used (`distinct_violations`)."""
    depth = full_depth(v) if depth is None else depth
    preds = {n: p.predicate for n, p in properties.items()}
    steps = {n: p.step for n, p in properties.items() if p.step is not None}
    proof = proof_of(v) if properties is PROPERTIES else prove(v, preds, steps)
    proved = set(proof.proved)
    if properties is PROPERTIES:  # the variant's own decisions: implied by the invariant?
        preds["decisive"] = functools.partial(decisive_term, v=v)
        if implied(proof, preds["decisive"]):
            proved.add("decisive")
    rest = {n: p for n, p in preds.items() if n not in proved}
    rest_steps = {n: st for n, st in steps.items() if n in rest}
    by_chc: set[str] = set()

    def settle(open_: list[str]) -> set[str]:
        by_chc.update(n for n in open_ if chc.proves(v, rest[n], rest_steps.get(n), proof.predicates))
        return by_chc

    result = (violations(v, rest, depth, proof.predicates, budget_s, rest_steps, least=True,
                         settle=(chc.CHC_AFTER, settle)) if rest else None)
    out = []
    vacuous = trivial(v, properties)
    for name in preds:
        if name in vacuous:
            out.append(Verdict(name, "TRIVIAL", 0, note=vacuous[name]))
            continue
        if name in proved or result is None:
            out.append(Verdict(name, "PROVED", 0))
            continue
        if name in by_chc:
            out.append(Verdict(name, "PROVED", 0, note=CHC_NOTE))
            continue
        trace = result.traces[name]
        if trace is None:
            out.append(Verdict(name, "HOLDS", result.reached[name]))
        else:
            others = () if paths <= 1 else tuple(distinct_violations(
                v, preds[name], depth, paths, proof.predicates, steps.get(name))[1:])
            out.append(Verdict(name, "VIOLATED", len(trace), trace, others=others))
    return out


def decisive_term(s: State, v: Variant) -> z3.BoolRef:
    """`decisive` (the variant's own decisions never left to chance) as one Z3 term, for `implied`."""
    return z3.And(decisive(s, v))


def implied(proof: Proof, pred: Callable[[State], object]) -> bool:
    """The proof's inductive invariant implies the predicate (so it holds in every reachable
    state, for all sizes)."""
    solver = z3.Solver()
    solver.add(*(z3.And(p(PRE)) for p in proof.predicates))
    return solver.check(z3.Not(z3.And(pred(PRE)))) == z3.unsat


def reach_goals(v: Variant) -> dict[str, Goal]:
    """Everything that must be able to happen: each action (its guard holds in some reachable
    state, and it changes something there), each request phase, migration status, coordinator
    point and D-side state, D's slot taken by another migration, each instance crashed,
    (with non-final stages) a later stage granted and a non-final stage that copied something,
    each stage the variant allows beginning, and every boundary of properties/boundaries.py."""
    enc = encode(v)
    goals: dict[str, Goal] = {
        f"action:{name}": (lambda s, g=g: enc.at(g, s)) for name, g in enc.guards.items()
    }
    unused = {Pc.RESOLVE: "d_fence", Pc.COMMIT: "s_send_commit"}
    pcs = [p for p in Pc if p not in unused or unused[p] in enc.guards]
    for field, values in (("req", list(Req)), ("status", list(Mig)), ("pc", pcs),
                          ("d_req", list(DReq)), ("d_slot", [Slot.OTHER])):
        for val in values:
            goals[f"{field}:{val.name}"] = lambda s, f=field, x=val: getattr(s, f) == int(x)
    # each instance can crash; each action can change something; with non-final stages, a later
    # stage's pre-allocation can be granted and a non-final stage can copy something
    goals["s_alive:False"] = lambda s: z3.Not(s.s_alive)
    goals["d_alive:False"] = lambda s: z3.Not(s.d_alive)
    for name, g in enc.guards.items():
        changed = z3.Or(*(e != getattr(enc.pre, f) for f, e in zip(FIELDS, enc.effects[name])))
        goals[f"changes:{name}"] = lambda s, c=z3.And(g, changed): enc.at(c, s)
    if "begin_stage" in enc.guards:
        later = z3.And(enc.guards["d_alloc_ok"], enc.pre.stage >= 1)
        goals["later_stage_granted"] = lambda s, c=later: enc.at(c, s)
        goals["precopy"] = lambda s: z3.And(z3.Not(s.final), s.copied >= 1)
    for k in range(v.max_stages):  # every stage the variant allows begins (stages are counted one by one)
        goals[f"stage {k} begins"] = lambda s, k=k: z3.And(s.status == Mig.RUNNING, s.pc == Pc.STAGE,
                                                          s.stage == k)
    guards = {name: (lambda s, g=g: enc.at(g, s)) for name, g in enc.guards.items()}
    goals |= {n: (lambda s, b=b: z3.And(b(s))) for n, b in boundary_goals(v, guards).items()}
    return goals


# The abort paths `check`'s PROVED is claimed to cover (README; docs/protocol.md), each by the actions that model it.
# A design that lost one (a variant edited to drop its timeouts) has fewer executions, so it proves everything: its
# proofs would say nothing about that path. Our designs must keep every one (their reachability is reach_goals').
ABORT_PATHS: dict[str, tuple[str, ...]] = {
    "destination out of memory": ("d_alloc_refuse",), "request finished mid-copy": ("finish",),
    "request preempted mid-copy": ("preempt",), "an instance failing": ("crash_s", "crash_d"),
    "timeouts": ("timeout_alloc", "timeout_copy", "timeout_commit"),
}


def absent_abort_paths(v: Variant) -> list[str]:
    """ABORT_PATHS actions the variant lacks, as `unreachable` names them (`check` fails a design that has any)."""
    have = {a.name for a in v.actions}
    return [f"action:{a} (absent: {path})" for path, acts in ABORT_PATHS.items() for a in acts if a not in have]


def unreachable(v: Variant, depth: int = 16) -> list[str]:
    """The goals of `reach_goals` met neither on the explicit graph of the liveness bound (at any
    depth: every state there is reachable, its initial states checked against the model's init
    below, its steps the compiled actions) nor by BMC within `depth` steps at any size (asked only
    for what the graph misses: a second on the graph against a few of BMC). Before 2026-12-06 BMC
    alone decided, so a goal met only beyond `depth` steps counted as unreachable; no variant has one."""
    goals = reach_goals(v)
    sg = explore(v)
    init = tuple_function(encode(v).init)
    if not all(init(sg.states[r]) for r in sg.roots):
        raise RuntimeError(f"{v.name}: an initial state of the liveness bound is outside the model's init")
    met = covered(sg, goals)
    rest = {n: g for n, g in goals.items() if n not in met}
    found = search(v, rest, depth, proof_of(v).predicates).traces if rest else {}
    return [n for n in rest if found[n] is None]

