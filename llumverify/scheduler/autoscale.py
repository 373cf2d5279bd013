"""Llumnix autoscaling decisions (LLUMNIX.md §4), as a pure function of load reports.

Every period the autoscaler averages dispatch freeness over the whole cluster. Below x it adds
an instance; above y, computed without the newest instance, it terminates that instance, which
then reports F = -1000 so migration drains it before removal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llumverify.scheduler.snapshot import InstanceSnapshot


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """+1 to start an instance, -1 to terminate `victim`, 0 to do nothing."""

    delta: int
    victim: int | None = None


def cluster_freeness(snapshots: Sequence[InstanceSnapshot]) -> float:
    """Dispatch freeness of the aggregate: (sum of A - sum of Wall) / (sum of R + Q)."""
    available = sum(s.free_blocks - s.watermark_blocks - s.waiting_prompt_blocks for s in snapshots)
    requests = sum(s.num_running + s.num_waiting for s in snapshots)
    if requests == 0:
        return math.inf
    return available / requests


def decide(
    active: Sequence[InstanceSnapshot],
    starting: int,
    *,
    scale_up_below: float,
    scale_down_above: float,
    min_instances: int,
    max_instances: int,
) -> ScaleDecision:
    """One autoscaling round. `active` excludes terminating instances, oldest first."""
    if not active:
        return ScaleDecision(+1) if starting == 0 and max_instances > 0 else ScaleDecision(0)
    if cluster_freeness(active) < scale_up_below and len(active) + starting < max_instances:
        return ScaleDecision(+1)
    if starting == 0 and len(active) > min_instances:
        if cluster_freeness(active[:-1]) > scale_down_above:
            return ScaleDecision(-1, active[-1].instance)
    return ScaleDecision(0)
