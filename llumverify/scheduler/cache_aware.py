"""Prefix-cache-aware dispatch (extension): Llumnix HEAD's `cacheaware` policy, reimplemented.

What HEAD does (llumnix-project/llumnix-ray, main, commit 3fb6c0376b3b, 2026-03-12;
llumnix/global_scheduler/dispatch_policy.py, class CacheAware, lines 193-369):

- The prompt's token ids are cut into chunks of 256 tokens (`chunk_size` from the cache meta
  client's JSON config, default 256, lines 394-395; `save_unfull_chunk` false, so a trailing
  partial chunk is dropped, lines 241-259) and hashed as a chain, h_i = sha256(h_{i-1} || chunk i)
  starting from "" (lines 227-270).
- For every chunk hash it asks a cache metadata service which instances hold that chunk (lines
  272-284) and counts, per instance, its run of consecutive chunk hits (lines 286-307).
- Before the policy runs, the dispatch scheduler drops unhealthy instances and then the *busy*
  ones (global_scheduler/dispatch_scheduler.py lines 78-83; dispatch_filter.py lines 30-43). Busy,
  for an ordinary (neutral) instance, is the default dispatch load metric `remaining_steps`
  (config/default.py line 156) below 10 (constants.py line 108; load_computation.py lines 89-120):
  (total - used - Σ waiting prompt blocks) / (running + waiting), +inf when empty. If nothing is
  left, every instance is a candidate again, busy or not (dispatch_scheduler.py lines 101-105).
- Among the candidates it takes the one with the most hit chunks (a stable sort by count, the
  first candidate found in that order; lines 328-343). Any hit of one whole chunk beats load:
  there is no minimum gain and no load comparison with the cached instance. Only when no
  candidate holds a chunk does it dispatch by load: lowest load first, ties to the lowest
  instance id, at random among the top `topk_random_dispatch` (default 1) (lines 345-350;
  instance_info.py lines 113-123; config/default.py line 154).
- The "transfer threshold" (1000 tokens, penalty 0.7; constants.py lines 118-119, read at
  dispatch_policy.py lines 205-206) does not change the choice. After choosing, if the best hit
  anywhere exceeds the chosen instance's by more than 1000 tokens, HEAD records
  hit_length = best hit and transfer_penalty = 0.7 (the chosen instance is expected to fetch
  that prefix from the shared KV store), else its own hit and 1 (lines 352-360). Both travel with
  the request (manager.py line 176) and only lower the request's "missed tokens" in the vLLM
  backend's load report (backends/vllm/scheduler.py line 218), which the optional
  `miss_waiting_tokens` load metric uses. Nothing is migrated and the dispatcher moves no KV.

Here, in llumverify's terms (`cache_aware` below): hits come from the engine's own prefix cache
(16-token blocks, a contiguous prefix) instead of a metadata service, and count in whole 256-token
chunks, as HEAD matches. HEAD's load measure, remaining_steps, is llumverify's dispatch freeness
F_d without the watermark and the priority penalty (scheduler/freeness.py); we use F_d for both
the busy test and the load fallback, as HEAD uses one metric for both. With the vllm-v1 engine
(watermark 0) and no priorities the two are equal. With one metric for both, HEAD's "drop the
busy, then the least loaded of the rest" is exactly least-loaded over all live instances, so the
fallback is `least_loaded` (scheduler/dispatch.py). `transfer_hint` gives what HEAD records with
the request, for a simulator that wants to model it; the choice never depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llumverify.requests import RequestSpec
from llumverify.scheduler.dispatch import candidates, least_loaded
from llumverify.scheduler.freeness import dispatch_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot

# Tokens per hashed chunk: llumnix/config/mock_query_client_config.json "chunk_size": 256, and the
# default at llumnix/global_scheduler/dispatch_policy.py line 394 (HEAD 3fb6c0376b3b).
CHUNK_TOKENS = 256
# An instance is busy (not a candidate while a non-busy one exists) below this many free blocks
# per request: REMAININGSTEPS_BUSY_THRESHOLD, llumnix/constants.py line 108, compared at
# llumnix/load_computation.py line 96 (`remaining_steps < BUSY_THRESHOLD`).
BUSY_THRESHOLD = 10.0
# Tokens by which the best hit anywhere must exceed the chosen instance's before HEAD assumes a KV
# transfer: CACHE_TRANSFER_THRESHOLD, llumnix/constants.py line 118 (strict `>`, dispatch_policy.py
# line 352). Not a dispatch gate: see transfer_hint.
TRANSFER_THRESHOLD_TOKENS = 1000
# Fraction of a transferred prefix counted as hit: CACHE_TRANSFER_PENALTY_FACTOR, constants.py line 119.
TRANSFER_PENALTY = 0.7


def cached_chunks(tokens: int) -> int:
    """Whole 256-token chunks in a hit of `tokens` prompt tokens (what HEAD matches on)."""
    return max(tokens, 0) // CHUNK_TOKENS


def is_busy(s: InstanceSnapshot, priority: int = 0) -> bool:
    """HEAD's busy filter with F_d as the load: fewer than BUSY_THRESHOLD blocks per request to
    spare (a draining instance reports F = -1000, so it is always busy; an empty one never is)."""
    return dispatch_freeness(s, priority) < BUSY_THRESHOLD


def cache_aware(snapshots: Sequence[InstanceSnapshot], request: RequestSpec,
                hits: Mapping[int, int] | None = None) -> int:
    """Llumnix HEAD's `cacheaware` dispatch: the candidate holding the longest cached prefix, else
    the least loaded.

    hits maps instance id -> prompt tokens of this request already cached there (a contiguous
    prefix); only whole 256-token chunks count (CHUNK_TOKENS), as HEAD hashes and matches the
    prompt in 256-token chunks, so a hit shorter than 256 tokens is no hit. Candidates are the
    live (not draining) instances that are not busy (is_busy: F_d < BUSY_THRESHOLD), or every
    live instance if all are busy. The candidate with the most cached chunks wins, however small
    its lead and however loaded it is otherwise (HEAD compares no load and no gain); equal chunk
    counts go to the lowest instance id. When no candidate has a whole chunk cached, or there are
    no hits (a 2-argument call, for engines without a prefix cache), the request goes where
    least-loaded would send it. Never migrates, never moves KV.
    """
    if hits:
        live = candidates(snapshots)
        priority = request.priority
        free = [s for s in live if not is_busy(s, priority)] or live
        best, best_chunks = -1, 0
        for s in free:
            c = cached_chunks(hits.get(s.instance, 0))
            if c > best_chunks or (c == best_chunks and c and s.instance < best):
                best, best_chunks = s.instance, c
        if best_chunks:
            return best
    return least_loaded(snapshots, request)


def transfer_hint(hits: Mapping[int, int], chosen: int) -> tuple[int, float]:
    """What HEAD records with the request after choosing `chosen` (dispatch_policy.py lines 352-360):
    (hit tokens, penalty). If the best hit on any instance (busy, draining or not) exceeds the
    chosen one's by more than TRANSFER_THRESHOLD_TOKENS, HEAD assumes the chosen instance fetches
    that prefix from the shared KV store: (best hit, TRANSFER_PENALTY); else (its own hit, 1.0).
    Both in whole chunks. It does not affect the choice; in HEAD it only discounts the request's
    missed tokens in the engine's load report (backends/vllm/scheduler.py line 218)."""
    best = max((cached_chunks(t) for t in hits.values()), default=0)
    local = cached_chunks(hits.get(chosen, 0))
    if (best - local) * CHUNK_TOKENS > TRANSFER_THRESHOLD_TOKENS:
        return best * CHUNK_TOKENS, TRANSFER_PENALTY
    return local * CHUNK_TOKENS, 1.0
