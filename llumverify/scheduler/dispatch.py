"""Dispatch policies: which instance an arriving request goes to (LLUMNIX.md §4).

Each is a pure function (snapshots, request) -> instance id. A draining (terminating) instance is
never chosen while another exists. Policies are registered by name (scheduler/policies.py);
`llumnix` dispatches like least-loaded (F_d with the priority penalty) and has `migrates=True`,
which starts the cluster's migration rounds (sim/cluster.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llumverify.requests import RequestSpec
from llumverify.scheduler.freeness import dispatch_freeness
from llumverify.scheduler.snapshot import InstanceSnapshot

Dispatch = Callable[[Sequence[InstanceSnapshot], RequestSpec], int]


def candidates(snapshots: Sequence[InstanceSnapshot]) -> Sequence[InstanceSnapshot]:
    """The instances a request may go to: the live (not draining) ones, or all if every one drains."""
    if not snapshots:
        raise ValueError("dispatch needs at least one instance")
    live = [s for s in snapshots if not s.terminating]
    return live or snapshots


def round_robin(snapshots: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    """Static: the instance sent the fewest requests so far; ties go to the lowest id."""
    return min(candidates(snapshots), key=lambda s: (s.dispatched, s.instance)).instance


def least_loaded(snapshots: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    """INFaaS++: the instance with the highest dispatch freeness F_d; ties go to the lowest id."""
    best: InstanceSnapshot | None = None
    best_f = 0.0
    for s in candidates(snapshots):
        f = dispatch_freeness(s, request.priority)
        if best is None or f > best_f or (f == best_f and s.instance < best.instance):
            best, best_f = s, f
    assert best is not None
    return best.instance


# vLLM's internal data-parallel load balancer weighs a waiting request 4x a running one
# (`score = waiting * 4 + running`, DPLBAsyncMPClient.get_core_engine_for_request,
# vllm/v1/engine/core_client.py, V1 releases 0.9-0.19).
VLLM_DP_WAITING_WEIGHT = 4


def vllm_dp(snapshots: Sequence[InstanceSnapshot], request: RequestSpec) -> int:
    """vLLM's own data-parallel dispatch (an engine's DP ranks as instances): the rank with the lowest
    4 x waiting + running; ties go to the lowest rank (one front end starts its scan at rank 0).
    vLLM reads counts its coordinator publishes every 100 ms and adds each request it sends to the
    chosen rank's waiting count meanwhile; the snapshots here are the counts themselves, which an
    arriving request joins at once (the same effect, without the 100 ms lag)."""
    return min(candidates(snapshots),
               key=lambda s: (VLLM_DP_WAITING_WEIGHT * s.num_waiting + s.num_running, s.instance)).instance


@dataclass(frozen=True)
class Policy:
    """A named scheduling policy: its dispatch rule and whether it migrates requests.

    prefix_aware: the cluster calls dispatch(snapshots, request, hits), hits mapping instance id
    to the request's prompt tokens already in that instance's prefix cache. predicts: it reads the
    predicted output lengths (SchedulerConfig.prediction_error sets their error).
    """

    name: str
    dispatch: Dispatch
    migrates: bool = False
    prefix_aware: bool = False
    predicts: bool = False
