"""What a workload hands the simulator: one immutable spec per request, sorted by arrival."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from llumverify.errors import UserError

NORMAL, HIGH = 0, 1  # the two priority classes (LLUMNIX.md §4)
MAX_TOKENS = (1 << 31) - 1  # a prompt or output longer is an input error: no engine's context holds more


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request as it arrives: when, how long its prompt is, how many tokens it will generate.

    Every request generates exactly `output_tokens` tokens (as in the paper's runs).
    hash_ids: the prompt's blocks of `hash_block` tokens as chained hashes (the Mooncake
    convention: equal ids mean an equal prefix up to and including that block); empty when the
    workload has none. The vllm-v1 engine's prefix cache matches on them.
    output_hash_ids: the chain continued over the blocks the output fills (after the prompt's full
    blocks, which hash_ids then hold exactly), so a later prompt that re-sends this answer (a
    conversation's next turn) finds them cached, as vLLM caches generated blocks; empty: the
    generated blocks are this request's own.
    user: the closed-loop client that sends it (a replayed client or conversation): it is sent when due or, if that
    client's previous request has not ended by then, when it ends (a chained one: when it ends); -1: sent
    when due (or by cluster.users' round robin).
    after_s: the user's own time from its previous request's end at the server to this one's arrival
    there (the client's turnaround, plus its front end, streaming and network): the request arrives
    at max(due, previous end + after_s) (a chained one: previous end + after_s), so a late answer delays it by as much as it did the real
    client, and it lands where the engine's step happens to be, not on the step boundary that ended
    the previous one. A request held so is not delayed by a front end (cost.api_server_ns).
    chained: the user sends it after_s after its previous request's end, however early that is against
    its due time, which then only orders it (a client with no send schedule of its own: vLLM's
    multi-turn benchmark without think time or a request rate; an open-loop due time would cap a
    faster simulated server at the real run's pace). A user's first request is sent when due; its
    later ones are all chained or none (checked when the cluster starts, as is that no chained
    request meets cluster.users' round robin).
    """

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = NORMAL
    hash_ids: tuple[int, ...] = ()
    hash_block: int = 0
    output_hash_ids: tuple[int, ...] = ()
    user: int = -1
    after_s: float = 0.0
    chained: bool = False


class SpecTable(Sequence[RequestSpec]):
    """Requests with ids 0..n-1 as numpy columns, each RequestSpec built when read.

    Why: a list of RequestSpec costs ~200 bytes a request (the object and its boxed numbers),
    2 GB for 10M requests, before the simulator starts; the columns cost 17 bytes a request. The
    specs read back are equal to those a list would hold (floats and ints round-trip exactly).
    """

    _CHUNK = 4096  # specs built per step of an iteration

    def __init__(self, arrival_s: np.ndarray, prompt: np.ndarray, output: np.ndarray, priority: np.ndarray) -> None:
        if len(prompt) and max(np.max(prompt), np.max(output)) > np.iinfo(np.int32).max:
            raise ValueError("SpecTable token counts must fit in 32 bits")
        self._cols = (np.asarray(arrival_s, dtype=np.float64), np.asarray(prompt, dtype=np.int32),
                      np.asarray(output, dtype=np.int32), np.asarray(priority, dtype=np.int8))
        if len({len(c) for c in self._cols}) > 1:
            raise ValueError("SpecTable columns differ in length")

    def __len__(self) -> int:
        return len(self._cols[0])

    @overload
    def __getitem__(self, i: int) -> RequestSpec: ...
    @overload
    def __getitem__(self, i: slice) -> list[RequestSpec]: ...

    def __getitem__(self, i: int | slice) -> RequestSpec | list[RequestSpec]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("SpecTable index out of range")
        i %= n
        t, p, o, q = (c[i].item() for c in self._cols)
        return RequestSpec(i, t, p, o, q)

    def __iter__(self) -> Iterator[RequestSpec]:
        for start in range(0, len(self), self._CHUNK):
            end = min(start + self._CHUNK, len(self))
            yield from map(RequestSpec, range(start, end), *(c[start:end].tolist() for c in self._cols))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same specs (a list, as `generate` used to return)."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __add__(self, other: Sequence[RequestSpec]) -> list[RequestSpec]:
        return [*self, *other]


def chained_successors(specs: Sequence[RequestSpec]) -> dict[int, RequestSpec]:
    """Each chained request (RequestSpec.chained) keyed by the id of its user's request before it: the
    cluster sends it from that one's end. A user's second request decides whether its later ones are
    chained (a user's first is sent when due either way); one that differs is refused, so the arrivals
    loop sees only a chained user's first request. {} for a SpecTable, whose requests have no users."""
    if isinstance(specs, SpecTable):
        return {}
    after: dict[int, RequestSpec] = {}
    last: dict[int, int] = {}  # user -> id of its latest request
    mode: dict[int, bool] = {}  # user -> whether its requests after its first are chained
    for s in specs:
        if s.chained and s.user < 0:
            raise UserError(f"request {s.id} is chained (sent after its user's previous one) but names no user")
        if s.user < 0:
            continue
        prev = last.get(s.user)
        last[s.user] = s.id
        if prev is None:
            continue
        if mode.setdefault(s.user, s.chained) != s.chained:
            raise UserError(f"request {s.id} of user {s.user} is {'' if s.chained else 'not '}chained, but that user's "
                            "second request is " + ("not" if s.chained else "chained") + ": a user's requests after "
                            "its first are all chained or none")
        if s.chained:
            after[prev] = s
    return after
