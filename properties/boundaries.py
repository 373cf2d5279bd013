"""Boundaries the model must reach: each resource bound of a guard, at its edge, from both sides,
and both orders of the two instances' failures.

A proof says something only about the behaviours the model has. A guard one block too strict
(`s_free >= 2` where a decode needs one block) or a failure that cannot happen once the other
instance died silently removes behaviours, and every safety property still holds on what is
left. So `check` also asks that each of these states be reachable (models/check.py,
`reach_goals`): written here from the intended rule (vLLM's and Llumnix's, LLUMNIX.md §5), not
read from the guards, so a slip in a guard cannot move its own goal.

Each entry: the action, whether it must be enabled (True) or disabled (False) there, and the
state. A variant without the action, or for which the entry does not apply, has no such goal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from llumverify.protocol.ops import Val, add, and_, not_, sub
from llumverify.protocol.state import Pc, Req, Slot, State

if TYPE_CHECKING:
    from llumverify.protocol.variants import Variant


@dataclass(frozen=True)
class Boundary:
    action: str
    enabled: bool
    state: Callable[[State, "Variant"], Val]
    applies: Callable[["Variant"], bool] = lambda v: True


def _needs_block(s: State) -> Val:
    """The next token opens a new block."""
    return add(s.tok, 1) == s.bs


def _running(s: State) -> Val:
    return and_(s.s_alive, s.req == Req.RUNNING)


def _remaining(s: State) -> Val:
    return sub(s.nblk, s.copied)


def _more_stages(s: State, v: "Variant") -> Val:
    """Not the last stage the variant allows."""
    return add(s.stage, 1) < v.max_stages


def _left_on_d(s: State, v: "Variant", first: bool) -> Val:
    """D's free blocks after granting n, less the reserve the rule keeps: the watermark on the
    first call (and on every call where the variant keeps it every stage), else none."""
    keep = s.wm if first or v.watermark_every_stage else 0
    return sub(sub(s.d_free, s.n), keep)


def _asked(s: State, first: bool) -> Val:
    """D holds a pre-allocation call of the first (or a later) stage, its slot not in the way."""
    slot = s.d_slot == Slot.FREE if first else s.d_slot != Slot.OTHER
    return and_(s.d_alive, s.m_alloc, (s.stage == 0) if first else (s.stage >= 1), slot)


BOUNDARIES: dict[str, Boundary] = {
    # S's engine: a decode takes S's last free block; with none free it waits
    "decode takes S's last free block": Boundary(
        "decode", True, lambda s, v: and_(_running(s), _needs_block(s), s.s_free == 1)),
    "decode waits with no free block": Boundary(
        "decode", False, lambda s, v: and_(_running(s), _needs_block(s), s.s_free == 0)),
    # S's scheduler preempts the request while its coordinator is about to begin a stage: a coordinator that
    # yields there lets the scheduler run (only v0.1.0's does not: `atomic_stage_start`)
    "S preempts the request where a stage is about to begin": Boundary(
        "preempt", True, lambda s, v: and_(s.pc == Pc.STAGE, _running(s)), lambda v: not v.atomic_stage_start),
    "re-admission fits exactly": Boundary(
        "readmit", True, lambda s, v: and_(s.req == Req.WAITING, s.nblk == s.s_free)),
    "re-admission one block short": Boundary(
        "readmit", False, lambda s, v: and_(s.s_alive, s.req == Req.WAITING,
                                            s.nblk == add(s.s_free, 1))),
    # other requests take an instance's last free block
    "other requests take D's last free block": Boundary("d_oom", True, lambda s, v: s.d_free == 1),
    "other requests take S's last free block": Boundary("s_oom", True, lambda s, v: s.s_free == 1),
    # the stage rule: final once at most thr blocks remain (or at the last stage allowed)
    "final stage with exactly thr blocks left": Boundary(
        "begin_final", True, lambda s, v: and_(_remaining(s) == s.thr, _more_stages(s, v)),
        lambda v: v.last_stage_blocks != 0),  # a threshold pinned to 0 (ae, pd) never decides
    "non-final stage with thr + 1 blocks left": Boundary(
        "begin_stage", True, lambda s, v: and_(_remaining(s) == add(s.thr, 1), _more_stages(s, v))),
    "final stage forced at the last stage allowed": Boundary(
        "begin_final", True, lambda s, v: and_(_remaining(s) > s.thr, add(s.stage, 1) == v.max_stages),
        lambda v: v.final_at_max_stage),
    "S gives up after the last stage allowed": Boundary(
        "abort_stages", True, lambda s, v: s.stage == v.max_stages),
    # D's pre-allocation: granted leaving exactly its reserve, refused one block short
    "D grants the first stage leaving exactly its watermark": Boundary(
        "d_alloc_ok", True, lambda s, v: and_(_asked(s, True), _left_on_d(s, v, True) == 0)),
    "D refuses the first stage one block short": Boundary(
        "d_alloc_refuse", True, lambda s, v: and_(_asked(s, True), _left_on_d(s, v, True) == -1)),
    "D grants a later stage leaving exactly its reserve": Boundary(
        "d_alloc_ok", True, lambda s, v: and_(_asked(s, False), _left_on_d(s, v, False) == 0),
        lambda v: v.max_stages > 1),
    "D refuses a later stage one block short": Boundary(
        "d_alloc_refuse", True, lambda s, v: and_(_asked(s, False), _left_on_d(s, v, False) == -1),
        lambda v: v.max_stages > 1),
    # both orders of the two failures
    "S fails after D": Boundary("crash_s", True, lambda s, v: not_(s.d_alive)),
    "D fails after S": Boundary("crash_d", True, lambda s, v: not_(s.s_alive)),
}


def boundary_goals(v: "Variant", guards: dict[str, Callable[[State], Val]]
                   ) -> dict[str, Callable[[State], Val]]:
    """The variant's boundary goals as state predicates, given each action's guard."""
    out: dict[str, Callable[[State], Val]] = {}
    for name, b in BOUNDARIES.items():
        if b.action not in guards or not b.applies(v):
            continue
        g = guards[b.action]
        out[f"boundary:{name}"] = (
            lambda s, g=g, b=b: and_(g(s) if b.enabled else not_(g(s)), b.state(s, v)))
    return out

