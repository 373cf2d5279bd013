"""Every metric a run reports, defined once: name, unit, meaning, how seeds aggregate, which way is better.

The simulator's summaries (sim/metrics.py) may only carry registered names and must carry every
one that is always there; tables and report panels look their labels up here; experiment
`finding` templates are checked against it when the file is read. So a renamed metric is an
error where it is used, never a column or a panel that silently disappears. Stdlib only: the
simulator, the study layer and the CLI all read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# When a metric is in a run's summary (Metric.when).
ALWAYS = "every run"
CLASSES = "runs with high-priority requests (per-class metrics)"
AUTO_THRESHOLD = "runs with scheduler.auto_threshold"
VLLM_V1 = "vllm-v1 runs"
PD = "prefill/decode runs (cluster.pd)"
ROWS = "results rows only: derived by results.py from the summary"

# How results.py combines a metric over seeds (Metric.over_seeds): "mean" is the mean and the
# half-width of its 95 % Student-t interval.
AGGREGATIONS = ("mean",)

# display unit -> factor from the base unit (a value in "s" shown in "ms" is x 1000)
_SCALES = {("s", "ms"): 1000.0, ("share", "%"): 100.0}


@dataclass(frozen=True)
class Metric:
    """One reported number.

    unit: of the stored value ("s", "share" in [0, 1], "count", "1/s", "tokens/s", "bytes", "instance-s",
    "instances", "tokens", "blocks/request"). higher_is_better: None for numbers that describe a
    run rather than grade it. label: a table header's words, title: a plot panel's (default the
    label); display: the unit they show it in ("" when the label says it), whence `scale`.
    """

    name: str
    unit: str
    description: str
    higher_is_better: bool | None
    when: str = ALWAYS
    over_seeds: str = "mean"
    label: str = ""
    title: str = ""
    display: str = ""

    @property
    def scale(self) -> float:
        """Factor from the stored value to the displayed one."""
        return _SCALES.get((self.unit, self.display), 1.0)

    @property
    def bounds(self) -> tuple[float, float]:
        """The values the metric can take (stored units): a share lies in [0, 1], every other
        metric is >= 0, so an interval around a mean is clipped to these."""
        return (0.0, 1.0) if self.unit == "share" else (0.0, float("inf"))

    @property
    def header(self) -> str:
        """Table header: label and display unit ("TPOT P99 ms")."""
        return f"{self.label or self.name} {self.display}".rstrip()

    @property
    def panel(self) -> str:
        """Plot panel title: title and display unit ("decode per-token P99 (ms)")."""
        words = self.title or self.label or self.name
        return f"{words} ({self.display})" if self.display else words


def _latency_family() -> list[Metric]:
    """ttft/tpot/e2e/queue x mean/p50/p99, overall and per priority class."""
    out = []
    for base, short, long, what, display in (
            ("ttft", "TTFT", "TTFT", "arrival -> first token, queueing and preemptions included", "s"),
            ("tpot", "TPOT", "decode per-token", "per request with >= 2 tokens, (finish - first token) / (n - 1)", "ms"),
            ("e2e", "e2e", "end-to-end", "arrival -> finish", "s"),
            ("queue", "queue", "queueing", "arrival -> first admission", "s")):
        for stat, word in (("mean", "mean"), ("p50", "P50"), ("p99", "P99")):
            for suffix, when, cls in (("", ALWAYS, ""), ("_high", CLASSES, " high"), ("_normal", CLASSES, " normal")):
                out.append(Metric(f"{base}_{stat}_s{suffix}", "s", f"{word} over finished requests of {what}"
                                  + (f", {cls.strip()}-priority class" if cls else ""), False, when,
                                  label=f"{short} {word}{cls}", title=f"{long} {word}{cls}", display=display))
    return out


def _slo_family() -> list[Metric]:
    """SLO violation and miss rates, overall and per class (each class against its own targets)."""
    out = []
    for suffix, when, cls in (("", ALWAYS, ""), ("_high", CLASSES, "high"), ("_normal", CLASSES, "normal")):
        of = f" of the {cls}-priority class" if cls else ""
        out += [
            Metric(f"slo_violation_rate{suffix}", "share", f"share of all requests{of} rejected, failed or missing "
                   "the TTFT or the per-token target", False, when, label=f"{cls} viol" if cls else "SLO viol",
                   title=f"SLO violations, {cls} priority" if cls else "SLO violations", display="%"),
            Metric(f"slo_ttft_miss_rate{suffix}", "share", f"share of all requests{of} that finished but missed "
                   "the TTFT target", False, when, label=f"{cls} TTFT miss".strip(), display="%"),
            Metric(f"slo_tpot_miss_rate{suffix}", "share", f"share of all requests{of} that finished but missed "
                   "the per-token target", False, when, label=f"{cls} TPOT miss".strip(), display="%"),
        ]
    return out


# sim/migration.py's abort causes (MigrationStats.aborted is keyed by them, every one counted).
ABORT_CAUSES = {"finished": "the request finished on S", "preempted": "S preempted it (ABORTED_SRC)",
                "dst_refused": "D refused the pre-allocation", "dst_failure": "D died (seen by the RPC timeout)",
                "src_failure": "S died", "max_stages": "too many stages", "fenced": "a fenced reply",
                "timeout": "a live D replied too late"}

_METRICS: tuple[Metric, ...] = (
    Metric("requests", "count", "requests in the workload", None),
    Metric("finished", "count", "requests that finished", True, label="done"),
    Metric("rejected", "count", "requests ended as rejected:<reason>", False, label="rej"),
    Metric("failed", "count", "requests ended as failed:<reason> (killed by a crash)", False),
    Metric("redispatched", "count", "re-dispatches after crashes", None),
    Metric("makespan_s", "s", "time the last request ended", None),
    Metric("throughput_rps", "1/s", "finished requests / makespan", True, label="req/s"),
    Metric("output_throughput_tps", "tokens/s", "output tokens of finished requests / makespan", True,
           label="output tok/s"),
    Metric("itl_mean_s", "s", "mean gap between consecutive output tokens, pooled over the tokens 2..n of every "
           "finished request (token-weighted; no median or P99: per-token times are not kept)", False,
           label="ITL mean", display="ms"),
    *_slo_family(),
    Metric("preemptions", "count", "recompute preemptions", False, label="preempt"),
    Metric("preemption_loss_s", "s", "sum over preemptions of (kill -> end of the re-prefill) / requests", False,
           label="preempt loss", title="preemption loss per request", display="s"),
    Metric("kv_util_mean", "share", "used / total KV blocks, time-weighted per instance; mean over instances", None,
           label="KV used", title="KV memory used, mean", display="%"),
    Metric("kv_util_p99", "share", "used / total KV blocks, time-weighted per instance; P99 over instances", None),
    Metric("fragmentation", "share", "time average of the free share of the cluster's blocks while some "
           "instance's queue head is blocked that the cluster as a whole could admit", False,
           label="frag", title="fragmentation", display="%"),
    Metric("instance_seconds", "instance-s", "sum of instance lifetimes up to the makespan", False),
    Metric("instances_mean", "instances", "instance_seconds / makespan", None),
    *_latency_family(),
    Metric("migrations", "count", "migrations committed (D runs the request)", None, label="migr"),
    Metric("migrations_started", "count", "migrations begun (a request was chosen)", None),
    Metric("migrations_aborted", "count", "migrations aborted, all causes", None),
    *(Metric(f"migrations_aborted_{cause}", "count", f"migrations aborted because {why}", None)
      for cause, why in ABORT_CAUSES.items()),
    Metric("migration_bytes", "bytes", "KV bytes copied by migrations", None),
    Metric("migrating_frac", "share", "per instance, share of its lifetime in a migration; mean over instances", None),
    Metric("protocol_violations", "count", "safety predicates broken by migrations (code-faithful variants)", False),
    Metric("leaked_blocks", "count", "KV blocks reserved and never freed", False),
    Metric("threshold_mean", "blocks/request", "the auto-tuned migration threshold T, mean over rounds", None,
           AUTO_THRESHOLD),
    *(Metric(f"downtime_{stat}_s", "s", f"{word} pause of a committed migration: stopped on S -> in D's batch",
             False) for stat, word in (("mean", "mean"), ("p50", "P50"), ("p99", "P99"), ("max", "largest"))),
    Metric("prefix_hit_rate", "share", "prompt tokens served from the prefix cache / prompt tokens admitted",
           True, VLLM_V1),
    Metric("prefill_tokens_saved", "tokens", "prompt tokens served from the prefix cache", True, VLLM_V1),
    Metric("prefill_tokens_computed", "tokens", "prompt tokens prefilled (re-prefills included)", None, VLLM_V1),
    Metric("pd_handoffs", "count", "prefill -> decode hand-offs committed", None, PD),
    Metric("pd_handoffs_started", "count", "hand-offs begun", None, PD),
    Metric("pd_handoffs_aborted", "count", "hand-offs aborted", None, PD),
    Metric("pd_handoff_bytes", "bytes", "KV bytes copied by hand-offs", None, PD),
    Metric("pd_handoff_downtime_mean_s", "s", "mean hand-off downtime: first token -> in a decode batch", False, PD),
    Metric("pd_handoff_downtime_p99_s", "s", "P99 hand-off downtime", False, PD),
    Metric("pd_stayed_on_prefill", "count", "requests no decode instance took (decoded where prefilled)", None, PD),
    Metric("protocol_violations_pd", "count", "safety predicates broken by hand-offs", False, PD),
    Metric("migrations_per_s", "1/s", "migrations / makespan_s", None, ROWS,
           label="migr/s", title="migrations per second"),
)

# The time series a run samples every SimConfig.sample_interval_s (RunResult.timeseries).
_SERIES: tuple[Metric, ...] = (
    Metric("t_s", "s", "simulated time of the sample", None),
    Metric("kv_util_mean", "share", "mean over serving instances of used / total KV blocks", None,
           title="KV memory used", display="%"),
    Metric("fragmentation", "share", "the fragmentation sample (see the summary metric)", None,
           title="fragmentation", display="%"),
    Metric("instances", "instances", "instances not crashed or removed, start-up included", None, title="instances"),
    Metric("waiting", "count", "queued requests over the cluster", None, title="waiting requests"),
    Metric("migrations_inflight", "count", "migrations under way", None, title="migrations in flight"),
    Metric("threshold", "blocks/request", "the auto-tuned migration threshold", None, AUTO_THRESHOLD,
           title="migration threshold T"),
)

METRICS: Mapping[str, Metric] = {m.name: m for m in _METRICS}
SERIES: Mapping[str, Metric] = {m.name: m for m in _SERIES}

# Lower-is-better latencies that reports compare as policy ratios and `finding` templates may quote
# as ratio[METRIC][A/B] and wratio[WORKLOAD][METRIC][A/B].
RATIO_METRICS = ("ttft_mean_s", "ttft_p99_s", "tpot_p99_s", "e2e_mean_s", "e2e_p99_s", "preemption_loss_s")


class UnknownMetric(KeyError):
    """A name that is not registered: a renamed or misspelt metric."""

    def __str__(self) -> str:
        return str(self.args[0])


def get(name: str, registry: Mapping[str, Metric] = METRICS) -> Metric:
    """The registered metric `name`; UnknownMetric (naming it) if there is none."""
    try:
        return registry[name]
    except KeyError:
        kind = "time series" if registry is SERIES else "metric"
        raise UnknownMetric(f"unknown {kind} {name!r} (registered in llumverify/settings/metrics_registry.py)") from None


def check_summary(keys: Iterable[str]) -> None:
    """UnknownMetric if a summary has an unregistered key or lacks one that every run has."""
    keys = set(keys)
    for name in sorted(keys):
        if get(name).when == ROWS:
            raise UnknownMetric(f"summary key {name!r} is derived by results.py, not a summary metric")
    missing = [m.name for m in _METRICS if m.when == ALWAYS and m.name not in keys]
    if missing:
        raise UnknownMetric(f"summary lacks the metric {missing[0]!r} that every run reports")

