"""`llumverify simulate`: run the cluster simulator under each policy and compare them.

With no arguments it runs a small built-in experiment in well under 10 seconds: 16 instances,
2,000 ShareGPT-like requests at 9.5 req/s. That is near saturation for the calibrated engine
(least-loaded starts to queue and preempt; at the paper's 7.5 req/s it barely queues, see
docs/simulator.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import click
from click.core import ParameterSource
from tabulate import tabulate

from llumverify import engine_profile
from llumverify import metrics_registry as registry
from llumverify.config import (GENERATIONS, MAX_TIME_S, ON_FAILURE, PD_FALLBACKS, SELECTIONS, AutoscaleConfig, ClusterConfig, CostConfig,
                               EngineConfig, FailureConfig, HardwareConfig, MigrationConfig, SchedulerConfig, SimConfig, SLOConfig, describe)
from llumverify.protocol.variants import VARIANTS
from llumverify.commands.sweep import run_and_report
from llumverify.errors import UserError
from llumverify.paths import fresh_dir, input_file
from llumverify.scheduler.dispatch import DEFAULT_POLICIES, POLICIES
from llumverify.sim.audit import AuditError
from llumverify.sim.costmodel import load_cost_config
from llumverify.sim.traces import read_trace
from llumverify.sim.requests import RequestSpec
from llumverify.sim.run import RunResult
from llumverify.sim.run import simulate as run_policy
from llumverify.sim.run import write_requests_csv, write_summary_json
from llumverify.sim.workload import LENGTHS, MAX_REQUESTS, generate

DEFAULT_RATE = 9.5
DEFAULT_REQUESTS = 2000

# The printed table's metrics (headers and display units from llumverify/metrics_registry.py).
TABLE_METRICS = tuple(map(registry.get, (
    "finished", "rejected", "ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s", "e2e_mean_s", "e2e_p99_s",
    "queue_p99_s", "preemptions", "migrations", "failed", "slo_violation_rate", "fragmentation", "kv_util_mean")))


class AuditFailure(click.ClickException):
    """A simulator audit failed: cli.main prints the one-line message and exits 3."""

    exit_code = 3


def _positive(option: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{option} must be a positive number, got {value!r}")


def _failures(fail: tuple[str, ...], fail_rate: float, on_failure: str, seed: int,
              instances: int, autoscale: bool) -> FailureConfig:
    """--fail INSTANCE@TIME (repeatable) and --fail-rate per instance-hour, seeded by --seed.

    Without --autoscale an INSTANCE beyond --instances is an error: the crash would never happen.
    """
    at = []
    for item in fail:
        iid, sep, t = item.partition("@")
        try:
            at.append((int(iid), float(t)))
        except ValueError:
            raise UserError(f"--fail: expected INSTANCE@TIME (e.g. 3@120.5), got {item!r}") from None
        if not sep or at[-1][0] < 0 or not (math.isfinite(at[-1][1]) and 0 <= at[-1][1] <= MAX_TIME_S):
            raise UserError(f"--fail: expected INSTANCE@TIME with INSTANCE >= 0 and 0 <= TIME <= {MAX_TIME_S:.0e}, "
                            f"got {item!r}")
        if at[-1][0] >= instances and not autoscale:
            raise UserError(f"--fail {item}: instance {at[-1][0]} does not exist "
                            f"(--instances {instances}: instances 0-{instances - 1})")
    if not (math.isfinite(fail_rate) and fail_rate >= 0):
        raise UserError(f"--fail-rate must be >= 0, got {fail_rate!r}")
    return FailureConfig(at=tuple(at), rate_per_hour=fail_rate, on_failure=on_failure, seed=seed)


def _workload(trace: Path | None, requests: int | None, rate: float | None, arrival: str, cv: float,
              lengths: str | None, rate_scale: float, seed: int, high_priority_frac: float) -> list[RequestSpec]:
    if trace is not None:
        if lengths is not None:
            raise UserError("--lengths cannot be combined with --trace (the trace gives the lengths)")
        if high_priority_frac:
            raise UserError("--high-priority-frac applies only to generated workloads")
        return read_trace(trace, limit=requests, rate_scale=rate_scale, seed=seed, rate=rate,
                          arrival=arrival, cv=cv)
    if rate_scale != 1.0:
        raise UserError("--rate-scale applies only to --trace (use --rate for generated workloads)")
    n = DEFAULT_REQUESTS if requests is None else requests
    return generate(n, DEFAULT_RATE if rate is None else rate, lengths=lengths or "sharegpt",
                    arrival=arrival, cv=cv, seed=seed, high_priority_frac=high_priority_frac)


def _table(results: list[RunResult]) -> str:
    """One row per policy: the registered metrics in display units (counts as they are), then wall time."""
    rows = []
    for res in results:
        row: list[object] = [res.policy]
        for m in TABLE_METRICS:
            value = res.summary[m.name]
            row.append(value if m.unit == "count" or value is None else float(value) * m.scale)  # type: ignore[arg-type]
        rows.append([*row, res.wall_s])
    return tabulate(rows, headers=["policy", *(m.header for m in TABLE_METRICS), "wall s"], floatfmt=".3g")


def _run_experiment_file(ctx: click.Context, experiment: Path, out: Path | None, force: bool) -> None:
    """The experiment file fixes workload, cluster and policies: only --out and --force may accompany it."""
    for param in ctx.command.params:
        if param.name not in ("experiment", "out", "force") and \
                ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
            raise UserError(f"{experiment}: the experiment file sets the run; drop {param.opts[-1]} "
                            "(only --out and --force apply)")
    run_and_report(experiment, out, force=force)


def _check_options(instances: int, requests: int | None, seed: int, migrate_threshold: float) -> None:
    """Sizes and ranges, before anything is read or run: each error names its option."""
    if instances <= 0:
        raise UserError(f"--instances must be a positive integer, got {instances}")
    if requests is not None and not 0 < requests <= MAX_REQUESTS:
        raise UserError(f"--requests must be a positive integer up to {MAX_REQUESTS:,}, got {requests}")
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer, got {seed}")
    if not math.isfinite(migrate_threshold):
        raise UserError(f"--migrate-threshold must be a finite number, got {migrate_threshold!r}")


@click.command()
@click.argument("experiment", required=False, type=click.Path(path_type=Path))
@click.option("--policy", "policies", multiple=True, type=click.Choice(list(POLICIES)),
              help=f"Policy to simulate (repeatable; default: {', '.join(DEFAULT_POLICIES)}).")
@click.option("--instances", type=int, default=ClusterConfig().num_instances, show_default=True,
              help="Number of serving instances.")
@click.option("--rate", type=float, default=None,
              help=f"Arrival rate, req/s (generated default {DEFAULT_RATE}; with --trace, replaces its arrivals).")
@click.option("--arrival", type=click.Choice(["poisson", "gamma"]), default="poisson", show_default=True)
@click.option("--cv", type=float, default=1.0, show_default=True, help="Coefficient of variation (gamma).")
@click.option("--lengths", type=click.Choice(LENGTHS), default=None,
              help="Length distribution (default sharegpt).")
@click.option("--trace", type=click.Path(path_type=Path), default=None, help="Replay a trace file instead.")
@click.option("--requests", type=int, default=None,
              help=f"Requests to generate (default {DEFAULT_REQUESTS}) or the first N of the trace.")
@click.option("--rate-scale", type=float, default=1.0, show_default=True, help="Speed a trace up (> 1) or down.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write DIR/requests.csv and DIR/summary.json (DIR new or empty unless --force).")
@click.option("--force", is_flag=True, help="Write into a non-empty --out folder, overwriting its result files.")
@click.option("--cost-config", type=click.Path(path_type=Path), default=None,
              help="TOML file overriding cost-model coefficients (names as in CostConfig).")
@click.option("--slo-ttft", type=float, default=SLOConfig().ttft_s, show_default=True, help="TTFT target, s.")
@click.option("--slo-tpot", type=float, default=SLOConfig().per_token_s, show_default=True,
              help="Per-token decode target, s.")
@click.option("--slo-ttft-high", type=float, default=None,
              help="The high-priority class's own TTFT target, s (default: --slo-ttft).")
@click.option("--slo-tpot-high", type=float, default=None,
              help="The high-priority class's own per-token target, s (default: --slo-tpot).")
@click.option("--report-interval", type=float, default=0.0, show_default=True,
              help="Load-report period, s (0: refreshed every engine step).")
@click.option("--step-by-step", is_flag=True, help="Simulate every decode step (slow reference path).")
@click.option("--migrate-threshold", type=float, default=SchedulerConfig().migrate_threshold, show_default=True,
              help="llumnix: sources have F_m below it, destinations above (blocks per request).")
@click.option("--migrate-select", type=click.Choice(SELECTIONS), default="lcfs", show_default=True,
              help="llumnix: which running request a source migrates.")
@click.option("--migration-variant", type=click.Choice(list(VARIANTS)), default="safe", show_default=True,
              help="Protocol variant every migration executes.")
@click.option("--prediction-error", type=float, default=0.0, show_default=True,
              help="predicted: σ of the log-normal output-length prediction error (0: exact).")
@click.option("--head-only-freeness", is_flag=True, help="F_m counts only the head-of-line request (v0.1.0/HEAD).")
@click.option("--high-priority-frac", type=float, default=0.0, show_default=True,
              help="Share of generated requests in the high-priority class.")
@click.option("--no-priorities", is_flag=True, help="Ignore priority classes (no penalty, headroom or queue-first).")
@click.option("--autoscale", is_flag=True, help="Scale instances on load (every 10 s; x = 10, y = 60; 5 s start-up).")
@click.option("--min-instances", type=int, default=AutoscaleConfig().min_instances, show_default=True)
@click.option("--max-instances", type=int, default=AutoscaleConfig().max_instances, show_default=True)
@click.option("--fail", multiple=True, metavar="INSTANCE@TIME", help="Crash an instance at a time, s (repeatable).")
@click.option("--fail-rate", type=float, default=0.0, show_default=True,
              help="Random crashes per instance-hour (seeded by --seed).")
@click.option("--on-failure", type=click.Choice(ON_FAILURE), default="fail", show_default=True,
              help="A crashed instance's requests end failed, or are re-dispatched and recomputed.")
@click.option("--engine", type=click.Choice(GENERATIONS), default="vllm-0.2", show_default=True,
              help="Engine generation: the paper's vLLM 0.2, or vLLM V1 (chunked prefill, prefix caching).")
@click.option("--gpu", default="", help="vllm-v1: GPU from the catalog (step costs from first principles, with --model).")
@click.option("--model", default="", help="vllm-v1: model from the catalog (with --gpu; the layer count for --profile).")
@click.option("--tp", type=int, default=1, show_default=True, help="vllm-v1: tensor-parallel GPUs per instance.")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="vllm-v1: step costs from a per-layer profile folder.")
@click.option("--step-cost", type=click.Path(path_type=Path), default=None,
              help="vllm-v1: step costs from a TOML written by `llumverify calibrate`.")
@click.option("--no-prefix-caching", is_flag=True, help="vllm-v1: turn prefix caching off.")
@click.option("--pd", default="", metavar="P:D",
              help="Disaggregate: P prefill and D decode instances (P + D = --instances); hand-offs run the pd protocol.")
@click.option("--pd-fallback", type=click.Choice(PD_FALLBACKS), default="local", show_default=True,
              help="P/D: a request no decode instance takes decodes where it is, or is offered again each round.")
@click.pass_context
def simulate(ctx: click.Context, experiment: Path | None, policies: tuple[str, ...], instances: int, rate: float | None, arrival: str, cv: float,
             lengths: str | None, trace: Path | None, requests: int | None, rate_scale: float, seed: int,
             out: Path | None, force: bool, cost_config: Path | None, slo_ttft: float, slo_tpot: float,
             slo_ttft_high: float | None, slo_tpot_high: float | None,
             report_interval: float, step_by_step: bool, migrate_threshold: float, migrate_select: str,
             migration_variant: str, prediction_error: float, head_only_freeness: bool, high_priority_frac: float, no_priorities: bool,
             autoscale: bool, min_instances: int, max_instances: int, fail: tuple[str, ...], fail_rate: float,
             on_failure: str, engine: str, gpu: str, model: str, tp: int, profile: Path | None,
             step_cost: Path | None, no_prefix_caching: bool, pd: str, pd_fallback: str) -> None:
    """Simulate a Llumnix-style cluster under each policy and print the key metrics.

    With EXPERIMENT.toml, run that experiment file instead (every point, policy and seed; see
    docs/experiments.md) and write its results to --out (default results/NAME).
    """
    if experiment is not None:
        _run_experiment_file(ctx, experiment, out, force)
        return
    _check_options(instances, requests, seed, migrate_threshold)
    for option, value in (("--rate", rate), ("--cv", cv), ("--rate-scale", rate_scale),
                          ("--slo-ttft", slo_ttft), ("--slo-tpot", slo_tpot),
                          ("--slo-ttft-high", slo_ttft_high), ("--slo-tpot-high", slo_tpot_high)):
        _positive(option, value)
    if not (math.isfinite(report_interval) and report_interval >= 0):
        raise UserError(f"--report-interval must be >= 0, got {report_interval!r}")
    if not (math.isfinite(prediction_error) and prediction_error >= 0):
        raise UserError(f"--prediction-error must be a finite number >= 0, got {prediction_error!r}")
    if not 0 <= high_priority_frac <= 1:
        raise UserError(f"--high-priority-frac must be in [0, 1], got {high_priority_frac!r}")
    if out is not None:
        fresh_dir(out, "--out", force)
    cost = load_cost_config(input_file(cost_config, "--cost-config file")) if cost_config is not None else CostConfig()
    hardware = HardwareConfig(gpu=gpu, model=model, tp=tp, profile=str(profile) if profile else "",
                              cost_file=str(step_cost) if step_cost else "")
    if engine != "vllm-v1" and (hardware.given or no_prefix_caching):
        raise UserError("--gpu, --model, --profile, --step-cost and --no-prefix-caching need --engine vllm-v1")
    cfg = SimConfig(engine=EngineConfig(generation=engine, prefix_caching=not no_prefix_caching), cost=cost,
                    hardware=hardware,
                    cluster=ClusterConfig(num_instances=instances, report_interval_s=report_interval, pd=pd,
                                          pd_fallback=pd_fallback),
                    slo=SLOConfig(ttft_s=slo_ttft, per_token_s=slo_tpot, high_ttft_s=slo_ttft_high,
                                  high_per_token_s=slo_tpot_high),
                    scheduler=SchedulerConfig(migrate_threshold=migrate_threshold, migrate_select=migrate_select,
                                              head_only_freeness=head_only_freeness, priorities=not no_priorities,
                                              prediction_error=prediction_error),
                    migration=MigrationConfig(variant=migration_variant),
                    autoscale=AutoscaleConfig(enabled=autoscale, min_instances=min_instances,
                                              max_instances=max_instances),
                    failures=_failures(fail, fail_rate, on_failure, seed, instances, autoscale), fast=not step_by_step)
    cfg.validate()
    engine_profile.check(cfg.hardware)
    cfg = engine_profile.resolve(cfg)
    specs = _workload(trace, requests, rate, arrival, cv, lengths, rate_scale, seed, high_priority_frac)
    try:
        results = [run_policy(specs, name, cfg) for name in (policies or DEFAULT_POLICIES)]
    except AuditError as exc:
        raise AuditFailure(str(exc)) from None
    click.echo(f"{len(specs)} requests on {instances} instances "
               f"({'trace ' + str(trace) if trace else (lengths or 'sharegpt') + f' at {rate or DEFAULT_RATE} req/s'})")
    click.echo(_table(results))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_requests_csv(out / "requests.csv", results)
        workload = {"trace": str(trace) if trace else None, "requests": len(specs), "rate": rate,
                    "high_priority_frac": high_priority_frac,
                    "arrival": arrival, "cv": cv, "lengths": lengths, "rate_scale": rate_scale, "seed": seed}
        config = {"engine": describe(cfg.engine), "cost": describe(cfg.cost), "cluster": describe(cfg.cluster),
                  "slo": describe(cfg.slo), "scheduler": describe(cfg.scheduler),
                  "migration": describe(cfg.migration), "autoscale": describe(cfg.autoscale),
                  "failures": {**describe(cfg.failures), "at": [list(f) for f in cfg.failures.at]},
                  "fast": cfg.fast, "workload": workload}
        if cfg.engine.generation == "vllm-v1":
            config["hardware"] = describe(cfg.hardware)
            config["step_cost"] = cfg.step.describe()  # type: ignore[union-attr]
        write_summary_json(out / "summary.json", results, config)
        click.echo(f"wrote {out / 'requests.csv'} and {out / 'summary.json'}")
