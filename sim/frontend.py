"""The serving front end between a client and the engine: API server and tokenisation.

A client sends a request at its arrival time; the engine sees it only after the API server has
handled it (HTTP, validation, hand-off: `cost.api_server_ns`) and the prompt is tokenised
(`cost.tokenize_ns_per_token` per prompt token). Both are 0 by default, so every latency is the
engine's (queued -> token), as vLLM's own timestamps measure it; set them to compare with a
benchmark harness that measures at the client. Latencies are then counted from the send, the
engine's FCFS order is the order requests reach it, and the delay depends on the prompt, so a
long prompt sent first can reach the engine after a short one sent just after it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator

from llumverify.requests import RequestSpec
from llumverify.settings.config import CostConfig


def delay_ns(cost: CostConfig, spec: RequestSpec) -> int:
    """Send -> the engine sees the request."""
    return cost.api_server_ns + cost.tokenize_ns_per_token * spec.prompt_tokens


def engine_arrivals(specs: Iterable[RequestSpec], cost: CostConfig,
                    to_ns: Callable[[float], int]) -> Iterator[tuple[int, int, RequestSpec]]:
    """(reaches the engine, sent, spec) in the order requests reach the engine, ties in send
    order. Streams: a request is released once every later send is past its engine time
    (a later send reaches the engine no earlier than it is sent). Without a front end, each
    request reaches the engine as it is sent."""
    if not (cost.api_server_ns or cost.tokenize_ns_per_token):
        for spec in specs:
            sent = to_ns(spec.arrival_s)
            yield sent, sent, spec
        return
    pending: list[tuple[int, int, int, RequestSpec]] = []
    for i, spec in enumerate(specs):
        sent = to_ns(spec.arrival_s)
        while pending and pending[0][0] <= sent:
            at, _, was_sent, ready = heapq.heappop(pending)
            yield at, was_sent, ready
        heapq.heappush(pending, (sent + delay_ns(cost, spec), i, sent, spec))
    while pending:
        at, _, was_sent, ready = heapq.heappop(pending)
        yield at, was_sent, ready
