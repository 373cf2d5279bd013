"""Prefill/decode disaggregation: which decode instance takes a request after its first token.

Llumnix's main branch hands a request from its prefill instance to a decode instance chosen by
load; here the decode instance with the highest dispatch freeness F_d (the least-loaded rule,
LLUMNIX.md §3), never a draining one, ties to the lowest id; None when no decode instance is up.
"""

from __future__ import annotations

from collections.abc import Sequence

from llumverify.requests import RequestSpec
from llumverify.scheduler.freeness import dispatch_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot


def decode_target(decode: Sequence[InstanceSnapshot], request: RequestSpec) -> int | None:
    """The decode instance a request handed off by its prefill instance goes to (None: none up)."""
    live = [s for s in decode if not s.terminating]
    if not live:
        return None
    return max(live, key=lambda s: (dispatch_freeness(s, request.priority), -s.instance)).instance
