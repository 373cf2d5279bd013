"""Every setting and its default, in one place (LLaMA-7B fp16 on one A10 by default).

Frozen dataclasses so a run's configuration is a value: hashable, printable, comparable.
`validate()` raises UserError naming the bad field; the CLI turns that into one line.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from llumverify.errors import UserError, brief


# Simulated time is integer nanoseconds; no time a run is given (an arrival, a crash, a timer) may
# exceed this: 1e9 s is about 31.7 years, beyond any trace, and far below where seconds -> ns overflows.
MAX_TIME_S = 1e9
# Instances of one run (--instances, an autoscaler's --min/--max-instances): far above any serving fleet of
# one model (the paper's is 16), and what one run still takes in about a minute: 100,000 instances simulate
# 20 requests in 64 s at 516 MB (`llumverify simulate --requests 20 --instances 100000`, 2 cores, 2026-12-07);
# 3,000,000 passed the memory estimate and ran for minutes past 10 GB.
MAX_INSTANCES = 100_000


@dataclass(frozen=True)
class Setting:
    """What a config field means and which values it takes: the one place a value is checked.

    Every front door checks values through `problem` (config.validate, experiment files,
    `llumverify simulate`, whose options are generated from these: `flag`, `negate` for an
    option that turns the setting off, `path` for an option naming a file or folder).
    Bounds: gt/ge/le/lt; `seconds`: a time, at most MAX_TIME_S; `period`: a repeating timer,
    0 (off, where allowed) or at least 1 simulated ns. `choices` may be a function (names known
    only once another module is loaded). `check` adds a field-specific test returning a problem.
    """

    help: str
    unit: str = ""
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] | Callable[[], Iterable[str]] = ()
    seconds: bool = False
    period: bool = False
    check: Callable[[object], str | None] | None = None
    flag: str = ""
    negate: bool = False
    path: bool = False
    metavar: str = ""

    def names(self) -> tuple[str, ...]:
        """The allowed values of a choice setting."""
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def problem(self, kind: type, value: object, optional: bool = False) -> str | None:
        """What is wrong with `value` for this setting ("must be ..., got X"), or None.

        kind: the field's type (bool, int, float, str or tuple); optional: None means unset.
        """
        if value is None and optional:
            return None
        if kind is bool or kind is str or kind is tuple:
            if not isinstance(value, kind):
                return f"must be a {kind.__name__}, got {value!r}"
        elif isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)) \
                or (isinstance(value, int) and abs(value) >= 2**64) or not math.isfinite(value) or not self._in_bounds(value):
            below = " below 2^64" if isinstance(value, int) and abs(value) >= 2**64 else ""
            return f"must be {self._describe(kind)}{below}{' (or unset)' if optional else ''}, got {brief(value)}"
        if self.choices and value not in self.names():
            shown = ", ".join(name or '"" (empty)' for name in self.names())
            return f"must be one of {shown}, got {value!r}"
        if (self.seconds or self.period) and value > MAX_TIME_S:  # type: ignore[operator]
            return f"must be at most {MAX_TIME_S:.0e} s, got {value!r}"
        if self.period and 0 < value < 1e-9:  # type: ignore[operator]
            zero = "" if self.gt is not None else "0 or "
            return f"must be {zero}at least 1e-9 s (one simulated ns), got {value!r}"
        return self.check(value) if self.check else None

    def _in_bounds(self, value: float) -> bool:
        return ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
                and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))

    def _describe(self, kind: type) -> str:
        """The allowed numbers in words: "a positive integer", "a finite number >= 0", "in [0, 1)"."""
        if kind is int:
            if self.gt == 0:
                return "a positive integer" + (f" up to {self.le:,}" if self.le is not None else "")
            if self.ge == 0:
                return "a non-negative integer" + (f" up to {self.le:,}" if self.le is not None else "")
            return "an integer"
        low, high = (self.gt, self.ge), (self.lt, self.le)
        if any(v is not None for v in low) and any(v is not None for v in high):
            lo, hi = (self.gt if self.gt is not None else self.ge), (self.lt if self.lt is not None else self.le)
            return f"in {'(' if self.gt is not None else '['}{lo:g}, {hi:g}{')' if self.lt is not None else ']'}"
        bound = next((f" {op} {v:g}" for op, v in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
                      if v is not None), "")
        return f"a finite number{bound}"


def setting(default: object, help: str, **kw: Any) -> Any:
    """A dataclass field with its Setting (help, unit, bounds, option) as metadata."""
    return field(default=default, metadata={"setting": Setting(help, **kw)})


class SettingError(UserError):
    """A setting's value is wrong: which section and field, and the problem ("must be ..., got X"),
    so each front door names it its own way (an option, a key of a file, Class.field)."""

    def __init__(self, owner: str, field: str, problem: str) -> None:
        super().__init__(f"{owner}.{field} {problem}")
        self.owner, self.field, self.problem = owner, field, problem


def settings_of(cls: type) -> dict[str, tuple[Setting, type, bool]]:
    """field -> (Setting, kind, optional) for every field of dataclass `cls` that has one."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        if "setting" in f.metadata:
            kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
            kind = next(k for k in kinds if k is not type(None))
            out[f.name] = (f.metadata["setting"], typing.get_origin(kind) or kind, type(None) in kinds)
    return out


def check_settings(obj: object) -> None:
    """SettingError for the first field of `obj` whose value its Setting rejects."""
    for name, (s, kind, optional) in settings_of(type(obj)).items():
        problem = s.problem(kind, getattr(obj, name), optional)
        if problem:
            raise SettingError(type(obj).__name__, name, problem)


# How a preemption's loss is accounted (EngineConfig.preemption_loss): "recompute" = from the kill until
# the recompute's prefill ends; "ae" = the artifact's benchmark (osdi24ae
# artifact/63_serving_performance/plot/process_log.py:69-95): from the kill until the recompute is
# scheduled, plus the profiled prefill of the request's FINAL output length (padded to 8) less a
# decode step of batch 8 over as many tokens.
PREEMPTION_LOSS = ("recompute", "ae")


PAPER_MAX_NUM_SEQS, PAPER_MAX_NUM_BATCHED_TOKENS = 256, 12_800  # the engine's batch limits unless given


@dataclass(frozen=True)
class EngineConfig:
    """One vLLM instance (LLUMNIX.md §1): 16-token blocks, 851 blocks for 7B on an A10.

    generation: which engine's scheduling the instance follows, by its name in the engine registry
    (sim/engines.py, which checks it): "vllm-0.2" (the paper's engine: prefill-only steps, FCFS
    admission of whole prompts above the watermark) or "vllm-v1" (chunked prefill in a shared
    per-step token budget, prefix caching, sim/engine_v1.py).
    prefix_caching: vllm-v1 only: full prompt blocks are cached by hash and shared.
    spare_block: vllm-0.2 only: vLLM 0.2 wants a free block for each running sequence at its turn,
    in arrival order, before appending its slot (osdi24ae vllm/core/block_manager.py:124-129,
    scheduler.py:274-290), whether or not it crosses a block boundary, so a decode step goes ahead
    only with a block to spare unless the batch's last sequence takes the last one; off, a step
    preempts only when its new blocks do not fit.
    """

    num_blocks: int = setting(851, "KV-cache blocks per instance.", unit="blocks", gt=0, flag="--num-blocks")
    block_size: int = setting(16, "Tokens per KV block.", unit="tokens", gt=0)
    watermark_frac: float = setting(0.01, "Share of the blocks kept free at admission.", ge=0, lt=1)
    max_num_seqs: int | None = setting(None, "Most requests in a batch (default: the engine's; batch_limits).", gt=0,
                                       flag="--max-num-seqs")
    max_num_batched_tokens: int | None = setting(None, "Most tokens in a step (default: the engine's; batch_limits).",
                                                 unit="tokens", gt=0, flag="--max-num-batched-tokens")
    max_model_len: int | None = setting(None, "Longest request, prompt + output tokens (vLLM's --max-model-len; "
                                        "longer ones are rejected at arrival, as vLLM's API server refuses them; "
                                        "default: no limit, the model's context is not read).", unit="tokens", gt=0,
                                        flag="--max-model-len")
    generation: str = setting("vllm-0.2", "Engine: vllm-0.2 (the paper's) or vllm-v1 (chunked prefill, prefix "
                              "caching; the default when --gpu, --model, --profile DIR or --step-cost is given), "
                              "or another registered in sim/engines.py.", flag="--engine")
    prefix_caching: bool = setting(True, "vllm-v1: turn prefix caching off.", flag="--no-prefix-caching", negate=True)
    async_scheduling: bool = setting(True, "vllm-v1: turn async scheduling off (vLLM >= 0.14 plans each step while "
                                     "the one before runs, so a request reaching a busy engine waits one step "
                                     "more).", flag="--no-async-scheduling", negate=True)
    spare_block: bool = setting(False, "vllm-0.2: a decode step needs a free block for every running sequence at "
                                "its turn (vLLM 0.2's can_append_slot).")
    preemption_loss: str = setting("recompute", "What a preemption's loss counts: until the recompute's prefill "
                                   "ends (recompute), or the artifact's formula (ae).", choices=PREEMPTION_LOSS,
                                   flag="--preemption-loss")

    def batch_limits(self) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens): as given, else the paper's 256 and 12,800
        (LLUMNIX.md §1; the artifact's serving runs). A vllm-v1 engine on a catalog GPU gets
        `vllm serve`'s own defaults for that GPU instead (sim/engine_profile.py resolve)."""
        return (PAPER_MAX_NUM_SEQS if self.max_num_seqs is None else self.max_num_seqs,
                PAPER_MAX_NUM_BATCHED_TOKENS if self.max_num_batched_tokens is None else self.max_num_batched_tokens)

    @property
    def watermark_blocks(self) -> int:
        """vLLM's watermark: int(0.01 * blocks) blocks kept free at admission."""
        return int(self.watermark_frac * self.num_blocks)

    def validate(self) -> None:
        check_settings(self)
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if seqs is not None and tokens is not None and tokens < seqs:  # vLLM's SchedulerConfig refuses it too
            raise UserError(f"max_num_batched_tokens ({tokens}) must be >= max_num_seqs ({seqs}): every "
                            "sequence in a batch takes at least one token of the step (vLLM refuses this too)")


@dataclass(frozen=True)
class SLOConfig:
    """Targets for the SLO-violation rate: a request violates if either target of its class is missed.

    high_ttft_s / high_per_token_s: the high-priority class's own targets (differentiated SLOs);
    None means the normal targets, so a single-SLO run is unchanged.
    """

    ttft_s: float = setting(10.0, "TTFT target, s.", unit="s", gt=0, seconds=True, flag="--slo-ttft")
    per_token_s: float = setting(0.2, "Per-token decode target, s.", unit="s", gt=0, seconds=True, flag="--slo-tpot")
    high_ttft_s: float | None = setting(None, "The high-priority class's own TTFT target, s (default: --slo-ttft).",
                                        unit="s", gt=0, seconds=True, flag="--slo-ttft-high")
    high_per_token_s: float | None = setting(None, "The high-priority class's own per-token target, s "
                                             "(default: --slo-tpot).", unit="s", gt=0, seconds=True,
                                             flag="--slo-tpot-high")

    def targets(self, high: bool) -> tuple[float, float]:
        """(TTFT, per-token) targets of the high-priority class if `high`, else of the normal class."""
        if not high:
            return self.ttft_s, self.per_token_s
        return (self.ttft_s if self.high_ttft_s is None else self.high_ttft_s,
                self.per_token_s if self.high_per_token_s is None else self.high_per_token_s)

    def validate(self) -> None:
        check_settings(self)


def describe(obj: object) -> dict[str, object]:
    """A config as a plain dict (for summary.json and reports)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]


STEP_TERM_MAX_NS = 60_000_000_000  # a minute: real steps, RPCs and front ends take ms to seconds
PER_UNIT_MAX = 1_000_000_000  # a second a token or request (a millisecond a squared token, in ps)


def _coefficient(default: int, help: str, unit: str = "ns", le: int = STEP_TERM_MAX_NS) -> Any:
    """Cost coefficients are integers so simulated time stays exact; bounded, because the samplers
    run once a simulated second, so a step of days (a value in the wrong unit) runs for hours."""
    return setting(default, help, unit=unit, ge=0, le=le)


@dataclass(frozen=True)
class CostConfig:
    """Step-time coefficients, integers in ns (ps for the small quadratic prefill term).

    prefill(t_i) = prefill_ns_per_token·Σt_i + prefill_ps_per_token_sq·Σt_i²/1000 + prefill_ns
    decode(B, C) = decode_ns_per_seq·B + decode_ns_per_token·C + decode_ns   (C = Σ KV tokens)
    Every step adds gap_ns (the AE simulator's 4 ms); a decode step also adds cpu_ns_per_seq·B, the
    engine's own CPU time per sequence outside the GPU step (vLLM 0.2 runs its scheduler, sampler
    post-processing, incremental detokenisation and output per sequence between two steps; 0 by
    default, fitted in the testbed profile, sim/catalog/testbed.toml), and cpu_ns_per_output_token·O,
    O = Σ output tokens the running sequences hold (vLLM 0.2's detokenisation and RequestOutput
    re-read every output token of every sequence each step; 0 by default). api_server_ns +
    tokenize_ns_per_token·prompt delays a request before any engine sees it (the serving front
    end, sim/frontend.py; 0 by default: latencies as the engine measures them). Defaults fit LLaMA-7B on an A10
    (LLUMNIX.md §1; the fit is tabulated in docs/simulator.md). Migration: a stage moving n
    blocks takes n·block_size·kv_bytes_per_token·8/bandwidth_bps + rpc_ns, and each control RPC
    (pre-allocate, commit, free) takes rpc_ns round trip. 20.336 Gb/s (3.3 ms per 8 MiB block)
    and 3.33 ms per RPC reproduce Fig. 10: a blocking copy of 256 / 8k tokens ≈ 63 / 1,700 ms,
    a live-migration downtime ≈ 13 / 20-26 ms (docs/simulator.md).
    """

    prefill_ns_per_token: int = _coefficient(198_510, "Prefill time per prompt token.", le=PER_UNIT_MAX)
    prefill_ps_per_token_sq: int = _coefficient(5_394, "Prefill time per squared prompt token.", unit="ps", le=PER_UNIT_MAX)
    prefill_ns: int = _coefficient(6_827_957, "Prefill time per step.")
    decode_ns_per_seq: int = _coefficient(250_000, "Decode time per request in the batch.", le=PER_UNIT_MAX)
    decode_ns_per_token: int = _coefficient(2_600, "Decode time per KV token in the batch.", le=PER_UNIT_MAX)
    decode_ns: int = _coefficient(20_000_000, "Decode time per step.")
    cpu_ns_per_seq: int = _coefficient(0, "Engine CPU time per request in a decode step, outside the GPU step.", le=PER_UNIT_MAX)
    cpu_ns_per_output_token: int = _coefficient(
        0, "Engine CPU time per output token a running request holds, in a decode step, outside the GPU step.", le=PER_UNIT_MAX)
    gap_ns: int = _coefficient(4_000_000, "Scheduling gap added to every step.")
    api_server_ns: int = _coefficient(0, "API-server time per request before the engine sees it (sim/frontend.py).")
    tokenize_ns_per_token: int = _coefficient(0, "Tokenisation time per prompt token before the engine sees it.", le=PER_UNIT_MAX)
    kv_bytes_per_token: int = setting(524_288, "KV-cache bytes per token.", unit="bytes", gt=0)
    bandwidth_bps: int = setting(20_336_000_000, "Migration copy bandwidth.", unit="bit/s", gt=0)
    rpc_ns: int = _coefficient(3_333_333, "Round trip of a control RPC.")

    def validate(self) -> None:
        check_settings(self)
        if self.decode_ns + self.gap_ns == 0 or self.prefill_ns + self.gap_ns == 0:
            raise UserError("CostConfig: decode_ns + gap_ns and prefill_ns + gap_ns must be > 0 "
                            "(a step must take time)")


PD_FALLBACKS = ("local", "retry", "wait")  # what a request does when no decode instance takes it


def _pd_split(value: object) -> str | None:
    parts = str(value).split(":")
    if value and (len(parts) != 2 or not all(x.isdigit() and int(x) > 0 for x in parts)):
        return f"must be P:D with P, D >= 1 (e.g. 2:6), got {value!r}"
    return None


@dataclass(frozen=True)
class ClusterConfig:
    """The serving cluster: how many instances, their roles and how fresh their load reports are.

    pd = "P:D" disaggregates prefill and decode: requests are dispatched to the P prefill
    instances and, after their first token, handed off to a decode instance (the freest) through
    the migration protocol's `pd` variant (MigrationConfig.pd_variant); Llumnix's migrations then
    balance the decode instances only. pd_fallback: when no decode instance takes a request, it
    decodes where it is ("local"), is offered again every migration round period while decoding
    where it is ("retry"), or waits ("wait", Llumnix HEAD): HEAD's scheduler does not schedule a
    request once it has its expected_steps (1 on a prefill instance,
    backends/vllm/scheduler.py:262-277; found by the audit, docs/audit/head.md), so it stays in
    the prefill instance's running queue holding its KV, generating nothing, and is offered again
    every round period until a hand-off commits. A waiting request can be preempted like any
    running one (vLLM V1 preempts the last admitted). It waits only while it could leave: with
    no decode instance left, or sharing cached blocks (the simulator moves private KV only,
    docs/engines.md), it decodes meanwhile as with "retry".

    Load reports: by default the global scheduler reads every instance's exact load at each
    decision. step_reports is the AE's timing: each engine step's report is computed when the step
    is scheduled (vllm/core/scheduler.py:253, 328) and reaches the scheduler with the step's outputs
    (llm_engine.py:459-462, llm_engine_manager.py:273-275), so it is one to two steps old and a
    request dispatched to an instance is invisible until the end of the step that admitted it; an
    idle instance keeps its last report. report_interval_s > 0 is HEAD's timing instead: the
    scheduler polls every that many seconds (HEAD: 0.05).
    """

    num_instances: int = setting(16, "Number of serving instances.", gt=0, le=MAX_INSTANCES,
                                 flag="--instances")
    report_interval_s: float = setting(0.0, "Load-report period, s (0: exact loads at every decision).", unit="s",
                                       ge=0, period=True, flag="--report-interval")
    step_reports: bool = setting(False, "Loads as the AE reports them: computed when a step is scheduled, "
                                 "seen when it ends.", flag="--step-reports")
    pd: str = setting("", "Disaggregate: P prefill and D decode instances (P + D = --instances); hand-offs run the "
                      "pd protocol.", check=_pd_split, flag="--pd", metavar="P:D")
    lockstep: int = setting(1, "Consecutive instances form groups of this many that step in lockstep: the "
                            "data-parallel ranks of one MoE engine (vLLM synchronises their forward passes; "
                            "sim/lockstep.py). 1: every instance steps on its own.", gt=0)
    pd_fallback: str = setting("local", "P/D: a request no decode instance takes decodes where it is (local), is "
                               "offered again each round while decoding (retry), or waits there holding its KV, "
                               "offered again each round (wait: Llumnix HEAD).", choices=PD_FALLBACKS,
                               flag="--pd-fallback")
    users: int = setting(0, "Closed-loop clients: request k (in arrival order) is user k mod N's and is sent when "
                         "due and once that user's previous request has ended (inference-perf's multi-turn chat); "
                         "latencies count from the send. 0: open loop.", ge=0, flag="--users")

    def roles(self) -> tuple[str, ...]:
        """Each instance's role: all "neutral", or with pd = "P:D" the first P "prefill", the rest "decode"."""
        if not self.pd:
            return ("neutral",) * self.num_instances
        p, d = (int(x) for x in self.pd.split(":"))
        return ("prefill",) * p + ("decode",) * d

    def validate(self) -> None:
        check_settings(self)
        if self.step_reports and self.report_interval_s > 0:
            raise UserError("cluster.step_reports (--step-reports) and cluster.report_interval_s > 0 "
                            "(--report-interval) are two different load-report timings; choose one")
        if self.pd and sum(int(x) for x in self.pd.split(":")) != self.num_instances:
            raise UserError(f"ClusterConfig.pd {self.pd} needs {sum(int(x) for x in self.pd.split(':'))} instances, "
                            f"num_instances is {self.num_instances}")
        if self.num_instances % self.lockstep:
            raise UserError(f"ClusterConfig.lockstep {self.lockstep} must divide num_instances {self.num_instances}")
        if self.lockstep > 1 and self.pd:
            raise UserError("ClusterConfig.lockstep groups the ranks of one engine; prefill/decode roles (pd) are not "
                            "modelled for them")


SELECTIONS = ("lcfs", "sr", "lr")  # which running request a migration source moves (scheduler/selection.py)
ON_FAILURE = ("fail", "redispatch")
MAX_THRESHOLD = 1e6  # blocks/request: no instance's freeness comes near (16M tokens of free KV a running request)


def _threshold(value: object) -> str | None:
    """A migration threshold T within ±MAX_THRESHOLD: freeness F_m may be negative (waiting requests' demand), so T
    may be too, but past a million blocks a request every instance is a source and none a destination (or the
    reverse): no migration, whatever the load (a value in another unit)."""
    return None if abs(value) <= MAX_THRESHOLD else (  # type: ignore[arg-type]
        f"must be within ±{MAX_THRESHOLD:,.0f} blocks/request (no instance's freeness comes near), got {value!r}")


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

    migrate_threshold: float = setting(3.0, "llumnix: sources have F_m below it, destinations above (blocks per "
                                       "request).", unit="blocks/request", check=_threshold, flag="--migrate-threshold")
    migrate_select: str = setting("lcfs", "llumnix: which running request a source migrates.", choices=SELECTIONS,
                                  flag="--migrate-select")
    period_steps: int = setting(4, "A migration round about every that many steps per instance.", gt=0)
    round_period_s: float = setting(0.0, "Migration round period, s (0: from period_steps).", unit="s", ge=0,
                                    period=True)
    head_only_freeness: bool = setting(False, "F_m counts only the head-of-line request (v0.1.0/HEAD).",
                                       flag="--head-only-freeness")
    priorities: bool = setting(True, "Ignore priority classes (no penalty, headroom or queue-first).",
                               flag="--no-priorities", negate=True)
    # at most 10: exp(σ·z) overflows a float past σ of a few hundred, and σ = 10 already misjudges by e^10
    prediction_error: float = setting(0.0, "predicted: σ of the log-normal output-length prediction error "
                                      "(0: exact).", ge=0, le=10, flag="--prediction-error")
    prediction_seed: int = setting(0, "Seed of the output-length predictor.", ge=0)
    auto_threshold: bool = setting(False, "Tune the migration threshold online.")
    threshold_min: float = setting(1.0, "auto_threshold: lowest T.", unit="blocks/request", gt=0)
    threshold_max: float = setting(60.0, "auto_threshold: highest T.", unit="blocks/request", check=_threshold)
    threshold_increase: float = setting(1.25, "auto_threshold: factor that raises T.", gt=1)
    threshold_decrease: float = setting(0.8, "auto_threshold: factor that lowers T.", gt=0, lt=1)

    def validate(self) -> None:
        check_settings(self)
        if not self.threshold_min <= self.threshold_max:
            raise UserError(f"SchedulerConfig: threshold_min {self.threshold_min!r} > threshold_max {self.threshold_max!r}")
        if self.auto_threshold and not self.threshold_min <= self.migrate_threshold <= self.threshold_max:
            raise UserError(f"SchedulerConfig.migrate_threshold {self.migrate_threshold!r} (auto_threshold's start) "
                            f"must be in [threshold_min, threshold_max] = [{self.threshold_min!r}, {self.threshold_max!r}]")


def _variants() -> tuple[str, ...]:
    """The protocol variants (imported when first asked: the protocol package imports this module)."""
    from llumverify.protocol.variants import VARIANTS

    return tuple(VARIANTS)


@dataclass(frozen=True)
class MigrationConfig:
    """How live migrations run: which protocol variant, its timers, and its cost on the source.

    last_stage_blocks: the final stage begins when at most this many blocks remain (HEAD: 16)
    for variants that leave it open. slowdown_ppm: decode steps on the source run this much
    slower while it migrates (paper: 1-3 %). shared_copies: the copies in flight share one link of
    `cost.bandwidth_bps` (Fig. 10's, measured for one copy alone), each taking its share as of when
    it starts (not re-timed when others start or end); not with P/D hand-offs, whose number has no bound.
    """

    variant: str = setting("safe", "Protocol variant every migration executes.", choices=_variants,
                           flag="--migration-variant")
    pd_variant: str = setting("pd", "Protocol variant of P/D hand-offs.", choices=_variants)
    last_stage_blocks: int = setting(16, "The last stage begins when at most this many blocks remain.",
                                     unit="blocks", ge=0)
    slowdown_ppm: int = setting(20_000, "Source decode slowdown while it migrates.", unit="ppm", ge=0)
    shared_copies: bool = setting(False, "Migration copies share one link: a stage's copy takes its time at the "
                                  "copy bandwidth times the migrations in flight when it starts.")
    rpc_timeout_s: float = setting(10.0, "RPC timeout, s.", unit="s", gt=0, seconds=True)
    lease_s: float = setting(10.0, "Migration lease, s.", unit="s", gt=0, seconds=True)
    lease_check_s: float = setting(5.0, "Lease check period, s.", unit="s", gt=0, period=True)

    def validate(self) -> None:
        check_settings(self)


@dataclass(frozen=True)
class AutoscaleConfig:
    """Load-based autoscaling as the AE runs it (LLUMNIX.md §4): every interval_s, add instances
    while the aggregate F_d < scale_up_below, drain the newest when F_m without it > scale_down_above."""

    enabled: bool = setting(False, "Scale instances on load (every 10 s; x = 10, y = 60; 5 s start-up).",
                            flag="--autoscale")
    interval_s: float = setting(10.0, "Autoscaling period, s.", unit="s", gt=0, period=True)
    scale_up_below: float = setting(10.0, "Add instances while the aggregate F_d is below it.")
    scale_down_above: float = setting(60.0, "Drain the newest instance when F_m without it is above it.")
    startup_s: float = setting(5.0, "Start-up time of a new instance, s.", unit="s", ge=0, seconds=True)
    min_instances: int = setting(1, "Fewest instances.", gt=0, le=MAX_INSTANCES, flag="--min-instances")
    max_instances: int = setting(16, "Most instances.", gt=0, le=MAX_INSTANCES, flag="--max-instances")

    def validate(self) -> None:
        check_settings(self)
        if self.min_instances > self.max_instances:
            raise UserError(f"AutoscaleConfig: min_instances {self.min_instances} > max_instances {self.max_instances}")


def _failure_times(value: object) -> str | None:
    """Scheduled crashes: (instance >= 0, 0 <= time <= MAX_TIME_S) pairs."""
    for item in value:  # type: ignore[attr-defined]
        ok = (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int) and not isinstance(item[0], bool)
              and isinstance(item[1], (int, float)) and not isinstance(item[1], bool))
        if not ok or item[0] < 0 or not 0 <= item[1] <= MAX_TIME_S:
            shown = f"{item[0]}@{item[1]}" if isinstance(item, tuple) and len(item) == 2 else repr(item)
            return (f"must be INSTANCE@TIME with INSTANCE >= 0 and 0 <= TIME <= {MAX_TIME_S:.0e} s, "
                    f"got {shown!r}")
    return None


@dataclass(frozen=True)
class FailureConfig:
    """Instance failures: scheduled (instance, time_s) crashes and random ones per instance-hour.

    on_failure: the requests a crash kills end as failed:<reason> or are re-dispatched (recompute).
    """

    at: tuple[tuple[int, float], ...] = setting((), "Crash an instance at a time, s (repeatable).",
                                                check=_failure_times, flag="--fail", metavar="INSTANCE@TIME")
    rate_per_hour: float = setting(0.0, "Random crashes per instance-hour (seeded by --seed).", unit="1/h", ge=0,
                                   flag="--fail-rate")
    on_failure: str = setting("fail", "A crashed instance's requests end failed, or are re-dispatched and "
                              "recomputed.", choices=ON_FAILURE, flag="--on-failure")
    seed: int = setting(0, "Seed of the random crashes.", ge=0)

    def validate(self) -> None:
        check_settings(self)


STEP_COST_SOURCES = ("gpu", "model", "profile", "cost_file")  # where step costs come from: only vllm-v1 takes them
# HardwareConfig settings that describe how a step-cost source is served: without a source they would do nothing
SOURCE_SETTINGS = ("tp", "quantization", "kv_cache_dtype", "dp", "expert_parallel", "gpu_memory_utilization",
                   "cudagraph_mode", "attention_backend", "sampling")


@dataclass(frozen=True)
class HardwareConfig:
    """Where a vllm-v1 engine's step costs and KV capacity come from, at most one source:
    profile: a per-layer profile folder (sim/profile.py; model names the layer count if its
    meta.yaml does not); cost_file: a step-cost TOML (`llumverify calibrate` writes them); gpu and
    model: catalog entries, step costs from first principles (sim/roofline.py) and, with
    kv_from_catalog, the KV blocks from memory, weights and gpu_memory_utilization. All empty:
    the paper's published A10/LLaMA-7B fit (LLUMNIX.md §1) in the V1 step form.
    """

    gpu: str = setting("", "vllm-v1: GPU from the catalog or a TOML file of a catalog entry's keys (step costs from "
                            "first principles, with --model).",
                       flag="--gpu")
    model: str = setting("", "vllm-v1: model from the catalog or the path of its HF config.json (with --gpu; the "
                              "layer count for --profile).",
                         flag="--model")
    tp: int = setting(1, "vllm-v1: tensor-parallel GPUs per instance.", gt=0, flag="--tp")
    profile: str = setting("", "vllm-v1: step costs from a per-layer profile folder. On the command line a "
                           "profile's name instead (published, testbed: sim/catalog/testbed.toml) selects it as "
                           "an experiment file's `profile = NAME` does.", flag="--profile", path=True)
    cost_file: str = setting("", "vllm-v1: step costs from a TOML written by `llumverify calibrate`.",
                             flag="--step-cost", path=True)
    quantization: str = setting("", "vllm-v1 first principles: linear-layer weights in fp8 (vLLM --quantization fp8), "
                                "int4 (W4A16: AWQ, GPTQ) or nvfp4; a model name ending in -FP8, -AWQ, -GPTQ, -w4a16 "
                                "or -NVFP4 implies it; empty: the checkpoint's format (sim/quantization.py).",
                                choices=("", "fp8", "int4", "nvfp4"), flag="--quantization")
    kv_cache_dtype: str = setting("auto", "vllm-v1 first principles: KV cache in fp8 (vLLM --kv-cache-dtype), in 16 "
                                  "bits (bf16), or as the checkpoint says (auto: its KV scales' fp8, else its dtype).",
                                  choices=("auto", "fp8", "bf16"), flag="--kv-cache-dtype")
    dp: int = setting(1, "vllm-v1, MoE models: every dp consecutive instances are the data-parallel ranks of one "
                      "engine, sharing experts and tokens and stepping in lockstep (vLLM --data-parallel-size; "
                      "sim/roofline.py MoEGroup, sim/lockstep.py).", gt=0, flag="--dp")
    expert_parallel: bool = setting(False, "vllm-v1, MoE models with --dp: whole experts per GPU over the dp x tp "
                                    "GPUs (vLLM --enable-expert-parallel), not every expert sliced.",
                                    flag="--expert-parallel")
    kv_from_catalog: bool = setting(True, "KV blocks from the catalog's memory and weights.")
    gpu_memory_utilization: float = setting(0.9, "vllm-v1: share of GPU memory vLLM may use (sizes the KV cache "
                                            "from the catalogs).", gt=0, le=1, flag="--gpu-memory-utilization")
    cudagraph_mode: str = setting("full_and_piecewise", "vllm-v1: which steps replay a CUDA graph (vLLM "
                                  "compilation_config.cudagraph_mode): every step (full_and_piecewise, vLLM's default), "
                                  "or decode-only steps (full_decode_only: a step with a prefill chunk lasts at least "
                                  "the CPU's launches, a time per layer: sim/graphless.py).",
                                  choices=("full_and_piecewise", "full_decode_only"), flag="--cudagraph-mode")
    attention_backend: str = setting("auto", "vllm-v1 first principles: the attention kernels that read an fp8 KV "
                                     "cache: ones that read fp8 (auto: FlashAttention 3, FlashInfer's TRT-LLM kernels; "
                                     "its bytes priced) or FlashInfer's FA2-template ones (flashinfer-fa2: vLLM's "
                                     "FLASHINFER backend with use_trtllm_attention off), which dequantise it as they "
                                     "read: KV reads and query-key pair compute (q·k and p·v) at the published "
                                     "slowdown (sim/kv_dequant.py; NVIDIA GPUs). A 16-bit cache is priced alike by "
                                     "both.",
                                     choices=("auto", "flashinfer-fa2"), flag="--attention-backend")
    sampling: str = setting("greedy", "vllm-v1: how requests sample: greedy (no sort: temperature 0's argmax, the "
                            "profiled sampler; a temperature alone adds a softmax and a random draw, not priced) or top-p (top_p < 1, with or without top_k, as requests "
                            "that set none take from a generation_config.json such as Llama-3.1-Instruct's: vLLM "
                            "0.11.1-0.16 sort every sequence's logits over the vocabulary each step on CUDA; "
                            "sim/sampling.py). Adds to every step-cost source: a step-cost file `calibrate --sampling top-p` "
                            "wrote holds no sort; one calibrated as greedy on a top-p run holds it in fixed_ns.", choices=("greedy", "top-p"), flag="--sampling")

    @property
    def given(self) -> bool:
        return any(getattr(self, name) for name in STEP_COST_SOURCES)

    def validate(self) -> None:
        if self.profile and self.cost_file:
            raise UserError("HardwareConfig: profile and cost_file are two sources of step costs: give one")
        if (self.gpu or self.model) and not (self.gpu and self.model) and not self.profile and not self.cost_file:
            missing, other = ("model", "gpu") if self.gpu else ("gpu", "model")
            raise SettingError("HardwareConfig", missing, f"must be given with {other}: first principles needs both "
                               "(or a profile or step-cost file)")
        unused = [name for name in SOURCE_SETTINGS if getattr(self, name) != getattr(HardwareConfig, name)]
        if unused and not self.given:
            raise SettingError("HardwareConfig", unused[0], "applies to step costs, and none are given: give gpu and "
                               "model, a profile or a step-cost file")
        check_settings(self)


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
    fast: bool = setting(True, "Simulate every decode step (slow reference path).", flag="--step-by-step",
                         negate=True)
    sample_interval_s: float = setting(1.0, "Sampling period of fragmentation and the time series, s.", unit="s",
                                       gt=0, period=True)
    hardware: HardwareConfig = HardwareConfig()
    step: object | None = None  # sim.stepcost.StepCost of a vllm-v1 engine, resolved from `hardware`

    def validate(self) -> None:
        if self.step is not None:
            self.step.validate()  # type: ignore[attr-defined]
        self.hardware.validate()
        for part in (self.engine, self.cost, self.cluster, self.slo, self.scheduler, self.migration,
                     self.autoscale, self.failures):
            part.validate()
        check_settings(self)
        if self.cluster.pd and self.autoscale.enabled:
            raise UserError("autoscaling with prefill/decode roles (cluster.pd) is not supported")
        low, high = self.autoscale.min_instances, self.autoscale.max_instances
        if self.autoscale.enabled and not low <= self.cluster.num_instances <= high:
            raise UserError(f"cluster.num_instances {self.cluster.num_instances} (--instances) must lie within the "
                            f"autoscaler's bounds [{low}, {high}] (--min-instances, --max-instances)")
        if self.hardware.dp > 1 and self.cluster.num_instances % self.hardware.dp:
            raise UserError(f"hardware.dp {self.hardware.dp} (--dp) must divide the {self.cluster.num_instances} "
                            "instances: each engine has dp ranks")
        if self.hardware.dp > 1 and (self.cluster.pd or self.autoscale.enabled or self.failures.at
                                     or self.failures.rate_per_hour):  # before resolve makes them lockstep groups
            given = ("cluster.pd (--pd)" if self.cluster.pd else "autoscale (--autoscale)" if self.autoscale.enabled
                     else "failures (--fail, --fail-rate)")
            raise UserError(f"hardware.dp {self.hardware.dp} (--dp) with {given}: an engine's data-parallel ranks step "
                            "together, and prefill/decode roles, autoscaling and instance failures are not modelled "
                            "for them")
        if self.cluster.lockstep > 1 and (self.autoscale.enabled or self.failures.at or self.failures.rate_per_hour):
            raise UserError("cluster.lockstep groups are fixed: autoscaling and instance failures are not modelled "
                            "for them")
        if self.cluster.users and (self.cost.api_server_ns or self.cost.tokenize_ns_per_token):
            raise UserError("cluster.users (--users) with a front end (cost.api_server_ns, cost.tokenize_ns_per_token) "
                            "is not modelled: closed-loop users send from the client, the front end delays each send")
        if self.cluster.pd and self.migration.shared_copies:
            raise UserError("migration.shared_copies bounds a copy's share by the pairs of instances; "
                            "P/D hand-offs (cluster.pd) have no such bound")
        n = self.cluster.num_instances
        for iid, t in self.failures.at:
            if iid >= n and not self.autoscale.enabled:  # an autoscaled cluster may add it later
                raise SettingError("FailureConfig", "at", f"must name existing instances: instance {iid} (failing at {t} s) "
                                   f"is not one of 0-{n - 1} (num_instances is {n})")
