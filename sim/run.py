"""The simulator's entry points: run one policy over a workload, write the result files."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llumverify.settings.config import SimConfig
from llumverify.errors import UserError
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.engines import get_engine, validate
from llumverify.sim.instance import Request
from llumverify.sim.metrics import summarize
from llumverify.sim.request_output import RequestsFile

# summary.json layout: 2 added schema_version (a file without it is version 1, the same layout).
SUMMARY_SCHEMA_VERSION = 2


@dataclass
class RunResult:
    """One policy's run: its summary, how long it took to simulate, and its Request objects in
    arrival order if the run kept them (None otherwise: sim/records.py)."""

    policy: str
    records: list[Request] | None
    summary: dict[str, object]
    wall_s: float
    # SERIES_KEYS, one value per sample_interval_s (run-length stored: sim/samples.py)
    timeseries: dict[str, Sequence[float]] = field(default_factory=dict)


def simulate(specs: Sequence[RequestSpec], policy: str, cfg: SimConfig = SimConfig(),
             progress: Callable[[int], None] | None = None, keep_records: bool = False,
             rows: RequestsFile | None = None) -> RunResult:
    """Simulate `specs` (sorted by arrival) on the cluster under `policy` until every request ended;
    `progress(n)` hears how many have ended, about 200 times a run (for a progress bar). `rows`
    receives each request's output row as it ends; keep_records keeps the Request objects."""
    validate(cfg)
    pol = get_policy(policy)
    _check_specs(specs)
    start = time.perf_counter()
    on_row = None if rows is None else functools.partial(rows.write, policy)
    cluster = Cluster(specs, pol, cfg, on_progress=progress, keep_records=keep_records, on_row=on_row)
    cluster.run()
    wall = time.perf_counter() - start
    summary = summarize(cluster, cfg.slo)
    return RunResult(policy, cluster.records if keep_records else None, summary, wall, cluster.series)


# Peak memory of one process, measured with /usr/bin/time -v (2026-12-02, ShareGPT-like requests
# at 30 req/s on 64 instances): `llumverify simulate --requests N` peaks at 77 MB for 20k requests
# and 107 MB for 300k (0.11 KB a request), 80 MB for 20k under three policies, and
# benchmarks/bench_scale.py at 1,091,268 kB for 10M (least-loaded). A request costs its workload
# columns (17 B), its ledger columns (38 B) and the summary's temporaries (~47 B); each policy's
# run frees its ledger when it ends, so policies do not add up. A request in flight costs ~0.6 KB
# more while it is: a run far over capacity, holding most requests queued at once, needs more.
# The compiled build's extensions add to the interpreter's own: `llumverify simulate --engine vllm-v1
# --requests 200 --rate 2000 --instances 1 --policy round-robin` peaks at 87,460 kB compiled and
# 75,160 kB pure (/usr/bin/time, 2026-12-04): the base covers the compiled one.
BASE_MB = 95.0
KB_PER_REQUEST = 0.12  # the vllm-0.2 engine's, and any engine's that measured none (sim/engines.py)


# Per instance: 3.6 KB measured (`llumverify simulate --requests 200 --instances 2000 --policy
# round-robin` peaks 7.2 MB above 2 instances, /usr/bin/time -v, 2026-12-04). Per sample of the
# fragmentation and time series: 8 B each for its value and the summary's expanded copy, and about
# 8 B more per series value a sweep keeps. Per request, each engine's (Engine.kb_per_request,
# sim/engines.py, measured there for vllm-v1).
KB_PER_INSTANCE = 4.0
BYTES_PER_SAMPLE = 24
MAX_SAMPLES = 50_000_000  # ~1.6 years of 1 s samples: a longer span is a gap no real trace has


def estimated_memory_mb(requests: int, instances: int = 1, samples: int = 0,
                        kb_per_request: float | None = None) -> float:
    """Peak memory of simulating `requests` on `instances` for `samples` sampling periods under any
    number of policies in one process (an upper estimate from the measurements above, for runs that
    do not queue most requests at once); kb_per_request: the engine's, if it measured its own."""
    per_request = KB_PER_REQUEST if kb_per_request is None else kb_per_request
    return (BASE_MB + (per_request * requests + KB_PER_INSTANCE * instances) / 1024
            + BYTES_PER_SAMPLE * samples / 2**20)


def available_memory_mb() -> float | None:
    """The memory the machine can give now (Linux MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def check_memory(requests: int, budget_mb: float | None, cfg: SimConfig | None = None, span_s: float = 0.0) -> None:
    """Refuse, before any work, a run whose estimated peak exceeds the budget (None: the memory
    available now, if known), or whose arrivals span more sampling periods than MAX_SAMPLES.

    cfg: the run's instances, engine generation and sampling period; span_s: its last arrival."""
    cfg = cfg or SimConfig()
    samples = int(span_s / cfg.sample_interval_s) + 1
    if samples > MAX_SAMPLES:
        raise UserError(f"the arrivals span {span_s:,.0f} s: {samples:,} samples of {cfg.sample_interval_s:g} s, "
                        f"over the {MAX_SAMPLES:,} a run may take; shorten the gaps between arrivals or raise "
                        "sample_interval_s ([sim] in an experiment file)")
    if budget_mb is None:
        budget_mb = available_memory_mb()
        source = "the memory available now"
    else:
        source = "--memory-budget"
    instances = cfg.cluster.num_instances
    if cfg.autoscale.enabled:
        instances = max(instances, cfg.autoscale.max_instances)
    need = estimated_memory_mb(requests, instances, samples, get_engine(cfg.engine.generation).kb_per_request)
    if budget_mb is not None and need > budget_mb:
        raise UserError(f"this run needs about {need:,.0f} MB ({requests:,} requests, {instances:,} instances, "
                        f"{samples:,} samples + {BASE_MB:.0f} MB), over {source} ({budget_mb:,.0f} MB): "
                        "run fewer requests or instances, or raise --memory-budget")


def _check_specs(specs: Sequence[RequestSpec]) -> None:
    last = float("-inf")
    for k, s in enumerate(specs):
        if s.id != k:
            raise UserError(f"request {k}: ids must be 0..n-1 in arrival order (got id {s.id})")
        if s.prompt_tokens < 1 or s.output_tokens < 1:
            raise UserError(f"request {s.id}: prompt and output must be >= 1 token "
                            f"(got {s.prompt_tokens}, {s.output_tokens})")
        if s.arrival_s < last:
            raise UserError(f"request {s.id}: arrivals must be sorted (arrival_s {s.arrival_s} < {last})")
        last = s.arrival_s


def write_summary_json(path: Path, results: Sequence[RunResult], config: dict[str, object]) -> None:
    """{"schema_version": ..., "config": ..., "policies": {policy: summary}} with sorted keys."""
    doc = {"schema_version": SUMMARY_SCHEMA_VERSION, "config": config,
           "policies": {res.policy: res.summary for res in results}}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
