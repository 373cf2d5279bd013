"""What `llumverify simulate` prints: the run's description and each policy's serving metrics,
in vLLM's benchmark conventions (mean / median / P99 of TTFT, TPOT, ITL and E2E in ms, request
and token throughput), as a table that fits 100 columns, JSON or CSV.

One place turns a run summary (sim/metrics.py, base units) into the printed fields, so the three
formats always carry the same numbers.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

from llumverify.cli.tables import WIDTH, fit, wrap
from llumverify.settings.config import SimConfig
from llumverify.study.experiment import Workload
from llumverify.sim.run import RunResult

FORMATS = ("table", "json", "csv")


@dataclass(frozen=True)
class Field:
    """One printed number: its key in JSON/CSV (unit in the name), its table label, how it is
    read from a summary, and how the table shows it."""

    key: str
    label: str
    value: Callable[[Mapping[str, object]], float | int | None]
    fmt: str


def _scaled(name: str, factor: float) -> Callable[[Mapping[str, object]], float | None]:
    return lambda s: None if s.get(name) is None else float(s[name]) * factor  # type: ignore[arg-type]


def _count(name: str) -> Callable[[Mapping[str, object]], int | None]:
    return lambda s: None if s.get(name) is None else int(s[name])  # type: ignore[call-overload]


def _latency_fields() -> list[Field]:
    out = []
    for base, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
        stats = (("mean", "mean"),) if base == "itl" else (("mean", "mean"), ("p50", "median"), ("p99", "P99"))
        for stat, word in stats:  # ITL: mean only, the simulator keeps no per-token times (sim/metrics.py)
            out.append(Field(f"{base}_{word.lower()}_ms", f"{label} {word} (ms)", _scaled(f"{base}_{stat}_s", 1e3),
                             ",.1f"))
    return out


FIELDS: tuple[Field, ...] = (
    Field("finished", "finished", _count("finished"), ",d"),
    Field("rejected", "rejected", _count("rejected"), ",d"),
    Field("failed", "failed (crashes)", _count("failed"), ",d"),
    *_latency_fields(),
    Field("request_throughput_rps", "request throughput (req/s)", _scaled("throughput_rps", 1.0), ",.2f"),
    Field("output_throughput_tps", "output token throughput (tok/s)", _scaled("output_throughput_tps", 1.0), ",.0f"),
    Field("slo_attainment_pct", "SLO attainment (%)",
          lambda s: 100.0 * (1.0 - float(s["slo_violation_rate"])), ".1f"),  # type: ignore[arg-type]
    Field("preemptions", "preemptions", _count("preemptions"), ",d"),
    Field("migrations", "migrations", _count("migrations"), ",d"),
    Field("pd_handoffs", "P/D hand-offs", _count("pd_handoffs"), ",d"),  # P/D runs only
)


def metrics(summary: Mapping[str, object]) -> dict[str, float | int]:
    """The printed fields of one policy's summary, in display units; a field the run has no value
    for (hand-offs without P/D, latencies with nothing finished) is left out."""
    out = {}
    for f in FIELDS:
        value = f.value(summary)
        if value is not None:
            out[f.key] = value
    return out


def describe_run(cfg: SimConfig, workload: Workload, requests: int, seed: int,
                 profile: str | None = None) -> dict[str, object]:
    """The header: engine, hardware (GPU / model / TP or the cost source), P/D split, arrival process,
    and the serving front end when one is set."""
    hw = cfg.hardware
    if hw.profile:  # hardware settings are valid only for engines with step costs (sim/engines.py)
        hardware = f"profile {hw.profile}" + (f" / {hw.model}" if hw.model else "")
    elif hw.cost_file:
        hardware = f"step costs {hw.cost_file}"
    elif hw.gpu:
        from llumverify.sim.engine_profile import served_model

        served = served_model(hw.model, hw)
        formats = [f"{f} {w}" for w, f in (("weights", served.weight_format), ("KV", served.kv_format)) if f != "bf16"]
        from llumverify.sim.catalog import get_gpu
        from llumverify.sim.hf_config import config_path

        name = (f"{served.name} (config {hw.model})" if config_path(hw.model)
                else _resolved(hw.model, served.name, "model"))
        gpu = (f"{get_gpu(hw.gpu).name} (file {hw.gpu})" if hw.gpu.strip().lower().endswith(".toml")
               else _resolved(hw.gpu, get_gpu(hw.gpu).name, "gpu"))
        hardware = f"{gpu} / {name}, TP {hw.tp}" + (f" ({', '.join(formats)})" if formats else "")
    else:  # the paper's costs, a named profile's (its own fit: "testbed"), or those a cost file or option changed
        from llumverify.sim.named_profiles import profile_changes

        costs = ("(the paper's cost fit)" if cfg.cost == SimConfig().cost else f"({profile} profile's costs)"
                 if profile and not profile_changes(profile, cfg, "cost.") else "(costs as given)")
        hardware = f"A10 / LLaMA-7B, TP 1, {cfg.engine.num_blocks:,} KV blocks {costs}"
    if hw.dp > 1 and hw.given:
        hardware += f", DP {hw.dp}" + (" + EP" if hw.expert_parallel else "")
    if workload.trace:
        arrival = f"trace {workload.trace}" + (f" at {workload.rate:g} req/s" if workload.rate else "") + \
            (f" x{workload.rate_scale:g}" if workload.rate_scale != 1 else "")
    else:
        cv = f", CV {workload.cv:g}" if workload.arrival == "gamma" else ""
        arrival = f"{workload.arrival} at {workload.rate:g} req/s{cv}, {workload.lengths} lengths"
    if cfg.cluster.users:  # latencies count from each send (sim/cluster.py)
        arrival += f", closed loop of {cfg.cluster.users:,} users"
    run: dict[str, object] = {"engine": cfg.engine.generation, "hardware": hardware,
                              "instances": cfg.cluster.num_instances, "pd": cfg.cluster.pd or "none",
                              "arrival": arrival, "requests": requests, "seed": seed, "slo": _slo(cfg)}
    if profile:  # a named profile's settings (sim/named_profiles.py) under the options given
        run["profile"] = profile
    from llumverify.sim.engines import get_engine

    if get_engine(cfg.engine.generation).step_costs:  # a V1-style engine: its batch limits, and vLLM's
        run["batch"] = _batch_limits(cfg)
    from llumverify.sim.fidelity import measured_error
    from llumverify.sim.named_profiles import profile_error

    paper = not hw.given and not get_engine(cfg.engine.generation).step_costs  # the paper's engine and its costs
    own = profile_error(profile, cfg) if profile and paper else None  # a named profile measured as a whole
    run["measured_error"] = own or ("none: the paper's engine with costs as given (not its published fit), never "
                                    "compared with a real run" if paper and cfg.cost != SimConfig().cost and not profile
                                    else measured_error(cfg))
    cost = cfg.cost
    if cost.api_server_ns or cost.tokenize_ns_per_token:  # latencies are the client's (sim/frontend.py)
        run["front_end"] = (f"{cost.api_server_ns / 1e6:g} ms + {cost.tokenize_ns_per_token / 1e3:g} us "
                            "per prompt token (latencies from the client's send)")
    return run


def _resolved(given: str, entry: str, kind: str) -> str:
    """A catalog name as given, and the entry it resolved to where more than case and punctuation differ ("A100" is
    the A100-80GB)."""
    from llumverify.sim.catalog import normalize

    return given if normalize(given, kind) == normalize(entry, kind) else f"{given} (= {entry})"


def _batch_limits(cfg: SimConfig) -> str:
    """"batch S seqs, T tokens", plus what `vllm serve` would use on the GPU when that differs (a limit
    was given: not given, they are vLLM's own on a catalog GPU, docs/engines.md)."""
    seqs_now, tokens_now = cfg.engine.batch_limits()
    text = f"batch {seqs_now:,} seqs, {tokens_now:,} tokens"
    if cfg.hardware.gpu:
        from llumverify.sim.catalog import get_gpu
        from llumverify.sim.engine_v1 import vllm_serve_defaults

        gpu = get_gpu(cfg.hardware.gpu)
        tokens, seqs = vllm_serve_defaults(gpu.name, gpu.usable_memory_bytes)
        if (seqs, tokens) != (seqs_now, tokens_now):
            text += f" (vllm serve on {gpu.name}: {seqs:,} seqs, {tokens:,} tokens)"
    return text


def _slo(cfg: SimConfig) -> str:
    """The targets "SLO attainment" counts against: both met, per class where the high class has its own."""
    slo = cfg.slo

    def pair(ttft: float, tpot: float) -> str:
        return f"TTFT <= {ttft:g} s and TPOT <= {tpot * 1e3:g} ms"
    normal, high = slo.targets(False), slo.targets(True)
    return pair(*normal) + ("" if high == normal else f" (high priority: {pair(*high)})")


def _header(run: Mapping[str, object]) -> str:
    """Three lines (each wrapped to WIDTH): the workload, where it runs, and how far its step costs
    were measured to be from real engines."""
    lines = (f"{run['requests']:,} requests, {run['arrival']}, seed {run['seed']}; SLO {run['slo']}",
             (f"profile {run['profile']} | " if "profile" in run else "")
             + f"engine {run['engine']} | {run['hardware']} | {run['instances']} instances | P/D {run['pd']}"
             + (f" | {run['batch']}" if "batch" in run else "")
             + (f" | front end {run['front_end']}" if "front_end" in run else ""),
             f"measured error: {run['measured_error']}")
    return "\n".join(wrap(line) for line in lines)


def _shown(f: Field, value: float | int) -> str:
    """A table cell: `value` in its field's format, a share under 100 % never rounded up to 100.0."""
    text = format(value, f.fmt)
    return "99.9" if f.key == "slo_attainment_pct" and value < 100 and text == "100.0" else text


def _table(per_policy: Mapping[str, Mapping[str, float | int]], policies: Sequence[str]) -> str:
    """Metrics down, policies across (columns right-aligned); "-" where a policy has no value."""
    fields = [f for f in FIELDS if any(f.key in per_policy[p] for p in policies)]
    rows = [[f.label, *(_shown(f, per_policy[p][f.key]) if f.key in per_policy[p] else "-" for p in policies)]
            for f in fields]
    return tabulate(rows, headers=["", *policies], disable_numparse=True, colalign=("left", *["right"] * len(policies)))


def render(results: Sequence[RunResult], run: Mapping[str, object], fmt: str = "table",
           warnings: Sequence[str] = ()) -> str:
    """The run's output in `fmt` (FORMATS): table (header line, then the metrics table, its notes and `warnings`),
    json ({"run": header, "policies": {policy: fields}}) or csv (a row per policy, fields as columns); json and
    csv leave `warnings` to the caller (stderr), so their output stays machine-readable."""
    per_policy = {res.policy: metrics(res.summary) for res in results}
    if fmt == "json":
        return json.dumps({"run": dict(run), "policies": per_policy}, indent=2)
    if fmt == "csv":
        keys = [f.key for f in FIELDS if any(f.key in m for m in per_policy.values())]
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["policy", *keys])
        for policy, m in per_policy.items():
            writer.writerow([policy, *(m.get(k, "") for k in keys)])
        return buf.getvalue().rstrip("\n")
    return "\n\n".join([_header(run), *fit(list(per_policy), lambda block: _table(per_policy, block)),
                        *_notes(per_policy), *warnings])


def _notes(per_policy: Mapping[str, Mapping[str, float | int]]) -> list[str]:
    """What the table cannot say by itself: why a migrating policy that migrated nothing repeats the column of the
    policy with its dispatch and no migration (llumnix and least-loaded)."""
    from llumverify.scheduler.policies import POLICIES

    notes = []
    for name, row in per_policy.items():
        p = POLICIES[name] if name in POLICIES else None
        twin = next((q for q in per_policy if q in POLICIES and not POLICIES[q].migrates
                     and p is not None and POLICIES[q].dispatch is p.dispatch), None)
        if p is not None and p.migrates and row.get("migrations") == 0 and twin:
            notes.append(textwrap.fill(f"note: {name} is {twin}'s dispatch plus live migration; it migrated nothing "
                                       "here (no instance's freeness, its free KV blocks per running request, fell "
                                       f"below --migrate-threshold), so its column repeats {twin}'s", WIDTH,
                                       break_on_hyphens=False))
    return notes


# A run "ended before a steady state" when the mean requests waiting over the cluster did not fall from the sixth to
# the seventh to the eighth eighth of the arrival window and the last is at least one per instance and GROWTH times
# the second quarter's mean: a queue still growing when the last request arrives, from an overload or a warm-up
# longer than the run. A burst that drained before the last eighth, or a closed loop (bounded by its users), is not
# one. `llumverify simulate --rate 10` (16 instances, 10,000 requests) says so of every policy, `--rate 9` of
# round-robin, the default 8.5 req/s of none.
GROWTH = 1.5
EIGHTH_SAMPLES = 2  # fewer samples in an eighth of the arrival window say nothing about a trend


def queue_trend(result: RunResult, last_arrival_s: float) -> np.ndarray | None:
    """Mean requests waiting over the cluster in each eighth of the arrival window [0, last arrival], from the run's
    time series (sampled every sample_interval_s); None when an eighth holds too few samples."""
    t = np.fromiter(result.timeseries.get("t_s", ()), dtype=np.float64)
    waiting = np.fromiter(result.timeseries.get("waiting", ()), dtype=np.float64)
    eighth = np.ceil(t / last_arrival_s * 8).astype(np.int64) if last_arrival_s > 0 else np.zeros(0, np.int64)
    means = []
    for k in range(1, 9):
        inside = waiting[eighth == k]  # t in ((k - 1) / 8, k / 8] of the window: the drain after it is left out
        if len(inside) < EIGHTH_SAMPLES:
            return None
        means.append(inside.mean())
    return np.array(means)


def overload_warnings(results: Sequence[RunResult], last_arrival_s: float, closed_loop: bool = False) -> list[str]:
    """One warning naming each policy whose queue was still growing when the last request arrived: its latencies
    then depend on how long the run is, not only on the rate. Not for a closed loop, whose users bound the queue."""
    grew = []
    for res in [] if closed_loop else results:
        trend = queue_trend(res, last_arrival_s)
        if trend is None:
            continue
        instances = max(int(res.summary.get("instances_mean", 1) or 1), 1)  # type: ignore[call-overload]
        second_quarter = float(trend[2:4].mean())
        if trend[5] <= trend[6] <= trend[7] and trend[7] >= max(instances, GROWTH * second_quarter):
            grew.append(f"{res.policy} {second_quarter:,.1f} -> {trend[7]:,.1f}")
    if not grew:
        return []
    return [textwrap.fill(
        f"warning: queues were still growing when the last request arrived ({'; '.join(grew)} requests waiting, mean "
        "of the second quarter and of the last eighth of the arrivals): the run ended before a steady state (an "
        "overload, or a warm-up longer than the run), so its latencies depend on --requests; a longer run shows which",
        WIDTH, break_on_hyphens=False)]
