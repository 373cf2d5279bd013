"""An online controller for Llumnix's migration threshold T (an extension, not in the paper).

Pairing (pairing.py) takes sources with F_m < T and destinations with F_m > T. What the global
scheduler can observe says which way T should move:

- An instance whose queued head-of-line request does not fit its free blocks has F_m < 0 (the
  waiting prompts are subtracted), so it is a source for any T >= 0: raising T cannot help it,
  only lowering T can, by admitting more destinations. Preempted requests are the same signal.
- A destination refuses a pre-allocation when its F_m was above T but it lacks the request's
  blocks: when refusals outnumber commits, destinations are too full for T, so T rises.

Rule, once per migration round, multiplicative both ways and clamped to [t_min, t_max]:
refusals > commits since the last round -> T * increase; else a blocked or preempted instance
-> T * decrease; else T unchanged. Pure functions of what the round observes: no clock, no SimPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llumverify.scheduler.freeness import head_does_not_fit
from llumverify.scheduler.snapshot import InstanceSnapshot


@dataclass(frozen=True, slots=True)
class RoundSignals:
    """What one migration round observes: load reports now, migration outcomes since the last round."""

    blocked: int  # instances whose head-of-line request does not fit, or that hold preempted requests
    committed: int  # migrations committed since the last round
    refused: int  # migrations aborted since the last round because the destination refused to pre-allocate


def head_blocked(s: InstanceSnapshot) -> bool:
    """The instance has preempted requests, or a queued head that its free blocks cannot admit."""
    return s.num_preempted > 0 or head_does_not_fit(s)


def observe(snapshots: Sequence[InstanceSnapshot], committed: int, refused: int) -> RoundSignals:
    """The round's signals from the load reports and the migration counts since the last round."""
    return RoundSignals(sum(head_blocked(s) for s in snapshots if not s.terminating), committed, refused)


def next_threshold(t: float, signals: RoundSignals, *, t_min: float, t_max: float,
                   increase: float, decrease: float) -> float:
    """T for this round (see the module doc): refusals win over blocking, since a refused
    migration frees nothing and lowering T would only add fuller destinations."""
    if signals.refused > signals.committed:
        t *= increase
    elif signals.blocked:
        t *= decrease
    return min(max(t, t_min), t_max)
