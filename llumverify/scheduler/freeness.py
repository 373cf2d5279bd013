"""Freeness: how many KV blocks per request an instance has to spare (LLUMNIX.md §3).

Computed as the AE code does it, from a load report: A = free - watermark, Wall = Σ prompt
blocks of every waiting request (fractional), R running, Q waiting, T total blocks, [P] the
instance hosts a high-priority request. Higher is freer; negative means over-committed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llumverify.requests import HIGH
from llumverify.scheduler.snapshot import InstanceSnapshot

TERMINATING = -1000.0  # what a draining instance reports, so nothing is sent to it
PRIORITY_HEADROOM_OFFSET = 100  # the priority penalty / headroom is T - 100 blocks


def _available(s: InstanceSnapshot, free_blocks: int) -> int:
    return free_blocks - s.watermark_blocks


def migration_freeness(s: InstanceSnapshot, head_only: bool = False) -> float:
    """F_m = (A - Wall - [P](T - 100)) / (R + 1[Q>0]); head_only subtracts only the head's blocks.

    head_only is the v0.1.0/HEAD form (the paper's Alg. 1): queued requests behind the head do
    not count, which is what de-fragmentation intends.
    """
    return migration_freeness_at(s, s.free_blocks, head_only)


def migration_freeness_at(s: InstanceSnapshot, free_blocks: int, head_only: bool = False) -> float:
    """F_m of the load `s` had it `free_blocks` free blocks (how F_m moves as a decode run takes
    blocks, without building a snapshot per candidate)."""
    if s.terminating:
        return TERMINATING
    denominator = s.num_running + (1 if s.num_waiting else 0)
    if denominator == 0:
        return math.inf
    queued = s.head_blocks if head_only else s.waiting_prompt_blocks
    headroom = s.num_blocks - PRIORITY_HEADROOM_OFFSET if s.hosts_priority else 0
    return (_available(s, free_blocks) - queued - headroom) / denominator


def dispatch_freeness(s: InstanceSnapshot, priority: int = 0) -> float:
    """F_d = (A - Wall - penalty) / (R + Q), penalty T - 100 when the request's class and the
    instance's ([P]) differ, so each class prefers instances already serving it."""
    if s.terminating:
        return TERMINATING
    denominator = s.num_running + s.num_waiting
    if denominator == 0:
        return math.inf
    penalty = s.num_blocks - PRIORITY_HEADROOM_OFFSET if (priority == HIGH) != s.hosts_priority else 0
    return (_available(s, s.free_blocks) - s.waiting_prompt_blocks - penalty) / denominator


def head_does_not_fit(s: InstanceSnapshot) -> bool:
    """A queued head-of-line request that this instance's free blocks (above its watermark) cannot
    admit: what fragmentation measures and what raises the auto threshold (scheduler/threshold.py)."""
    return s.num_waiting > 0 and s.head_blocks > _available(s, s.free_blocks)


def fragmentation(snapshots: Sequence[InstanceSnapshot]) -> float:
    """Share of cluster KV memory that is free while some instance's head-of-line request cannot
    be admitted there although the cluster's total free blocks (above one watermark) could hold
    it; 0 when no such head exists."""
    free = sum(s.free_blocks for s in snapshots)
    total = sum(s.num_blocks for s in snapshots)
    for s in snapshots:
        if head_does_not_fit(s) and s.head_blocks <= free - s.watermark_blocks:
            return free / total
    return 0.0
