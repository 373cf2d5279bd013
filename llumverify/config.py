"""Every setting and its default, in one place (LLaMA-7B fp16 on one A10 by default).

Frozen dataclasses so a run's configuration is a value: hashable, printable, comparable.
`validate()` raises UserError naming the bad field; the CLI turns that into one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from llumverify.errors import UserError


# Simulated time is integer nanoseconds; no time a run is given (an arrival, a crash, a timer) may
# exceed this: 1e9 s is about 31.7 years, beyond any trace, and far below where seconds -> ns overflows.
MAX_TIME_S = 1e9


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not value > 0:
            raise UserError(f"{type(obj).__name__}.{name} must be > 0, got {value!r}")
        _finite(obj, name)


def _non_negative(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not value >= 0:
            raise UserError(f"{type(obj).__name__}.{name} must be >= 0, got {value!r}")
        _finite(obj, name)


def _finite(obj: object, *names: str) -> None:
    """nan passes no comparison and inf every upper bound: numbers must be finite to mean anything."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise UserError(f"{type(obj).__name__}.{name} must be a finite number, got {value!r}")


def _seconds(obj: object, *names: str, period: bool = False) -> None:
    """Times within MAX_TIME_S; a period (a timer that repeats) of at least 1 simulated ns, or 0 where
    0 means "off": a period that rounds to 0 ns would loop forever at one instant."""
    for name in names:
        value = getattr(obj, name)
        if value > MAX_TIME_S:
            raise UserError(f"{type(obj).__name__}.{name} must be at most {MAX_TIME_S:.0e} s, got {value!r}")
        if period and 0 < value < 1e-9:
            raise UserError(f"{type(obj).__name__}.{name} must be 0 or at least 1e-9 s (one simulated ns), got {value!r}")


GENERATIONS = ("vllm-0.2", "vllm-v1")  # engine generations an instance can follow


@dataclass(frozen=True)
class EngineConfig:
    """One vLLM instance (LLUMNIX.md §1): 16-token blocks, 851 blocks for 7B on an A10.

    generation: which engine's scheduling the instance follows. "vllm-0.2" (the paper's engine:
    prefill-only steps, FCFS admission of whole prompts above the watermark) or "vllm-v1"
    (chunked prefill in a shared per-step token budget, prefix caching, sim/engine_v1.py).
    prefix_caching: vllm-v1 only: full prompt blocks are cached by hash and shared.
    """

    num_blocks: int = 851
    block_size: int = 16
    watermark_frac: float = 0.01
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 12_800
    generation: str = "vllm-0.2"
    prefix_caching: bool = True

    @property
    def watermark_blocks(self) -> int:
        """vLLM's watermark: int(0.01 * blocks) blocks kept free at admission."""
        return int(self.watermark_frac * self.num_blocks)

    def validate(self) -> None:
        _positive(self, "num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens")
        if self.generation not in GENERATIONS:
            raise UserError(f"EngineConfig.generation must be one of {', '.join(GENERATIONS)}, got {self.generation!r}")
        if not 0 <= self.watermark_frac < 1:
            raise UserError(f"EngineConfig.watermark_frac must be in [0, 1), got {self.watermark_frac!r}")


@dataclass(frozen=True)
class SLOConfig:
    """Targets for the SLO-violation rate: a request violates if either target of its class is missed.

    high_ttft_s / high_per_token_s: the high-priority class's own targets (differentiated SLOs);
    None means the normal targets, so a single-SLO run is unchanged.
    """

    ttft_s: float = 10.0
    per_token_s: float = 0.2
    high_ttft_s: float | None = None
    high_per_token_s: float | None = None

    def targets(self, high: bool) -> tuple[float, float]:
        """(TTFT, per-token) targets of the high-priority class if `high`, else of the normal class."""
        if not high:
            return self.ttft_s, self.per_token_s
        return (self.ttft_s if self.high_ttft_s is None else self.high_ttft_s,
                self.per_token_s if self.high_per_token_s is None else self.high_per_token_s)

    def validate(self) -> None:
        _positive(self, "ttft_s", "per_token_s")
        for name in ("high_ttft_s", "high_per_token_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
                                      or not math.isfinite(value)):
                raise UserError(f"SLOConfig.{name} must be a number > 0, finite (or unset), got {value!r}")


def describe(obj: object) -> dict[str, object]:
    """A config as a plain dict (for summary.json and reports)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]


def _ints(obj: object, *names: str) -> None:
    """Cost coefficients are integers so simulated time stays exact (bool is not an int here)."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{type(obj).__name__}.{name} must be an integer, got {value!r}")


@dataclass(frozen=True)
class CostConfig:
    """Step-time coefficients, integers in ns (ps for the small quadratic prefill term).

    prefill(t_i) = prefill_ns_per_token·Σt_i + prefill_ps_per_token_sq·Σt_i²/1000 + prefill_ns
    decode(B, C) = decode_ns_per_seq·B + decode_ns_per_token·C + decode_ns   (C = Σ KV tokens)
    Every step adds gap_ns (the AE simulator's 4 ms). Defaults fit LLaMA-7B on an A10
    (LLUMNIX.md §1; the fit is tabulated in docs/simulator.md). Migration: a stage moving n
    blocks takes n·block_size·kv_bytes_per_token·8/bandwidth_bps + rpc_ns, and each control RPC
    (pre-allocate, commit, free) takes rpc_ns round trip. 20.336 Gb/s (3.3 ms per 8 MiB block)
    and 3.33 ms per RPC reproduce Fig. 10: a blocking copy of 256 / 8k tokens ≈ 63 / 1,700 ms,
    a live-migration downtime ≈ 13 / 20-26 ms (docs/simulator.md).
    """

    prefill_ns_per_token: int = 198_510
    prefill_ps_per_token_sq: int = 5_394
    prefill_ns: int = 6_827_957
    decode_ns_per_seq: int = 250_000
    decode_ns_per_token: int = 2_600
    decode_ns: int = 20_000_000
    gap_ns: int = 4_000_000
    kv_bytes_per_token: int = 524_288
    bandwidth_bps: int = 20_336_000_000
    rpc_ns: int = 3_333_333

    def validate(self) -> None:
        names = [f.name for f in fields(self)]
        _ints(self, *names)
        _non_negative(self, *names)
        _positive(self, "bandwidth_bps", "kv_bytes_per_token")
        if self.decode_ns + self.gap_ns == 0 or self.prefill_ns + self.gap_ns == 0:
            raise UserError("CostConfig: decode_ns + gap_ns and prefill_ns + gap_ns must be > 0 "
                            "(a step must take time)")


PD_FALLBACKS = ("local", "retry")  # what a request does when no decode instance takes it


@dataclass(frozen=True)
class ClusterConfig:
    """The serving cluster: how many instances, their roles and how fresh their load reports are.

    pd = "P:D" disaggregates prefill and decode: requests are dispatched to the P prefill
    instances and, after their first token, handed off to a decode instance (the freest) through
    the migration protocol's `pd` variant (MigrationConfig.pd_variant); Llumnix's migrations then
    balance the decode instances only. pd_fallback: when no decode instance takes a request, it
    decodes where it is ("local", as Llumnix HEAD does) or is offered again every migration
    round period ("retry").

    report_interval_s = 0 means the load is refreshed every engine step (the AE); > 0 means the
    global scheduler polls every that many seconds (HEAD: 0.05), so requests dispatched since the
    last poll are invisible to load-based dispatch.
    """

    num_instances: int = 16
    report_interval_s: float = 0.0
    pd: str = ""
    pd_fallback: str = "local"

    def roles(self) -> tuple[str, ...]:
        """Each instance's role: all "neutral", or with pd = "P:D" the first P "prefill", the rest "decode"."""
        if not self.pd:
            return ("neutral",) * self.num_instances
        p, d = (int(x) for x in self.pd.split(":"))
        return ("prefill",) * p + ("decode",) * d

    def validate(self) -> None:
        _positive(self, "num_instances")
        _non_negative(self, "report_interval_s")
        _seconds(self, "report_interval_s", period=True)
        if self.pd:
            parts = self.pd.split(":")
            if len(parts) != 2 or not all(x.isdigit() and int(x) > 0 for x in parts):
                raise UserError(f"ClusterConfig.pd must be P:D with P, D >= 1 (e.g. 2:6), got {self.pd!r}")
            if sum(int(x) for x in parts) != self.num_instances:
                raise UserError(f"ClusterConfig.pd {self.pd} needs {sum(int(x) for x in parts)} instances, "
                                f"num_instances is {self.num_instances}")
        if self.pd_fallback not in PD_FALLBACKS:
            raise UserError(f"ClusterConfig.pd_fallback must be one of {', '.join(PD_FALLBACKS)}, got {self.pd_fallback!r}")


SELECTIONS = ("lcfs", "sr", "lr")  # which running request a migration source moves (scheduler/selection.py)
ON_FAILURE = ("fail", "redispatch")


@dataclass(frozen=True)
class SchedulerConfig:
    """Llumnix's global scheduling rules (LLUMNIX.md §3-4); read by every policy, migration by llumnix.

    migrate_threshold: T, sources have F_m < T, destinations F_m > T (the artifact: 3; 10 for
    M-M and S-L). period_steps: a migration round about every that many steps per instance (the
    AE: 16 x 4 fresh step reports), run as a time period of period_steps reference decode steps
    (round_period_s overrides; see docs/simulator.md). head_only_freeness: F_m subtracts only the
    head-of-line request (v0.1.0/HEAD, the paper's Alg. 1) instead of every waiting request (AE).
    priorities: the dispatch penalty, the T - 100 headroom and high-priority-first queueing.
    prediction_error: σ of the `predicted` policy's output-length predictor, predicted = true ×
    exp(σ·z), z ~ N(0, 1) drawn from (prediction_seed, request id); 0 is an oracle
    (scheduler/prediction.py).
    auto_threshold: an online controller moves T each migration round within
    [threshold_min, threshold_max], by x threshold_increase or x threshold_decrease
    (scheduler/threshold.py); it starts from migrate_threshold.
    """

    migrate_threshold: float = 3.0
    migrate_select: str = "lcfs"
    period_steps: int = 4
    round_period_s: float = 0.0
    head_only_freeness: bool = False
    priorities: bool = True
    prediction_error: float = 0.0
    prediction_seed: int = 0
    auto_threshold: bool = False
    threshold_min: float = 1.0
    threshold_max: float = 60.0
    threshold_increase: float = 1.25
    threshold_decrease: float = 0.8

    def validate(self) -> None:
        _positive(self, "period_steps")
        _non_negative(self, "round_period_s", "prediction_seed")
        _seconds(self, "round_period_s", period=True)
        _finite(self, "migrate_threshold", "threshold_max", "threshold_increase", "threshold_decrease")
        if isinstance(self.prediction_error, bool) or not isinstance(self.prediction_error, (int, float)) \
                or not 0 <= self.prediction_error < float("inf"):
            raise UserError(f"SchedulerConfig.prediction_error must be a finite number >= 0, "
                            f"got {self.prediction_error!r}")
        if self.migrate_select not in SELECTIONS:
            raise UserError(f"SchedulerConfig.migrate_select must be one of {', '.join(SELECTIONS)}, "
                            f"got {self.migrate_select!r}")
        _positive(self, "threshold_min")
        if not self.threshold_min <= self.threshold_max:
            raise UserError(f"SchedulerConfig: threshold_min {self.threshold_min!r} > threshold_max {self.threshold_max!r}")
        if not self.threshold_increase > 1 or not 0 < self.threshold_decrease < 1:
            raise UserError(f"SchedulerConfig: threshold_increase must be > 1 and threshold_decrease in (0, 1), "
                            f"got {self.threshold_increase!r}, {self.threshold_decrease!r}")
        if self.auto_threshold and not self.threshold_min <= self.migrate_threshold <= self.threshold_max:
            raise UserError(f"SchedulerConfig.migrate_threshold {self.migrate_threshold!r} (auto_threshold's start) "
                            f"must be in [threshold_min, threshold_max] = [{self.threshold_min!r}, {self.threshold_max!r}]")


@dataclass(frozen=True)
class MigrationConfig:
    """How live migrations run: which protocol variant, its timers, and its cost on the source.

    last_stage_blocks: the final stage begins when at most this many blocks remain (HEAD: 16)
    for variants that leave it open. slowdown_ppm: decode steps on the source run this much
    slower while it migrates (paper: 1-3 %).
    """

    variant: str = "safe"
    pd_variant: str = "pd"
    last_stage_blocks: int = 16
    slowdown_ppm: int = 20_000
    rpc_timeout_s: float = 10.0
    lease_s: float = 10.0
    lease_check_s: float = 5.0

    def validate(self) -> None:
        from llumverify.protocol.variants import get_variant

        get_variant(self.variant)
        _non_negative(self, "last_stage_blocks", "slowdown_ppm")
        _positive(self, "rpc_timeout_s", "lease_s", "lease_check_s")
        _seconds(self, "rpc_timeout_s", "lease_s")
        _seconds(self, "lease_check_s", period=True)


@dataclass(frozen=True)
class AutoscaleConfig:
    """Load-based autoscaling as the AE runs it (LLUMNIX.md §4): every interval_s, add instances
    while the aggregate F_d < scale_up_below, drain the newest when F_m without it > scale_down_above."""

    enabled: bool = False
    interval_s: float = 10.0
    scale_up_below: float = 10.0
    scale_down_above: float = 60.0
    startup_s: float = 5.0
    min_instances: int = 1
    max_instances: int = 16

    def validate(self) -> None:
        _positive(self, "interval_s", "min_instances", "max_instances")
        _non_negative(self, "startup_s")
        _finite(self, "scale_up_below", "scale_down_above")
        _seconds(self, "startup_s")
        _seconds(self, "interval_s", period=True)
        if self.min_instances > self.max_instances:
            raise UserError(f"AutoscaleConfig: min_instances {self.min_instances} > max_instances {self.max_instances}")


@dataclass(frozen=True)
class FailureConfig:
    """Instance failures: scheduled (instance, time_s) crashes and random ones per instance-hour.

    on_failure: the requests a crash kills end as failed:<reason> or are re-dispatched (recompute).
    """

    at: tuple[tuple[int, float], ...] = ()
    rate_per_hour: float = 0.0
    on_failure: str = "fail"
    seed: int = 0

    def validate(self) -> None:
        _non_negative(self, "rate_per_hour")
        if self.on_failure not in ON_FAILURE:
            raise UserError(f"FailureConfig.on_failure must be one of {', '.join(ON_FAILURE)}, got {self.on_failure!r}")
        for iid, t in self.at:
            if iid < 0 or not 0 <= t <= MAX_TIME_S:
                raise UserError(f"FailureConfig.at: bad failure {iid}@{t} (instance >= 0, 0 <= time <= {MAX_TIME_S:.0e} s)")


@dataclass(frozen=True)
class HardwareConfig:
    """Where a vllm-v1 engine's step costs and KV capacity come from, at most one source:
    profile: a per-layer profile folder (sim/profile.py; model names the layer count if its
    meta.yaml does not); cost_file: a step-cost TOML (`llumverify calibrate` writes them); gpu and
    model: catalog entries, step costs from first principles (sim/roofline.py) and, with
    kv_from_catalog, the KV blocks from memory, weights and gpu_memory_utilization. All empty:
    the paper's published A10/LLaMA-7B fit (LLUMNIX.md §1) in the V1 step form.
    """

    gpu: str = ""
    model: str = ""
    tp: int = 1
    profile: str = ""
    cost_file: str = ""
    kv_from_catalog: bool = True
    gpu_memory_utilization: float = 0.9

    @property
    def given(self) -> bool:
        return bool(self.gpu or self.model or self.profile or self.cost_file)

    def validate(self) -> None:
        if self.profile and self.cost_file:
            raise UserError("HardwareConfig: profile and cost_file are two sources of step costs: give one")
        if (self.gpu or self.model) and not (self.gpu and self.model) and not self.profile and not self.cost_file:
            raise UserError("HardwareConfig: gpu and model go together (first principles needs both)")
        _positive(self, "tp")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise UserError(f"HardwareConfig.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")


@dataclass(frozen=True)
class SimConfig:
    """One simulation run: engine, costs, cluster, SLO targets and how the simulator executes.

    fast=False steps every decode step one by one (the reference the closed-form path must equal).
    sample_interval_s: how often the fragmentation metric and the time series sample the cluster
    (simulated seconds).
    """

    engine: EngineConfig = EngineConfig()
    cost: CostConfig = CostConfig()
    cluster: ClusterConfig = ClusterConfig()
    slo: SLOConfig = SLOConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    migration: MigrationConfig = MigrationConfig()
    autoscale: AutoscaleConfig = AutoscaleConfig()
    failures: FailureConfig = FailureConfig()
    fast: bool = True
    sample_interval_s: float = 1.0
    hardware: HardwareConfig = HardwareConfig()
    step: object | None = None  # sim.stepcost.StepCost of a vllm-v1 engine, resolved from `hardware`

    def validate(self) -> None:
        if self.step is not None:
            self.step.validate()  # type: ignore[attr-defined]
        self.hardware.validate()
        if self.hardware.given and self.engine.generation != "vllm-v1":
            raise UserError("hardware settings (gpu, model, profile, cost_file) need engine generation vllm-v1")
        for part in (self.engine, self.cost, self.cluster, self.slo, self.scheduler, self.migration,
                     self.autoscale, self.failures):
            part.validate()
        if self.cluster.pd:
            from llumverify.protocol.variants import get_variant

            get_variant(self.migration.pd_variant)
            if self.autoscale.enabled:
                raise UserError("autoscaling with prefill/decode roles (cluster.pd) is not supported")
        _positive(self, "sample_interval_s")
        _seconds(self, "sample_interval_s", period=True)
        n = self.cluster.num_instances
        for iid, t in self.failures.at:
            if iid >= n and not self.autoscale.enabled:  # an autoscaled cluster may add it later
                raise UserError(f"FailureConfig.at: instance {iid} (failing at {t} s) does not exist: "
                                f"num_instances is {n} (instances 0-{n - 1})")
