"""Llumnix autoscaling decisions, as the AE code makes them (docs/llumnix-code-notes.md §4.1).

Every period: if the cluster's aggregate dispatch freeness is below x, add as many empty
instances as it takes to lift it to x (capped by the maximum); otherwise, if the aggregate
migration freeness with the newest instance's capacity taken away (its requests kept) is above
y, terminate that instance, which then reports F = -1000 so migration drains it before removal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llumverify.scheduler.snapshot import InstanceSnapshot


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """delta > 0: start that many instances; delta == -1: terminate `victim`; 0: nothing."""

    delta: int
    victim: int | None = None


def _ratio(available: float, requests: int) -> float:
    return math.inf if requests == 0 else available / requests


def cluster_freeness(snapshots: Sequence[InstanceSnapshot], extra_blocks: int = 0) -> float:
    """Dispatch freeness of the aggregate: (ΣA − ΣWall + extra) / (ΣR + ΣQ)."""
    available = sum(s.free_blocks - s.watermark_blocks - s.waiting_prompt_blocks for s in snapshots)
    return _ratio(available + extra_blocks, sum(s.num_running + s.num_waiting for s in snapshots))


def freeness_without_newest(snapshots: Sequence[InstanceSnapshot]) -> float:
    """Migration freeness of the aggregate once the newest instance's capacity is gone."""
    kept = snapshots[:-1]
    available: float = sum(s.free_blocks - s.watermark_blocks for s in kept)
    available -= sum(s.waiting_prompt_blocks for s in snapshots)
    waiting = any(s.num_waiting for s in snapshots)
    return _ratio(available, sum(s.num_running for s in snapshots) + int(waiting))


def decide(
    active: Sequence[InstanceSnapshot],
    starting: int,
    *,
    scale_up_below: float,
    scale_down_above: float,
    min_instances: int,
    max_instances: int,
) -> ScaleDecision:
    """One autoscaling round. `active` excludes terminating instances, oldest first; `starting`
    counts instances started but not yet serving (their capacity already counts as free)."""
    room = max_instances - len(active) - starting
    if not active:
        return ScaleDecision(min(1, room)) if starting == 0 else ScaleDecision(0)
    capacity = active[-1].num_blocks  # a new instance is as large as the others
    added = 0
    while added < room and cluster_freeness(active, (starting + added) * capacity) < scale_up_below:
        added += 1
    if added:
        return ScaleDecision(added)
    if starting == 0 and len(active) > min_instances and freeness_without_newest(active) > scale_down_above:
        return ScaleDecision(-1, active[-1].instance)
    return ScaleDecision(0)


def drains_to_cancel(draining: Sequence[int], delta: int) -> tuple[list[int], int]:
    """Scaling up cancels drains before it starts instances, newest first (the AE): which of the
    `draining` instances (ids, oldest first) serve again, and how many instances are still to start."""
    cancel = list(reversed(draining))[:max(delta, 0)]
    return cancel, delta - len(cancel)
