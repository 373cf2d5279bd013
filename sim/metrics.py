"""Per-request records as output rows, and run summaries as LLUMNIX.md §6 defines the metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llumverify.config import SLOConfig
from llumverify.sim.instance import Instance, Request

NS = 1e9

CSV_COLUMNS = ("request_id", "policy", "arrival_s", "prompt_tokens", "output_tokens", "priority", "instance",
               "first_token_s", "finish_s", "preemptions", "migrations", "status")


def _seconds(ns: int) -> str:
    return repr(ns / NS)


def csv_row(policy: str, r: Request) -> list[str]:
    """One requests.csv row; floats in repr form so identical runs write identical bytes."""
    finished = r.status == "finished"
    return [str(r.id), policy, repr(r.spec.arrival_s), str(r.prompt), str(r.output), str(r.priority),
            str(r.instance) if r.instance >= 0 else "",
            _seconds(r.first_token_ns) if finished else "", _seconds(r.finish_ns) if finished else "",
            str(r.preemptions), str(r.migrations), r.status]


def _stats(name: str, values: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    """mean / P50 / P99 (numpy's linear interpolation); None when there is nothing to measure."""
    if len(values) == 0:
        return {f"{name}_mean_s": None, f"{name}_p50_s": None, f"{name}_p99_s": None}
    a = np.asarray(values, dtype=np.float64)
    return {f"{name}_mean_s": float(a.mean()), f"{name}_p50_s": float(np.percentile(a, 50)),
            f"{name}_p99_s": float(np.percentile(a, 99))}


def summarize(records: Sequence[Request], instances: Sequence[Instance], end_ns: int,
              frag_samples: Sequence[float], slo: SLOConfig) -> dict[str, object]:
    """The run's metrics. Latencies in seconds; rates per second; shares in [0, 1].

    ttft: arrival -> first token (queueing and preemptions included). tpot: per request, the mean
    gap between tokens 2..n, i.e. (finish - first token) / (n - 1), for requests with n >= 2.
    queue: arrival -> first admission. slo_violation_rate: share of all requests that were
    rejected or missed the TTFT or the per-token target. preemption_loss_s: Σ over preemptions of
    (kill -> end of the re-prefill), divided by the number of requests. kv_util: used / total KV
    blocks, time-weighted per instance over [0, makespan]; mean over instances and P99 over
    instances. fragmentation: time average of `cluster.fragmentation` samples.
    """
    done = [r for r in records if r.status == "finished"]
    arrival = np.array([r.arrival_ns for r in done], dtype=np.int64)
    first = np.array([r.first_token_ns for r in done], dtype=np.int64)
    finish = np.array([r.finish_ns for r in done], dtype=np.int64)
    admitted = np.array([r.admitted_ns for r in done], dtype=np.int64)
    out = np.array([r.output for r in done], dtype=np.int64)
    ttft = (first - arrival) / NS
    multi = out >= 2
    tpot = (finish[multi] - first[multi]) / (out[multi] - 1) / NS
    tpot_all = np.zeros(len(done))
    tpot_all[multi] = tpot
    violations = int(np.count_nonzero((ttft > slo.ttft_s) | (tpot_all > slo.per_token_s)))
    n = len(records)
    span = max(end_ns, 1)
    util = [inst.used_integral / (inst.capacity * span) for inst in instances]
    summary: dict[str, object] = {
        "requests": n,
        "finished": len(done),
        "rejected": n - len(done),
        "makespan_s": end_ns / NS,
        "throughput_rps": len(done) / (span / NS),
        "slo_violation_rate": (violations + n - len(done)) / n if n else 0.0,
        "preemptions": sum(r.preemptions for r in records),
        "preemption_loss_s": sum(r.preempt_loss_ns for r in records) / NS / n if n else 0.0,
        "kv_util_mean": float(np.mean(util)),
        "kv_util_p99": float(np.percentile(util, 99)),
        "fragmentation": float(np.mean(frag_samples)) if len(frag_samples) else 0.0,
    }
    summary.update(_stats("ttft", ttft))
    summary.update(_stats("tpot", tpot))
    summary.update(_stats("e2e", (finish - arrival) / NS))
    summary.update(_stats("queue", (admitted - arrival) / NS))
    return summary
