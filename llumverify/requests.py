"""What a workload hands the simulator: one immutable spec per request, sorted by arrival."""

from __future__ import annotations

from dataclasses import dataclass

NORMAL, HIGH = 0, 1  # the two priority classes (LLUMNIX.md §4)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request as it arrives: when, how long its prompt is, how many tokens it will generate.

    Every request generates exactly `output_tokens` tokens (as in the paper's runs).
    hash_ids: the prompt's blocks of `hash_block` tokens as chained hashes (the Mooncake
    convention: equal ids mean an equal prefix up to and including that block); empty when the
    workload has none. The vllm-v1 engine's prefix cache matches on them.
    """

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = NORMAL
    hash_ids: tuple[int, ...] = ()
    hash_block: int = 0
