"""Run summaries as LLUMNIX.md §6 defines the metrics, from the run's ledger of ended requests
(sim/records.py: numpy columns in arrival order, so results equal those of the Request objects)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from llumverify.settings import metrics_registry
from llumverify.settings.config import SLOConfig
from llumverify.requests import HIGH, NORMAL
from llumverify.sim.records import FINISHED, Ledger

if TYPE_CHECKING:
    from llumverify.sim.cluster import Cluster

NS = 1e9


def _stats(name: str, values: Sequence[float] | np.ndarray, suffix: str = "") -> dict[str, float | None]:
    """mean / P50 / P99 (numpy's linear interpolation); None when there is nothing to measure."""
    keys = [f"{name}_{q}_s{suffix}" for q in ("mean", "p50", "p99")]
    if len(values) == 0:
        return dict.fromkeys(keys)
    a = np.asarray(values, dtype=np.float64)
    return dict(zip(keys, (float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)))))


def _latencies(ledger: Ledger, done: np.ndarray, slo: SLOConfig,
               suffix: str = "") -> tuple[dict[str, float | None], tuple[int, int, int]]:
    """TTFT, TPOT, e2e and queueing stats of the finished requests `done` (a mask over the
    ledger's arrival positions), and how many missed the TTFT target, the per-token target, and
    either (each against its own class's targets: the one place that decides an SLO violation).

    One metric's array at a time, so a 10M-request run's peak stays a few columns over the
    ledger's."""
    sel = slice(len(done)) if done.all() else done  # all finished: views, not copies
    high = ledger.priority[sel] == HIGH
    (ttft_hi, tpot_hi), (ttft_lo, tpot_lo) = slo.targets(True), slo.targets(False)
    stats: dict[str, float | None] = {}
    arrival = ledger.arrival_ns[sel]
    first = ledger.first_token_ns[sel]
    ttft = (first - arrival) / NS
    miss_ttft = ttft > np.where(high, ttft_hi, ttft_lo)
    stats.update(_stats("ttft", ttft, suffix))
    del ttft
    finish = ledger.finish_ns[sel]
    out = ledger.output[sel].astype(np.int64)
    multi = out >= 2
    tpot = (finish[multi] - first[multi]) / (out[multi] - 1) / NS
    del first, out
    per_token = np.where(high, tpot_hi, tpot_lo)
    miss_tpot = 0.0 > per_token  # a request of one token has no gaps: its TPOT counts as 0
    miss_tpot[multi] = tpot > per_token[multi]
    del per_token, multi
    stats.update(_stats("tpot", tpot, suffix))
    del tpot
    stats.update(_stats("e2e", (finish - arrival) / NS, suffix))
    del finish
    stats.update(_stats("queue", (ledger.admitted_ns[sel] - arrival) / NS, suffix))
    misses = (int(np.count_nonzero(miss_ttft)), int(np.count_nonzero(miss_tpot)),
              int(np.count_nonzero(miss_ttft | miss_tpot)))
    return stats, misses


def _token_metrics(ledger: Ledger, done: np.ndarray, span_ns: int) -> dict[str, float | None]:
    """output_throughput_tps: output tokens of finished requests / makespan. itl_mean_s: the mean
    gap between consecutive tokens pooled over every finished request's tokens 2..n (vLLM's mean
    ITL; token-weighted, where TPOT weighs each request once); None if no request has 2 tokens.
    The ledger keeps no per-token times, so ITL has no median or P99."""
    sel = slice(len(done)) if done.all() else done
    out = ledger.output[sel].astype(np.int64)
    multi = out >= 2
    gaps = int(np.sum(out[multi] - 1))
    decode_ns = int(np.sum(ledger.finish_ns[sel][multi] - ledger.first_token_ns[sel][multi]))
    return {"output_throughput_tps": int(out.sum()) / (span_ns / NS),
            "itl_mean_s": decode_ns / gaps / NS if gaps else None}


def _slo_rates(n: int, finished: int, misses: tuple[int, int, int], suffix: str = "") -> dict[str, float]:
    """slo_violation_rate (unfinished requests violate too) and its TTFT / per-token causes, as
    shares of all `n` requests (a request missing both targets counts in both causes)."""
    ttft, tpot, either = misses
    if not n:
        return {f"slo_violation_rate{suffix}": 0.0, f"slo_ttft_miss_rate{suffix}": 0.0,
                f"slo_tpot_miss_rate{suffix}": 0.0}
    return {f"slo_violation_rate{suffix}": (either + n - finished) / n,
            f"slo_ttft_miss_rate{suffix}": ttft / n, f"slo_tpot_miss_rate{suffix}": tpot / n}


def _migration_metrics(cluster: Cluster) -> dict[str, object]:
    st = cluster.migrations.stats
    down = np.asarray(st.downtimes_ns, dtype=np.float64) / NS
    lifetimes = {inst.id: (inst.gone_ns if inst.gone_ns >= 0 else cluster.end_ns) - inst.born_ns
                 for inst in cluster.instances}
    busy = [st.busy_ns.get(i, 0) / t for i, t in lifetimes.items() if t > 0]
    out: dict[str, object] = {
        "migrations": st.committed,
        "migrations_started": st.started,
        "migrations_aborted": sum(st.aborted.values()),
        "migration_bytes": st.bytes_moved,
        "migrating_frac": float(np.mean(busy)) if busy else 0.0,
        "protocol_violations": sum(st.violations.values()),
        "leaked_blocks": sum(inst.reserved for inst in cluster.instances if not inst.dead),
    }
    out.update({f"migrations_aborted_{cause}": n for cause, n in st.aborted.items()})
    if cluster.thresholds:  # auto_threshold: the controller's T, averaged over the rounds run (none while idle)
        out["threshold_mean"] = float(np.mean(cluster.thresholds))
    for q, v in (("mean", down.mean() if len(down) else None), ("p50", np.percentile(down, 50) if len(down) else None),
                 ("p99", np.percentile(down, 99) if len(down) else None), ("max", down.max() if len(down) else None)):
        out[f"downtime_{q}_s"] = None if v is None else float(v)
    return out


def summarize(cluster: Cluster, slo: SLOConfig) -> dict[str, object]:
    """The run's metrics. Latencies in seconds; rates per second; shares in [0, 1].

    ttft: arrival -> first token (queueing and preemptions included). tpot: per request, the mean
    gap between tokens 2..n, i.e. (finish - first token) / (n - 1), for requests with n >= 2.
    queue: arrival -> first admission. slo_violation_rate: share of all requests that were
    rejected, failed or missed the TTFT or the per-token target. preemption_loss_s: Σ over
    preemptions of (kill -> end of the re-prefill), divided by the number of requests. kv_util:
    used / total KV blocks, time-weighted per instance over its lifetime; mean over instances and
    P99 over instances. fragmentation: time average of `cluster.fragmentation` samples.
    slo_ttft_miss_rate / slo_tpot_miss_rate: share of all requests that finished but missed that
    target. With two priority classes the latency stats and SLO rates are also given per class
    (suffix _high / _normal), each class judged against its own targets (SLOConfig.targets).
    Migration, autoscaling and failure metrics: docs/simulator.md. Every key is registered in
    llumverify/settings/metrics_registry.py (checked here, so a new or renamed metric cannot go unlisted).
    """
    ledger, end_ns = cluster.ledger, cluster.end_ns
    n = ledger.arrived
    done = ledger.outcome[:n] == FINISHED
    finished = int(np.count_nonzero(done))
    span = max(cluster.makespan_ns, 1)
    util = [inst.used_integral / (inst.capacity * max((inst.gone_ns if inst.gone_ns >= 0 else end_ns) - inst.born_ns, 1))
            for inst in cluster.instances]
    latencies, misses = _latencies(ledger, done, slo)
    instance_seconds = cluster.instance_seconds()
    summary: dict[str, object] = {
        "requests": n,
        "finished": finished,
        "rejected": ledger.rejected,
        "failed": n - finished - ledger.rejected,
        "redispatched": ledger.redispatches,
        "makespan_s": cluster.makespan_ns / NS,
        "throughput_rps": finished / (span / NS),
        **_token_metrics(ledger, done, span),
        **_slo_rates(n, finished, misses),
        "preemptions": ledger.preemptions,
        "preemption_loss_s": ledger.preempt_loss_ns / NS / n if n else 0.0,
        "kv_util_mean": float(np.mean(util)),
        "kv_util_p99": float(np.percentile(util, 99)),
        "fragmentation": cluster.frag_samples.mean() if len(cluster.frag_samples) else 0.0,
        "instance_seconds": instance_seconds,
        "instances_mean": instance_seconds / (span / NS),
    }
    summary.update(latencies)
    priority = ledger.priority[:n]
    if np.any(priority == HIGH):
        for cls, suffix in ((HIGH, "_high"), (NORMAL, "_normal")):
            cls_done = done & (priority == cls)
            cls_latencies, cls_misses = _latencies(ledger, cls_done, slo, suffix)
            summary.update(cls_latencies)
            summary.update(_slo_rates(int(np.count_nonzero(priority == cls)), int(np.count_nonzero(cls_done)),
                                      cls_misses, suffix))
    summary.update(_migration_metrics(cluster))
    if cluster.engine.metrics is not None:  # the engine's own (sim/engines.py)
        summary.update(cluster.engine.metrics(cluster.instances))
    summary.update(_handoff_metrics(cluster))
    metrics_registry.check_summary(summary)
    return summary


def _handoff_metrics(cluster: Cluster) -> dict[str, object]:
    """P/D runs: hand-offs committed / started / aborted, their downtime (first token on the
    prefill instance -> in a decode batch), bytes moved and how often a request stayed where it
    was prefilled (no decode instance took it)."""
    if cluster.handoffs is None:
        return {}
    st = cluster.handoffs.stats
    down = np.asarray(st.downtimes_ns, dtype=np.float64) / NS
    return {"pd_handoffs": st.committed, "pd_handoffs_started": st.started,
            "pd_handoffs_aborted": sum(st.aborted.values()), "pd_handoff_bytes": st.bytes_moved,
            "pd_handoff_downtime_mean_s": float(down.mean()) if len(down) else None,
            "pd_handoff_downtime_p99_s": float(np.percentile(down, 99)) if len(down) else None,
            "pd_stayed_on_prefill": cluster.handoff_fallbacks,
            "protocol_violations_pd": sum(st.violations.values())}
