"""Which running request a source instance migrates (LLUMNIX.md §4).

LCFS (the paper's default) takes the one that arrived last: the tail of the running batch,
which the paper's artifact (vLLM 0.2) keeps sorted by arrival at every decode step
(docs/llumnix-code-notes.md §4.1, H-AE-6), so a request that was just migrated in or re-admitted
after a preemption is not the next migrant merely because it joined this batch last. SR (HEAD's
default) takes the shortest, LR the longest. Only decode-phase requests of normal priority that
are not already migrating are candidates: moving a high-priority request would defeat its headroom.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llumverify.settings.config import SELECTIONS
from llumverify.errors import UserError


def migratable(pin_refcounts: Iterable[int]) -> bool:
    """Whether a running request may leave by migration, from the reference counts of the
    prefix-cached blocks it pins (vllm-v1; none on vLLM 0.2): only when each is 1, its own. A
    block another request also uses cannot move (the other still reads it on S) and copying it
    would leave S's refcount wrong once the migrant's blocks are freed."""
    return all(n == 1 for n in pin_refcounts)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running request as the migration policy sees it."""

    request: int
    kv_tokens: int  # tokens whose KV the request holds (what a migration must copy)
    admitted_seq: int  # admission order on this instance (larger = admitted later)
    high_priority: bool = False
    migrating: bool = False
    arrival_ns: int = 0  # when the request arrived at the cluster (LCFS: larger = came last)


def choose_request(candidates: Sequence[Candidate], selection: str = "lcfs") -> int | None:
    """The request to migrate, or None when no candidate qualifies."""
    eligible = [c for c in candidates if not c.high_priority and not c.migrating]
    if not eligible:
        return None
    if selection == "lcfs":
        return max(eligible, key=lambda c: (c.arrival_ns, c.request)).request
    if selection == "sr":
        return min(eligible, key=lambda c: (c.kv_tokens, -c.admitted_seq, c.request)).request
    if selection == "lr":
        return max(eligible, key=lambda c: (c.kv_tokens, c.admitted_seq, -c.request)).request
    raise UserError(f"unknown migration selection {selection!r}; choose one of {', '.join(SELECTIONS)}")
