"""Llumnix's migration pairing (LLUMNIX.md §4): who sends a request to whom this round.

Sources are instances whose migration freeness is below the threshold T, or that hold preempted
requests (including a terminating instance, which reports F = -1000); destinations are above T
and hold no preempted requests. Sources sorted ascending, destinations descending, paired index
by index. An instance is in at most one migration at a time, as the artifact enforces it: every
instance is paired, busy ones included (osdi24ae vllm/core/request_scheduler.py:530-545 does not
look at migrations), and a pair touching an instance already migrating (in or out) is skipped
(vllm/engine/llm_engine_manager.py:460-467), so its partner stays idle this round.
`busy_first=True` is HEAD's rule instead: busy instances are dropped before pairing
(`has_migration_slot`), so the others pair among themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MigrationLoad:
    """The part of an instance's load report that pairing reads."""

    instance: int
    freeness: float  # F_m, blocks per request; -1000 for a terminating instance
    has_preempted: bool = False
    migrating: bool = False  # already the source or destination of a migration
    terminating: bool = False


def is_source(load: MigrationLoad, threshold: float) -> bool:
    """Overloaded, starved of memory, or being drained."""
    return load.terminating or load.has_preempted or load.freeness < threshold


def is_destination(load: MigrationLoad, threshold: float) -> bool:
    """Has headroom, nothing preempted, and is not being drained."""
    return not load.terminating and not load.has_preempted and load.freeness > threshold


def pair_instances(loads: Sequence[MigrationLoad], threshold: float,
                   busy_first: bool = False) -> list[tuple[int, int]]:
    """(source, destination) pairs for one round; ties broken by instance id for determinism.

    The artifact's rule (default): pair every instance, then skip the pairs that touch one already
    migrating. busy_first: HEAD's rule, drop the busy instances before pairing.
    """
    candidates = [load for load in loads if not load.migrating] if busy_first else list(loads)
    sources = sorted(
        (load for load in candidates if is_source(load, threshold)),
        key=lambda load: (load.freeness, load.instance),
    )
    destinations = sorted(
        (load for load in candidates if is_destination(load, threshold)),
        key=lambda load: (-load.freeness, load.instance),
    )
    return [(src.instance, dst.instance) for src, dst in zip(sources, destinations)
            if not src.migrating and not dst.migrating]
