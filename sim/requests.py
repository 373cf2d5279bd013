"""What a workload hands the simulator: one immutable spec per request, sorted by arrival."""

from __future__ import annotations

from dataclasses import dataclass

NORMAL, HIGH = 0, 1  # the two priority classes (LLUMNIX.md §4)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request as it arrives: when, how long its prompt is, how many tokens it will generate.

    Every request generates exactly `output_tokens` tokens (as in the paper's runs).
    """

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = NORMAL
