"""`llumverify simulate`: run the cluster simulator under each policy and compare them.

With no arguments it runs a built-in experiment: 16 instances, 10,000 ShareGPT-like requests at
8.5 req/s, in steady state for least-loaded and Llumnix (their metrics move a few percent at 3x
the requests) and past what round-robin sustains: its imbalance queues requests (SLO attainment
85 %, P99 TTFT 39 s) where least-loaded and Llumnix keep P99 TTFT under 1 s, and Llumnix's
migrations cut preemptions (3 against least-loaded's 40). docs/measurements.md has the numbers
and the longer runs they are compared with.

The options are generated from the settings' metadata (llumverify/settings/config.py `setting`, the
workload's in llumverify/study/experiment.py), and an invocation is a one-point experiment: the
options become the document an experiment file would hold, checked and expanded by the same
code (experiment.from_options, sweep.tasks, sweep.checked_specs), errors naming the options.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click
from click.core import ParameterSource
from tqdm import tqdm

from llumverify.cli.command import Command
from llumverify.sim import engine_profile
from llumverify.sim.engines import ENGINES, get_engine
from llumverify.cli import simulate_output as sim_output
from llumverify.cli.sweep import run_and_report
from llumverify.settings.config import STEP_COST_SOURCES, CostConfig, Setting, SimConfig, describe, settings_of
from llumverify.errors import UserError
from llumverify.study.experiment import Workload, from_options
from llumverify.files.outdir import OutputDir
from llumverify.files.inputs import not_a_loop
from llumverify.files.paths import input_file
from llumverify.requests import RequestSpec
from llumverify.scheduler.policies import DEFAULT_POLICIES, POLICIES, get_policy
from llumverify.sim.audit import AuditError
from llumverify.sim.costmodel import load_cost_config
from llumverify.sim.named_profiles import PROFILES
from llumverify.sim.run import RunResult
from llumverify.sim.run import simulate as run_policy
from llumverify.sim.request_output import FORMATS, RequestsFile, check_format
from llumverify.sim.run import check_memory, write_summary_json
from llumverify.study.sweep import checked_specs, tasks

DEFAULT_RATE = 8.5
DEFAULT_REQUESTS = 10_000
DEFAULT_LENGTHS = "sharegpt"

# This command's defaults where a workload setting has none of its own (a generated workload).
_COMMAND_DEFAULTS = {"rate": DEFAULT_RATE, "requests": DEFAULT_REQUESTS, "lengths": DEFAULT_LENGTHS}


class AuditFailure(click.ClickException):
    """A simulator audit failed: cli.main prints the one-line message and exits 3."""

    exit_code = 3


def _setting_options() -> dict[str, tuple[str, Setting, type, object]]:
    """key ("workload.rate", "cluster.num_instances", "sim.fast") -> (parameter name, setting, kind,
    default) for every setting that has an option."""
    sections: dict[str, tuple[type, object]] = {"workload": (Workload, None)}
    default = SimConfig()
    for f in dataclasses.fields(SimConfig):
        if dataclasses.is_dataclass(getattr(default, f.name)):
            sections[f.name] = (type(getattr(default, f.name)), getattr(default, f.name))
    sections["sim"] = (SimConfig, default)
    out = {}
    for section, (cls, obj) in sections.items():
        for name, (s, kind, _) in settings_of(cls).items():
            if s.flag:
                value = getattr(obj, name) if obj is not None else {f.name: f.default for f in dataclasses.fields(cls)}[name]
                out[f"{section}.{name}"] = (f"{section}__{name}", s, kind, value)
    return out


SETTING_OPTIONS = _setting_options()


def _option(param: str, s: Setting, kind: type, default: object) -> Callable[[click.Command], click.Command]:
    """The click option of one setting: its flag, help, type, choices and default."""
    help_text = s.help
    key = param.split("__", 1)[1]
    if key in _COMMAND_DEFAULTS:
        generated = " for generated workloads" if key != "lengths" else ""
        help_text = f"{help_text.rstrip('.')} (default {_COMMAND_DEFAULTS[key]}{generated})."
    if kind is bool and s.flag.startswith("--no-"):  # both spellings, as validate's --async-scheduling/--no-...
        return click.option(f"{s.flag}/--{s.flag[5:]}", param, default=False, help=help_text)
    if kind is bool:
        return click.option(s.flag, param, is_flag=True, help=help_text)
    if kind is tuple:
        return click.option(s.flag, param, multiple=True, metavar=s.metavar or None, help=help_text)
    ptype: click.ParamType | type = (click.Choice(s.names()) if s.choices else click.Path() if s.path else kind)
    if s.path and default == "":
        default = None  # no file given
    shown = default not in (None, "")
    return click.option(s.flag, param, type=ptype, default=default, show_default=shown,
                        metavar=s.metavar or None, help=help_text)


def _with_setting_options(command: Callable[..., None]) -> Callable[..., None]:
    for param, s, kind, default in reversed(list(SETTING_OPTIONS.values())):
        command = _option(param, s, kind, default)(command)
    return command


def _parse_failures(items: tuple[str, ...]) -> list[list[float]]:
    """--fail INSTANCE@TIME (repeatable) as failures.at pairs (their ranges are the setting's to check)."""
    at = []
    for item in items:
        iid, sep, t = item.partition("@")
        try:
            at.append([int(iid), float(t)])
        except ValueError:
            raise UserError(f"--fail: expected INSTANCE@TIME (e.g. 3@120.5), got {item!r}") from None
        if not sep:
            raise UserError(f"--fail: expected INSTANCE@TIME (e.g. 3@120.5), got {item!r}")
    return at


def _document(values: dict[str, object], policies: tuple[str, ...], seed: int,
              cost: CostConfig | None, given: frozenset[str] = frozenset()) -> dict[str, object]:
    """The experiment file these options describe: one workload, no grid, one seed (also the random
    crashes' seed), the settings given and this command's defaults for a generated workload.

    --profile NAME of a named profile (sim/named_profiles.py) is the file's `profile = NAME`, and the
    options in `given` (typed on the command line) then apply over it even at their default value;
    so does --num-blocks over the KV size the catalogs give a --gpu/--model.
    A step-cost source (--gpu, --model, --profile DIR, --step-cost) without --engine selects
    vllm-v1, as in an experiment file (experiment._imply_engine).
    """
    doc: dict[str, object] = {"name": "simulate", "policies": list(policies or DEFAULT_POLICIES), "seeds": [seed],
                              "requests": DEFAULT_REQUESTS, "timeseries": "none"}
    named = values.get("hardware__profile")
    if named in PROFILES:
        doc["profile"] = named
        values = {**values, "hardware__profile": None}
    elif named is not None and not not_a_loop(Path(str(named)), "--profile").is_dir():
        raise UserError(f"--profile: {named!r} is neither a named profile ({', '.join(PROFILES)}) "
                        "nor a per-layer profile folder")
    workload: dict[str, object] = {"name": "simulate"}
    for key, (param, s, kind, default) in SETTING_OPTIONS.items():
        section, field = key.split(".", 1)
        value = values[param]
        if kind is bool and s.negate:
            value = not value
        if kind is tuple:
            value = _parse_failures(value)  # type: ignore[arg-type]
        if value is None:
            continue  # not given: the setting's default
        if section == "workload":
            workload[field] = value
        elif value != default or param in given:  # typed on the command line: applies even at its default
            doc.setdefault(section, {})[field] = value  # type: ignore[union-attr]
    if "trace" not in workload:
        workload.setdefault("lengths", DEFAULT_LENGTHS)
        workload.setdefault("rate", DEFAULT_RATE)
    doc.setdefault("failures", {})["seed"] = seed  # type: ignore[index]
    if cost is not None:
        doc["cost"] = describe(cost)
    doc["workload"] = [workload]
    return doc


# option -> (what it needs, whether the command's options and policies give that): an option that would
# change nothing in this run is refused, not silently ignored (an experiment file may set it for other points)
_NEEDS: dict[str, tuple[str, Callable[[dict[str, object], tuple[str, ...]], bool]]] = {
    "cluster__pd_fallback": ("--pd (prefill/decode roles)", lambda v, p: bool(v["cluster__pd"])),
    "autoscale__min_instances": ("--autoscale", lambda v, p: bool(v["autoscale__enabled"])),
    "autoscale__max_instances": ("--autoscale", lambda v, p: bool(v["autoscale__enabled"])),
    "failures__on_failure": ("--fail or --fail-rate", lambda v, p: bool(v["failures__at"] or v["failures__rate_per_hour"])),
    "hardware__expert_parallel": ("more than one GPU per engine (--tp or --dp > 1)",
                                  lambda v, p: int(v["hardware__tp"] or 1) * int(v["hardware__dp"] or 1) > 1),
    **{param: ("high-priority requests (--high-priority-frac > 0, or a trace, which gives priorities)",
                lambda v, p: bool(v["workload__trace"] or v["workload__high_priority_frac"]))
       for param in ("slo__high_ttft_s", "slo__high_per_token_s")},
    "scheduler__prediction_error": ("a policy that reads predicted lengths (--policy predicted)",
                                    lambda v, p: any(get_policy(n).predicts for n in p)),
    **{param: ("a policy that migrates (--policy llumnix)", lambda v, p: any(get_policy(n).migrates for n in p))
       for param in ("scheduler__migrate_threshold", "scheduler__migrate_select", "scheduler__head_only_freeness",
                     "migration__variant")},
}


def _refuse_unused(values: dict[str, object], policies: tuple[str, ...], given: frozenset[str]) -> None:
    """UserError for an option typed on the command line that this run would ignore."""
    for param, (needs, applies) in _NEEDS.items():
        if param in given and not applies(values, policies or DEFAULT_POLICIES):
            raise UserError(f"{SETTING_OPTIONS[param.replace('__', '.', 1)][1].flag}: applies only with {needs}; "
                            "this run would ignore it")


# setting -> the engine capability (sim/engines.Engine's flag) without which it changes nothing; every hardware setting
# but the step-cost sources (which choose the engine themselves) needs step costs
_ENGINE_NEEDS = {"engine__prefix_caching": "prefix_caching", "engine__async_scheduling": "async_scheduling"}


def _refuse_engineless(given: frozenset[str], engine: str) -> None:
    """UserError for an option typed on a run whose engine lacks what it sets: even at its default value
    (--async-scheduling on an engine that plans each step when the one before ends) it would change nothing."""
    for param in sorted(given):
        section, field = param.split("__", 1)
        need = _ENGINE_NEEDS.get(param) or ("step_costs" if section == "hardware" and field not in STEP_COST_SOURCES
                                            else None)
        if need is not None and not getattr(get_engine(engine), need):
            s = SETTING_OPTIONS[f"{section}.{field}"][1]
            flag = f"--{s.flag[5:]}/{s.flag}" if s.flag.startswith("--no-") else s.flag  # the pair: either was typed
            having = ", ".join(n for n, e in ENGINES.items() if getattr(e, need))
            raise UserError(f"{flag}: applies only to an engine with {need.replace('_', ' ')} ({having}); this run's "
                            f"engine, {engine}, has none")


def _options_of_keys() -> dict[str, str]:
    """Document key -> option, so every error names the option the user typed."""
    names = {"seeds[0]": "--seed", "failures.seed": "--seed", "policies[0]": "--policy", "profile": "--profile"}
    for key, (_, s, _, _) in SETTING_OPTIONS.items():
        section, field = key.split(".", 1)
        names["workload[0]." + field if section == "workload" else key] = s.flag
    return names


def _budget(mb: float | None) -> float | None:
    if mb is not None and not (math.isfinite(mb) and mb >= 1):
        raise UserError(f"--memory-budget: must be a finite number of MB >= 1, got {mb}")
    return mb


def _run_with_bar(specs: Sequence[RequestSpec], policy: str, cfg: SimConfig, rows: RequestsFile | None) -> RunResult:
    """One policy's run, with a progress bar on a terminal's stderr once it lasts over 2 s; its
    requests' rows streamed to `rows` as they end."""
    with tqdm(total=len(specs), desc=policy, unit="req", file=sys.stderr, delay=2.0, leave=False,
              disable=not sys.stderr.isatty()) as bar:
        return run_policy(specs, policy, cfg, progress=lambda n: bar.update(n - bar.n), rows=rows)


def _run_experiment_file(ctx: click.Context, experiment: Path, out: Path | None, force: bool) -> None:
    """The experiment file fixes workload, cluster and policies: only --out and --force may accompany it."""
    for param in ctx.command.params:
        if param.name not in ("experiment", "out", "force") and \
                ctx.get_parameter_source(param.name) is not ParameterSource.DEFAULT:
            raise UserError(f"{experiment}: the experiment file sets the run; drop {param.opts[-1]} "
                            "(only --out and --force apply)")
    run_and_report(experiment, out, force=force)


@click.command(cls=Command)
@click.argument("experiment", required=False, type=click.Path(path_type=Path))
@click.option("--policy", "policies", multiple=True, type=click.Choice(list(POLICIES)),
              help=f"Policy to simulate (repeatable; default: {', '.join(DEFAULT_POLICIES)}).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the workload and of random crashes.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write DIR/requests.csv and DIR/summary.json (DIR new or empty unless --force).")
@click.option("--requests-format", type=click.Choice(FORMATS), default="csv", show_default=True,
              help="Per-request file of --out: requests.csv, or requests.parquet (needs pyarrow).")
@click.option("--force", is_flag=True, help="Write into a non-empty --out folder, overwriting its result files.")
@click.option("--memory-budget", type=float, default=None, metavar="MB", callback=lambda ctx, p, v: _budget(v),
              help="Refuse up front a run estimated to need more memory (default: what the machine has available).")
@click.option("--cost-config", type=click.Path(path_type=Path), default=None,
              help="TOML file overriding cost-model coefficients (names as in CostConfig).")
@click.option("--format", "fmt", type=click.Choice(sim_output.FORMATS), default="table", show_default=True,
              help="Print the metrics as a table (fits 100 columns), JSON or CSV.")
@_with_setting_options
@click.pass_context
def simulate(ctx: click.Context, experiment: Path | None, policies: tuple[str, ...], seed: int, out: Path | None,
             force: bool, requests_format: str, memory_budget: float | None, cost_config: Path | None,
             fmt: str, **settings: object) -> None:
    """Simulate a Llumnix-style cluster under each policy and print the key metrics.

    With EXPERIMENT.toml, run that experiment file instead (every point, policy and seed; see
    docs/experiments.md) and write its results to --out (default results/NAME).
    """
    if experiment is not None:
        if experiment.suffix.lower() in (".csv", ".jsonl", ".json"):  # a trace given where the experiment file goes
            raise UserError(f"{experiment}: not an experiment file (.toml); to replay a trace, give --trace {experiment}")
        _run_experiment_file(ctx, experiment, out, force)
        return
    cost = load_cost_config(input_file(cost_config, "--cost-config file")) if cost_config is not None else None
    given = frozenset(p for p in settings if ctx.get_parameter_source(p) is not ParameterSource.DEFAULT)
    exp = from_options(_document(settings, policies, seed, cost, given), _options_of_keys())
    _refuse_unused(settings, policies, given)  # after the values' own checks: a bad value is named first
    if out is not None:
        check_format(requests_format)
        claim = OutputDir(out, "--out", force)  # locked for this writer, staged, moved in by commit()
    elif ctx.get_parameter_source("requests_format") is not ParameterSource.DEFAULT:
        raise UserError("--requests-format: the per-request file is written only with --out DIR")
    todo = tasks(exp)
    cfg = todo[0].point.config
    engine_profile.check(cfg.hardware)
    cfg = engine_profile.resolve(cfg)
    _refuse_engineless(given, cfg.engine.generation)
    specs = checked_specs(todo[0])
    if "cluster__users" in given and cfg.cluster.users >= len(specs):  # as _refuse_unused: it would change nothing
        raise UserError(f"--users {cfg.cluster.users:,}: not fewer than the run's {len(specs):,} requests, so no user "
                        "sends a second one: the run is the open loop --users 0 gives; give fewer users than requests")
    check_memory(len(specs), memory_budget, cfg, specs[-1].arrival_s if specs else 0.0)
    if cfg.hardware.given:  # said once the inputs are read: a bad trace's error stays the one line on stderr
        how = (f"catalogs; TP {cfg.hardware.tp}, gpu mem util {cfg.hardware.gpu_memory_utilization}"
               if cfg.hardware.kv_from_catalog else "as given, not from the catalogs")
        click.echo(f"KV cache: {cfg.engine.num_blocks} blocks x {cfg.engine.block_size} tokens per instance ({how})",
                   err=True)
    try:
        with contextlib.ExitStack() as stack:
            rows = None
            if out is not None:
                rows = stack.enter_context(RequestsFile(ctx.with_resource(claim).path, requests_format))
            results = [_run_with_bar(specs, task.policy, cfg, rows) for task in todo]
    except AuditError as exc:
        raise AuditFailure(str(exc)) from None
    trace, rate, lengths = settings["workload__trace"], settings["workload__rate"], settings["workload__lengths"]
    named = settings["hardware__profile"] if settings["hardware__profile"] in PROFILES else None
    warnings = sim_output.overload_warnings(results, specs[-1].arrival_s if specs else 0.0, cfg.cluster.users > 0)
    click.echo(sim_output.render(results, sim_output.describe_run(cfg, todo[0].point.workload, len(specs), seed, named),
                                 fmt, warnings))
    if fmt != "table":
        for line in warnings:
            click.echo(line, err=True)
    if out is not None:
        wl = todo[0].point.workload
        workload = {"trace": trace, "requests": len(specs), "rate": rate, "high_priority_frac": wl.high_priority_frac,
                    "arrival": wl.arrival, "cv": wl.cv, "lengths": lengths, "rate_scale": wl.rate_scale, "seed": seed,
                    "stream": wl.stream}
        config = {"engine": describe(cfg.engine), "cost": describe(cfg.cost), "cluster": describe(cfg.cluster),
                  "slo": describe(cfg.slo), "scheduler": describe(cfg.scheduler),
                  "migration": describe(cfg.migration), "autoscale": describe(cfg.autoscale),
                  "failures": {**describe(cfg.failures), "at": [list(f) for f in cfg.failures.at]},
                  "fast": cfg.fast, "workload": workload}
        if cfg.step is not None:  # an engine timed by step costs (sim/engines.py)
            config["hardware"] = describe(cfg.hardware)
            config["step_cost"] = cfg.step.describe()  # type: ignore[union-attr]
        write_summary_json(claim.path / "summary.json", results, config)
        claim.commit()
        click.echo(f"wrote {out / f'requests.{requests_format}'} and {out / 'summary.json'}", err=fmt != "table")
