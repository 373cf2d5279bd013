"""`llumverify validate` and `llumverify calibrate`: the engine model against real vLLM runs.

validate RUN_DIR [--workload FILE] replays a real run (the shared format; without the workload
file, the workload its requests.jsonl implies; or a `vllm bench serve --save-detailed` result file,
validation/bench_result.py; or vLLM's multi-turn benchmark's client CSV, validation/multiturn.py) and
compares every request; validate --static-batch CSV simulates
static batches. calibrate fits what a profile cannot see (the per-step engine constant) on the
calibration part of a run, or on static batches of one GPU, and writes a step-cost TOML; validate
then reports the error on the rest.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import click
from tabulate import tabulate

from llumverify.cli.command import Command
from llumverify.cli.tables import wrap
from llumverify.sim import engine_profile
from llumverify.settings.config import HardwareConfig
from llumverify.errors import UserError
from llumverify.files.inputs import finite, not_a_loop, regular_file
from llumverify.files.outdir import OutputDir
from llumverify.files.paths import resolved, write_atomic, writable_file
from llumverify.validation.bench_sends import FROM_010, PRE_010, Redraw

SCHEMA_VERSION = 2  # 2: static-batch rows carry prompt and output (was length); engine_terms is a list
FIT_TOLERANCE = 0.02  # a calibrated constant must bring the calibration part's mean TPOT this close
FP8_FIT = ("a step-cost file holds 16-bit KV kernels and does not say otherwise, so one fitted on an fp8 cache would be "
           "replayed wrong: validate with the engine options and --fixed-ns N instead")


# engine settings a client-side record lacks
STATED = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_dtype", "async_scheduling", "cudagraph_mode",
          "attention_backend")
RUN_ONLY = ("num_gpu_blocks", "client_ms", "client_us_per_token", "bench_seed", "bench_rule", "calib_frac", "workload",
            "sampling", *STATED)


def _refuse_run_options() -> None:
    """With --static-batch, the options only a real run uses are an error, not ignored."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [p.opts[0] for p in ctx.command.params if p.name in RUN_ONLY
             and ctx.get_parameter_source(p.name) is ParameterSource.COMMANDLINE]
    if given:
        raise UserError(f"{', '.join(given)}: for a real run, not --static-batch (each row states its own KV cache and "
                        "arrivals, and is priced without the top-p sort)")


def _bench_options(f):
    """How to redraw the sends of a vllm bench serve result without start_times (bench_sends.py)."""
    for opt in reversed([
        click.option("--bench-seed", type=int, default=None,
                     help="A vllm bench serve result without start_times: the --seed it ran with, to redraw its sends "
                          "as vLLM drew them [default: 0, vLLM's]."),
        click.option("--bench-rule", type=click.Choice([PRE_010, FROM_010]), default=None,
                     help="...and the vLLM that wrote it, where its recorded duration fits both of vLLM's send rules "
                          "[default: the one that fits]."),
    ]):
        f = opt(f)
    return f


def _sampling_option(f):
    """How a real run's requests sampled, which no record states (validate and calibrate alike)."""
    return click.option(
        "--sampling", type=click.Choice(["greedy", "top-p"]), default=None,
        help="How the run's requests sampled, which no record states: top-p where they set top_p < 1, or set "
             "nothing and the model's generation_config.json has top_p < 1 (Llama-3.1-Instruct, Qwen3): vLLM "
             "0.11.1-0.16 then sort every sequence's logits each step, priced per sequence (sim/sampling.py); "
             "calibrate fits with the sort priced and writes the costs without it, for a replay to add with "
             "--sampling top-p [default: greedy, the profiled sampler].")(f)


def _engine_options(f):
    """The engine settings a client-side record (a vllm bench serve result, a multi-turn CSV) does
    not state, which would otherwise be vLLM's defaults; a run folder's meta.json states its own."""
    for opt in reversed([
        click.option("--max-num-seqs", type=click.IntRange(1, (1 << 31) - 1), default=None,
                     help="A vllm bench serve result or multi-turn CSV: the server's max_num_seqs [default: vLLM's "
                          "for the GPU]."),
        click.option("--max-num-batched-tokens", type=click.IntRange(1, (1 << 31) - 1), default=None,
                     help="...its max_num_batched_tokens [default: vLLM's for the GPU]."),
        click.option("--kv-cache-dtype", type=click.Choice(["auto", "bfloat16", "float16", "fp8", "fp8_e4m3",
                                                            "fp8_e5m2"]), default=None,
                     help="...its KV cache dtype [default: auto, the model's 16 bits]."),
        click.option("--async-scheduling/--no-async-scheduling", default=None,
                     help="...whether it scheduled asynchronously [default: on, vLLM >= 0.14's default]."),
        click.option("--cudagraph-mode", type=click.Choice(["full_and_piecewise", "piecewise", "full",
                                                            "full_decode_only", "none"], case_sensitive=False),
                     default=None,
                     help="...the cudagraph_mode it resolved (its log's, not the argument: vLLM turns full, or "
                          "full_and_piecewise without splitting ops, into full_decode_only where the attention backend "
                          "cannot graph mixed batches) [default: full_and_piecewise; it, piecewise and full replay "
                          "every step from a graph; full_decode_only: a step with a prefill chunk lasts at least the "
                          "CPU's launches, sim/graphless.py; none is refused]."),
        click.option("--attention-backend", type=click.Choice(["auto", "flashinfer-fa2"]), default=None,
                     help="...the kernels that read its KV cache: flashinfer-fa2 for vLLM's FLASHINFER backend without "
                          "its TRT-LLM kernels (use_trtllm_attention off, or, in vLLM up to 0.15, a GPU outside the "
                          "B200 family), whose reads of an fp8 cache are priced at the dequantising kernels' "
                          "published times, "
                          "sim/kv_dequant.py [default: auto, kernels that read fp8 as fp8]."),
    ]):
        f = opt(f)
    return f


def _stated(**given: object) -> dict[str, object]:
    """The engine settings given on the command line, as engine_kwargs names them; a token budget
    below the batch size, which vLLM refuses, is refused."""
    stated = {k: v for k, v in given.items() if k in STATED and v is not None}
    seqs, tokens = stated.get("max_num_seqs"), stated.get("max_num_batched_tokens")
    if seqs is not None and tokens is not None and tokens < seqs:  # type: ignore[operator]
        raise UserError(f"--max-num-batched-tokens {tokens} is below --max-num-seqs {seqs}: vLLM refuses that")
    return stated


def _source_options(f):
    for opt in reversed([
        click.option("--profile", type=click.Path(path_type=Path), help="Per-layer profile folder (step costs)."),
        click.option("--step-cost", "--cost", "cost", type=click.Path(path_type=Path),
                     help="Step-cost TOML (as calibrate writes it)."),
        click.option("--gpu", help="GPU from the catalog or a TOML file of its keys (first principles, with --model) "
                                   "[default: the run's meta.json device_name]."),
        click.option("--model", help="Model from the catalog, or the path of its HF config.json (first principles, with "
                                     "--gpu; the layer count for --profile) [default: the run's meta.json model]."),
        click.option("--tp", type=int, default=None,
                     help="Tensor-parallel GPUs per instance (default: the run's tensor_parallel_size, else 1)."),
        click.option("--num-gpu-blocks", type=click.IntRange(min=1), default=None,
                     help="KV blocks to simulate (default: the run's meta.json kv_cache, else derived from the "
                          "catalogs: memory x gpu_memory_utilization - weights - reserve)."),
    ]):
        f = opt(f)
    return f


def prepare_out(out: Path | None, force: bool) -> OutputDir | None:
    """Check --out before any work (writable, free, empty unless --force) and claim it for this
    command (llumverify/files/outdir.py): write into `.path`, then `commit()`."""
    if out is None:
        return None
    return click.get_current_context().with_resource(OutputDir(out, "--out", force))


def _table(doc: dict, label: str) -> str:
    """Real against simulated TTFT, TPOT and E2E in ms (as `simulate` prints them): mean and P90 with the signed
    error of each, and the median of the per-request absolute errors."""
    rows = []
    for m in ("ttft", "tpot", "e2e"):
        d = doc[m]
        rows.append([f"{m.upper()} (ms)", *(f"{1e3 * d[k]:,.1f}" for k in ("real_mean_s", "sim_mean_s")),
                     f"{100 * (d['sim_mean_s'] / d['real_mean_s'] - 1):+.1f} %",
                     *(f"{1e3 * d[k]:,.1f}" for k in ("real_p90_s", "sim_p90_s")),
                     f"{100 * (d['sim_p90_s'] / d['real_p90_s'] - 1):+.1f} %", f"{100 * d['median_ape']:.1f} %"])
    return f"{label} ({doc['n_requests']} requests)\n" + tabulate(
        rows, headers=["", "real mean", "sim mean", "mean err", "real P90", "sim P90", "P90 err", "median APE"],
        disable_numparse=True, colalign=("left", *["right"] * 7))


@click.command(cls=Command)
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--workload", type=click.Path(path_type=Path), help="The run's workload JSONL (arrivals, lengths, hash_ids) [default: derived from the run's "
                   "requests.jsonl: client send times and lengths, no prompt hashes].")
@click.option("--static-batch", type=click.Path(path_type=Path), help="Static-batch CSV (argonne format) instead of a run.")
@_source_options
@click.option("--fixed-ns", type=click.IntRange(min=0, max=10_000_000_000),
              help="Per-step engine constant in ns, at most 10 s (overrides the source's).")
@click.option("--engine-terms", "engine_terms_arg",
              help="Static batches, first principles: engine terms (fixed_ns, seq_ns, hbm_bw_scale, tp_step_ns, "
                   "layer_ns, seq_gparam_ns, kv_bw, kv_per_query_head) as `calibrate --static-batch` writes them; "
                   "`none` for the vLLM V1 model's zero terms [default: the row's vendor's 2024 vLLM fit, "
                   "sim/engine_terms/].")
@click.option("--client-ms", type=click.FloatRange(0, 10_000), default=None,
              help="A vllm bench serve result or multi-turn CSV: the client's own time per request added to the "
                   "simulated TTFT and E2E (a multi-turn CSV's next turn waits it too, after its previous answer, with "
                   "the client's recorded turnaround), beside --client-us-per-token [default: 7.5 ms, from a vLLM "
                   "v0.15.1 H100 run: docs/engines.md].")
@click.option("--client-us-per-token", type=click.FloatRange(0, 10_000), default=None,
              help="A vllm bench serve result or multi-turn CSV: the client's time per prompt token (the API server "
                   "tokenises the prompt), added like --client-ms; 0 with --client-ms 0 for the engine's view "
                   "[default: 2.25 µs, BLIS's fits to vLLM runs: docs/engines.md].")
@_bench_options
@_engine_options
@_sampling_option
@click.option("--calib-frac", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=1 / 3,
              show_default=True, help="Requests arriving in this first share of the run are the calibration part.")
@click.option("--out", type=click.Path(path_type=Path), help="Write validation.json and plots here.")
@click.option("--force", is_flag=True, help="Overwrite files in a non-empty --out.")
def validate(run_dir: Path | None, workload: Path | None, static_batch: Path | None, profile: Path | None,
             cost: Path | None, gpu: str | None, model: str | None, tp: int | None, num_gpu_blocks: int | None,
             fixed_ns: int | None, engine_terms_arg: str | None, client_ms: float | None,
             client_us_per_token: float | None, bench_seed: int | None,
             bench_rule: str | None, max_num_seqs: int | None, max_num_batched_tokens: int | None,
             kv_cache_dtype: str | None, async_scheduling: bool | None, cudagraph_mode: str | None,
             attention_backend: str | None, sampling: str | None, calib_frac: float,
             out: Path | None, force: bool) -> None:
    """Compare the simulator with a real run (RUN_DIR [--workload FILE], or the JSON file `vllm bench
    serve --save-result --save-detailed` writes, or the CSV vLLM's multi-turn benchmark writes with
    --metrics-csv, with --gpu) or with static batches."""
    finite(calib_frac, "--calib-frac", gt=0, lt=1)
    # the word `none` (exactly) is the V1 model's zero terms; anything else is a file (./none is one)
    engine_terms: Path | str | None = (engine_terms_arg if engine_terms_arg in (None, NO_TERMS)
                                       else Path(engine_terms_arg))
    source = _hardware(profile, cost, gpu, model, tp)
    if static_batch is not None:
        if run_dir is not None or workload is not None:
            raise UserError("--static-batch replaces RUN_DIR and --workload")
        _refuse_run_options()
        # first principles price each row's own GPU and model: --gpu or --model alone picks rows
        (engine_profile.check if source.profile or source.cost_file else engine_profile.check_names)(source)
        if engine_terms is not None and (source.profile or source.cost_file):
            raise UserError("--engine-terms applies to first principles; the profile or step-cost file has its own")
        _validate_static(static_batch, source, tp, fixed_ns, engine_terms, out, prepare_out(out, force))
        return
    if engine_terms is not None:
        raise UserError("--engine-terms goes with --static-batch")
    if run_dir is None:
        raise UserError("give RUN_DIR (and --workload FILE), or --static-batch CSV")
    from llumverify.validation import replay as v

    stated = _stated(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                     kv_cache_dtype=kv_cache_dtype, async_scheduling=async_scheduling, cudagraph_mode=cudagraph_mode,
                     attention_backend=attention_backend)
    source, kv_how, label, load = _real_run(run_dir, workload, source, tp is not None, num_gpu_blocks,
                                            (client_ms, client_us_per_token), Redraw(bench_seed, bench_rule),
                                            stated=stated)
    if sampling is not None:
        from dataclasses import replace

        source = replace(source, sampling=sampling)
        engine_profile.step_cost(source)  # a GPU without SM numbers is refused before --out is touched
    claim = prepare_out(out, force)
    run, lines = load()
    step = engine_profile.step_cost(source, fixed_ns)
    calib, held = v.split_ids(run, calib_frac)
    _refuse_unscorable(run, {"the whole run": None, "the calibration part": calib, "the validation part": held}, label)
    click.echo(wrap(f"KV cache: {kv_how}; tp = {source.tp}{_ranks(run, step)}"))  # after every check: a refused input prints nothing
    for line in lines:
        click.echo(wrap(line))
    sim = v.replay(run, step)
    doc = {"schema_version": SCHEMA_VERSION, "run": str(run_dir), "workload": str(label),
           **v.compare(run.real, sim),
           "calibration_part": {"ids": v.split_description(run, calib_frac), **v.compare(run.real, sim, calib)},
           "validation_part": v.compare(run.real, sim, held),
           "simulated_preemptions": int(sim["preemptions"].sum()), "step_cost": step.describe(),
           "simulated_prefix_hit_rate": None if math.isnan(hit := float(sim["prefix_hit_rate"])) else hit,
           "kv_cache": {"num_gpu_blocks": run.engine.num_blocks, "how": kv_how}, "arrivals": run.arrivals,
           "client_ms_added": run.client.fixed_s * 1e3, "client_us_per_prompt_token_added": run.client.per_token_s * 1e6,
           "engine_defaults_used": list(run.notes)}
    click.echo(wrap(f"step costs: {step.source}; fixed_ns = {step.fixed_ns}"))
    if doc["simulated_prefix_hit_rate"] is not None:
        click.echo(f"simulated prefix-cache hits: {100 * doc['simulated_prefix_hit_rate']:.1f} % of the prompt tokens admitted")
    click.echo(_table(doc, "all requests"))
    click.echo(_table(doc["validation_part"], "validation part (not used by calibrate)"))
    if claim is not None:
        write_atomic(claim.path / "validation.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
        from llumverify.validation.plots import plot_run

        plot_run(claim.path, run, sim)
        claim.commit()
        click.echo(f"wrote {out / 'validation.json'} and plots")


def _real_run(run_dir: Path, workload: Path | None, source: HardwareConfig, tp_given: bool,
              num_gpu_blocks: int | None, client: tuple[float | None, float | None], redraw: Redraw,
              calibrating: bool = False,
              stated: dict[str, object] | None = None
              ) -> tuple[HardwareConfig, str, Path | str, Callable[[], tuple[object, list[str]]]]:
    """A real run to replay, checked before any work: (the source matched to it, where its KV blocks
    come from, where its workload comes from, a loader of (the run, the lines to print of it)). A run
    folder's requests are read by the loader (validate claims --out first); a vllm bench serve
    result file is read here, as it names the model the source is matched to."""
    from llumverify.validation import replay as v
    from llumverify.validation.bench_result import bench_note, is_bench_result, load_bench
    from llumverify.validation.client_time import client_time
    from llumverify.validation.multiturn import is_multiturn_csv, load_multiturn
    from llumverify.validation.run_hardware import prepare

    engine_profile.check_names(source)  # before the run is read; --gpu or --model alone: the run names the other
    if is_multiturn_csv(run_dir):
        if workload is not None:
            raise UserError("--workload goes with a run folder: the multi-turn benchmark's CSV holds its own requests")
        if redraw.given():
            raise UserError(f"{redraw.given()} goes with a vllm bench serve result without start_times: the CSV records "
                            "its sends")
        run, source, kv_how, lines = load_multiturn(run_dir, source, tp_given, num_gpu_blocks, client_time(*client), calibrating,
                                                    stated or {})
        engine_profile.check(source)
        return source, kv_how, run_dir, lambda: (run, lines)
    if is_bench_result(run_dir):
        if workload is not None:
            raise UserError("--workload goes with a run folder: a vllm bench serve result holds its own requests")
        run, source, kv_how, arrivals = load_bench(run_dir, source, tp_given, num_gpu_blocks, client_time(*client), redraw,
                                                   stated or {})
        engine_profile.check(source)
        lines = [bench_note(run, arrivals, calibrating), *(f"engine: {note}" for note in run.notes)]
        return source, kv_how, run_dir, lambda: (run, lines)
    if not run_dir.is_dir():
        v.read_meta(run_dir)  # not found, or neither a folder nor a file: said as such, before any option is blamed
    if given := [f for f, v in zip(("--client-ms", "--client-us-per-token"), client) if v is not None]:
        raise UserError(f"{' and '.join(given)} go{'es' if len(given) == 1 else ''} with a vllm bench serve result or a multi-turn CSV: a run folder's "
                        "timestamps are the engine's")
    if stated:
        named = ", ".join("--" + k.replace("_", "-") for k in stated)
        raise UserError(f"{named}: for a vllm bench serve result or a multi-turn CSV: a run folder's meta.json records "
                        "its engine settings")
    if redraw.given():
        raise UserError(f"{redraw.given()} goes with a vllm bench serve result without start_times: a run folder "
                        "records its arrivals")
    source, blocks, kv_how = prepare(run_dir, source, tp_given, num_gpu_blocks)
    engine_profile.check(source)

    def load() -> tuple[object, list[str]]:
        run = v.load_run(run_dir, workload, blocks)
        return run, [*([] if workload else [run.workload_note()]), *(f"engine: {note}" for note in run.notes)]

    return source, kv_how, workload or v.DERIVED, load


def _ranks(run: object, step: object) -> str:
    """"; dp = D ..." for a data-parallel run: how its ranks are replayed ("" for one engine)."""
    from llumverify.validation.replay import lockstep

    dp: int = run.dp  # type: ignore[attr-defined]
    if dp == 1:
        return ""
    together = lockstep(run, step) > 1  # type: ignore[arg-type]
    return f"; dp = {dp}: one instance a rank, vLLM's balancer, {'in lockstep (MoE)' if together else 'independent'}"


def _refuse_unscorable(run: object, parts: dict[str, object], workload: Path | str) -> None:
    """UserError, before any simulation, for a part of the run that has no request to score a
    metric on (e.g. every output one token long: no TPOT), instead of a table of nan."""
    import numpy as np

    real: dict = run.real  # type: ignore[attr-defined]
    for part, ids in parts.items():
        for metric, values in real.items():
            chosen = values if ids is None else values[ids]  # type: ignore[index]
            if not np.any(np.isfinite(chosen) & (chosen > 0)):
                why = " (every output is one token: TPOT is undefined)" if metric == "tpot" else ""
                fix = "use another run" + (", or move --calib-frac" if len(values) > 1 else " (it has one request)")
                raise UserError(f"{workload}: {part} has no request to measure {metric.upper()} on{why}; "
                                f"nothing to fit or score ({fix})")


def _hardware(profile: Path | None, cost: Path | None, gpu: str | None, model: str | None,
              tp: int | None) -> HardwareConfig:
    if tp is not None and tp < 1:
        raise UserError(f"--tp must be >= 1, got {tp}")
    return HardwareConfig(gpu=gpu or "", model=model or "", tp=tp or 1, profile=str(profile) if profile else "",
                          cost_file=str(cost) if cost else "")


def _as_options(check: Callable[[HardwareConfig], None], source: HardwareConfig) -> None:
    """check(source), a setting it refuses named by its option (--tp, not HardwareConfig.tp)."""
    from llumverify.settings.config import SettingError, settings_of

    try:
        check(source)
    except SettingError as e:
        flag = settings_of(HardwareConfig)[e.field][0].flag if e.owner == "HardwareConfig" else ""
        if not flag:
            raise
        raise UserError(f"{flag} {e.problem}") from None


NO_TERMS = "none"  # --engine-terms none: the vLLM V1 model's zero engine terms (sim/efficiency.toml)


def _validate_static(csv_path: Path, source: HardwareConfig, tp: int | None, fixed_ns: int | None,
                     engine_terms: Path | str | None, out: Path | None, claim: OutputDir | None) -> None:
    """Every vLLM row of the CSV (of --tp GPUs if given, else any) at its own TP degree (a row of
    another framework is counted and left out)."""
    from dataclasses import replace

    from llumverify.validation.static_batch import errors, measured_on, simulate_static, static_rows

    rows, skipped = static_rows(csv_path, source, tp=tp)
    other = [r for r, _, _ in rows if r.framework not in ("", "vLLM")]
    rows = [r for r in rows if r[0].framework in ("", "vLLM")]
    if not rows:
        raise UserError(f"{csv_path}: no vLLM row matches a catalog GPU and model"
                        + (measured_on(source) or (" and the given --gpu/--model" if source.given else "")))
    if source.profile or source.cost_file:
        sims = simulate_static(rows, source, fixed_ns)
    else:
        from llumverify.sim.roofline import load_efficiency
        from llumverify.validation.transfer_fit import load_engine_terms, simulate, static_default_terms

        # per row: the file given, none (the V1 model's zero terms), or its vendor's packaged fit
        terms = [None if engine_terms == NO_TERMS else engine_terms or static_default_terms(g) for _, g, _ in rows]
        sims = [0.0] * len(rows)
        for path in dict.fromkeys(terms):
            eff = load_efficiency() if path is None else load_engine_terms(path, load_efficiency())
            picked = [i for i, t in enumerate(terms) if t == path]
            got = simulate([rows[i] for i in picked], eff if fixed_ns is None else replace(eff, fixed_ns=fixed_ns))
            for i, s in zip(picked, got):
                sims[i] = float(s)
        # a packaged file by its place in the package (sim/engine_terms/...), not this machine's path
        used = sorted({NO_TERMS if t is None else str(t) if engine_terms else f"sim/engine_terms/{Path(t).name}"
                       for t in terms})
        click.echo(f"engine terms: {', '.join(Path(t).name if engine_terms is None else t for t in used)}"
                   + ("" if engine_terms else " (the vendor's 2024 vLLM static-batch fit; --engine-terms none: the V1 model's zero terms)"))
    doc = {"schema_version": SCHEMA_VERSION, "csv": str(csv_path), **errors([r for r, _, _ in rows], sims),
           "skipped": skipped, "other_frameworks": len(other), "fixed_ns": fixed_ns,
           "engine_terms": None if source.profile or source.cost_file else used}
    by_gpu: dict[str, list[float]] = {}
    for (row, g, _), r in zip(rows, doc["rows"]):
        r["tp"] = row.gpus
        by_gpu.setdefault(g if row.gpus == 1 else f"{g} x{row.gpus}", []).append(r["ape"])
    import numpy as np

    click.echo(tabulate([[g, len(a), 100 * float(np.median(a))] for g, a in sorted(by_gpu.items())],
                        headers=["GPU", "rows", "median APE %"], floatfmt=".3g"))
    click.echo(f"all: {doc['n_rows']} rows, median APE {100 * doc['median_ape']:.1f} %"
               + (f"; skipped {len(skipped)} rows ({_reasons(skipped)})" if skipped else "")
               + (f"; left out {len(other)} rows of other frameworks" if other else ""))
    if claim is not None:
        write_atomic(claim.path / "validation.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
        claim.commit()
        click.echo(f"wrote {out / 'validation.json'}")


def _reasons(skipped: list[dict[str, object]]) -> str:
    """Why rows were skipped, the commonest first with their counts (at most three, the rest counted)."""
    common = Counter(str(s["why"]) for s in skipped).most_common()
    shown = "; ".join(f"{n} x {why}" for why, n in common[:3])
    return shown + (f"; {len(common) - 3} other reasons" if len(common) > 3 else "")


@click.command(cls=Command)
@_source_options
@click.option("--run", "run_dir", type=click.Path(path_type=Path),
              help="Fit the per-step constant on this real run (a run folder, or a `vllm bench serve "
                   "--save-detailed` result file or a multi-turn benchmark CSV, with --gpu)...")
@click.option("--workload", type=click.Path(path_type=Path), help="...whose workload JSONL this is [default: derived from its requests.jsonl].")
@_bench_options
@_engine_options
@_sampling_option
@click.option("--calib-frac", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=1 / 3,
              show_default=True, help="Fit on the requests arriving in this first share of the run only.")
@click.option("--static-batch", type=click.Path(path_type=Path), help="Fit the per-step constant on static batches...")
@click.option("--hardware", default="Nvidia A100 GPU", show_default=True, help="...of this hardware (CSV column).")
@click.option("--vendor-fit", "vendor", is_flag=True,
              help="Static batches, first principles: fit a per-layer step overhead (layer_ns), per-sequence costs "
                   "(seq_ns, seq_gparam_ns per billion weights), tp_step_ns and decode attention reading KV per query "
                   "head (kv_bw) on one-GPU and TP rows at once, instead of fixed_ns: a stack like 2024 ROCm vLLM on "
                   "MI300X (transfer_fit.vendor_fit).")
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Step-cost TOML to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing --out file.")
def calibrate(profile: Path | None, cost: Path | None, gpu: str | None, model: str | None, tp: int | None,
              num_gpu_blocks: int | None, run_dir: Path | None, workload: Path | None, bench_seed: int | None,
              bench_rule: str | None, max_num_seqs: int | None, max_num_batched_tokens: int | None,
              kv_cache_dtype: str | None, async_scheduling: bool | None, cudagraph_mode: str | None,
              attention_backend: str | None, sampling: str | None, calib_frac: float,
              static_batch: Path | None,
              hardware: str, vendor: bool, out: Path, force: bool) -> None:
    """Fit a step-cost profile (TOML) and print the error per calibration point."""
    finite(calib_frac, "--calib-frac", gt=0, lt=1)
    if vendor and (static_batch is None or any(v is not None for v in (profile, cost, gpu, model))):
        raise UserError("--vendor-fit fits first-principles engine terms on every catalog model of --hardware: it goes "
                        "with --static-batch, without --profile, --step-cost, --gpu or --model")
    if run_dir is None and workload is None and static_batch is None:
        raise UserError("nothing to fit: give --run DIR [--workload FILE] (a real run) or --static-batch CSV")
    if kv_cache_dtype is not None and kv_cache_dtype.startswith("fp8") or attention_backend not in (None, "auto"):
        given = (f"--kv-cache-dtype {kv_cache_dtype}" if kv_cache_dtype is not None and kv_cache_dtype.startswith("fp8")
                 else f"--attention-backend {attention_backend}")
        raise UserError(f"{given}: {FP8_FIT}")
    source = _hardware(profile, cost, gpu, model, tp)
    # a run's meta.json names what --gpu / --model leave open: the whole source is checked once it is matched
    _as_options(engine_profile.check_names if run_dir is not None else engine_profile.check, source)
    for option, given in (("--run", run_dir), ("--workload", workload), ("--static-batch", static_batch),
                          ("--profile", profile), ("--step-cost", cost)):
        if given is not None and (resolved(out) == resolved(given) or resolved(given) in resolved(out).parents):
            raise UserError(f"--out {out}: is {'inside ' if resolved(out) != resolved(given) else ''}this command's "
                            f"{option} input; write the step costs to another file")  # --force would destroy it
    if out.exists() and not out.is_dir() and not force:
        raise UserError(f"--out {out}: exists (use --force to overwrite)")
    writable_file(out, "--out")
    if run_dir is None and workload is not None:
        raise UserError("--workload goes with --run")
    if run_dir is not None and static_batch is not None:
        raise UserError("fit on --run or on --static-batch, not both")
    if static_batch is not None:
        _refuse_run_options()
    elif click.get_current_context().get_parameter_source("hardware") is click.core.ParameterSource.COMMANDLINE:
        raise UserError(f"--hardware {hardware!r}: picks a --static-batch CSV's rows; a real run names its own GPU "
                        "(meta.json, or --gpu)")
    from dataclasses import replace

    import numpy as np

    if run_dir is not None:
        from llumverify.validation import replay as v

        source, kv_how, label, load = _real_run(run_dir, workload, source, tp is not None, num_gpu_blocks, (None, None),
                                                Redraw(bench_seed, bench_rule), calibrating=True,
                                                stated=_stated(max_num_seqs=max_num_seqs,
                                                               max_num_batched_tokens=max_num_batched_tokens,
                                                               kv_cache_dtype=kv_cache_dtype,
                                                               async_scheduling=async_scheduling,
                                                               cudagraph_mode=cudagraph_mode,
                                                               attention_backend=attention_backend))
        if source.kv_cache_dtype == "fp8" or (source.gpu and source.model
                                              and engine_profile.served_model(source.model, source).kv_format == "fp8"):
            raise UserError(f"{run_dir}: served an fp8 KV cache: {FP8_FIT}")
        if sampling is not None:
            source = replace(source, sampling=sampling)
            engine_profile.step_cost(source)  # a GPU without SM numbers is refused before the run is read
        run, lines = load()
        step = engine_profile.step_cost(source)
        calib, _ = v.split_ids(run, calib_frac)
        _refuse_unscorable(run, {"the calibration part": calib}, label)
        click.echo(wrap(f"KV cache: {kv_how}; tp = {source.tp}{_ranks(run, step)}"))  # after every check
        for line in lines:
            click.echo(wrap(line))
        fixed, tried = v.fit_fixed_ns(run, step, calib)
        target = float(np.nanmean(run.real["tpot"][calib]))
        click.echo(tabulate([[f, 1000 * t, 1000 * target, 100 * (t / target - 1)] for f, t in tried],
                            headers=["fixed_ns", "sim TPOT ms", "real TPOT ms", "err %"], floatfmt=".4g"))
        reached = min(tried, key=lambda p: abs(p[0] - fixed))[1]
        if abs(reached / target - 1) > FIT_TOLERANCE:
            if reached > target:  # too slow with no constant: a constant only adds time
                why = (f"with no per-step constant the step costs already simulate a mean TPOT of {1000 * reached:.3f} ms, "
                       f"{100 * (reached / target - 1):+.1f} % against the calibration part's {1000 * target:.3f} ms, and a "
                       "constant can only add time (validate shows this error uncalibrated"
                       + ("; the KV size was derived, not recorded: --num-gpu-blocks sets it" if "derived" in kv_how
                          else "") + ")")
            else:
                why = (f"even fixed_ns = {fixed} ns simulates a mean TPOT of {1000 * reached:.3f} ms against the "
                       f"calibration part's {1000 * target:.3f} ms: the step costs do not describe this run")
            raise UserError(f"fit failed: {why}; {out} not written")
        how = (f"fixed_ns fitted by bisection to the mean TPOT ({1000 * target:.3f} ms) of the {len(calib)} request{'' if len(calib) == 1 else 's'} of "
               f"{run_dir}: {v.split_description(run, calib_frac)}; " + (
                   "its requests sampled with top-p: the fit priced the sampler's sort, which these costs leave out "
                   "(replay such runs with --sampling top-p)" if source.sampling == "top-p" else
                   "its requests taken as greedy: any top-p sort they ran is in fixed_ns (calibrate --sampling top-p "
                   "prices it apart)"))
        error = f"calibration part mean TPOT {100 * (reached / target - 1):+.1f} % at the fitted fixed_ns"
    elif static_batch is not None and not source.given:  # engine terms for first principles on any GPU
        from llumverify.sim.roofline import load_efficiency
        from llumverify.validation.static_batch import static_rows
        from llumverify.validation.transfer_fit import TERMS, calibrate_static, engine_terms_toml

        rows, _ = static_rows(static_batch, source, hardware, tp=None)
        rows = [r for r in rows if r[0].framework in ("", "vLLM")]
        if not rows:
            raise UserError(f"{static_batch}: no vLLM rows of hardware {hardware!r} with a catalog GPU and model")
        eff, how = calibrate_static(rows, load_efficiency(), vendor)
        write_atomic(out, engine_terms_toml(eff, f"fitted on {hardware} rows of {static_batch}: {how}"))
        click.echo(f"{how}\n" + ", ".join(f"{k} = {getattr(eff, k)}" for k in TERMS)
                   + f"; wrote {out} (validate --static-batch --engine-terms {out})")
        return
    else:  # --static-batch with a profile or step-cost file
        from llumverify.validation.static_batch import fit_fixed_ns, measured_on, static_rows

        rows, _ = static_rows(static_batch, source, hardware)
        if not rows:
            raise UserError(f"{static_batch}: no rows of hardware {hardware!r} with a catalog GPU and model"
                            + measured_on(source))
        best, fixed, scores = fit_fixed_ns(rows, source, 20_000_000, 1_000_000, 100_000)
        click.echo(tabulate([[f, 100 * s] for s, f in scores], headers=["fixed_ns", "median APE %"], floatfmt=".3g"))
        if fixed >= 20_000_000:
            raise UserError(f"fit failed: the best fixed_ns is the grid's upper end (20 ms, median APE "
                            f"{100 * best:.1f} %); the step costs do not describe these batches; {out} not written")
        error = f"calibration rows median APE {100 * best:.1f} %"
        step = engine_profile.step_cost(source)
        how = (f"fixed_ns fitted by grid search to the median APE ({100 * best:.1f} %) of the {len(rows)} static "
               f"batches on {hardware} in {static_batch}")
    if source.profile:
        from llumverify.sim.catalog import get_model
        from llumverify.sim.profile import attention_fit_errors, profile_meta

        layers = get_model(source.model or profile_meta(source.profile).get("model", "")).layers
        errs = attention_fit_errors(source.profile, layers)
        click.echo("attention fit vs the profile's grid (median / P90 APE): " + ", ".join(
            f"{k} {100 * errs[f'{k}_median_ape']:.1f} / {100 * errs[f'{k}_p90_ape']:.1f} %"
            for k in ("prefill", "decode", "mixed") if f"{k}_median_ape" in errs))
    # the file holds the engine's costs: the run's graph mode and sampler are the replay's options, not the file's
    greedy = replace(source, sampling="greedy")
    base = engine_profile.step_cost(replace(greedy, cudagraph_mode="full_and_piecewise"))
    step = replace(engine_profile.step_cost(greedy), fixed_ns=fixed, graphless_step_ns=0, source=f"{base.source}; {how}",
                   error=error)
    write_atomic(out, step.to_toml())
    click.echo(f"fixed_ns = {step.fixed_ns}; wrote {out}")


@click.command("validation-report", cls=Command)
@click.option("--shared", type=click.Path(path_type=Path), default=None,
              help="The shared validation folder (default $LLUMVERIFY_VALIDATION, else ../shared/validation).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("reports/validation"), show_default=True)
@click.option("--public-csv", type=click.Path(path_type=Path), default=None,
              help="Also validate on a public static-batch CSV (argonne LLM-Inference-Bench Plots/All_results.csv): "
                   "leave-one-GPU-out, TP2/TP4, MoE, MI250, MI300X.")
@click.option("--public-ttft-csv", type=click.Path(path_type=Path), default=None,
              help="Also validate prefill on a public TTFT CSV (argonne LLM-Inference-Bench "
                   "Plots/Fig_22/all_results_TTFT_ITL.csv): the compute transfer rule, leave-one-GPU-out.")
def validation_report(shared: Path | None, out: Path, public_csv: Path | None, public_ttft_csv: Path | None) -> None:
    """Regenerate reports/validation/ from every real measurement in the shared folder."""
    from llumverify.validation.report import write_validation_report

    if shared is None:
        env = os.environ.get("LLUMVERIFY_VALIDATION")
        shared = Path(env) if env else Path("..") / "shared" / "validation"
    if not not_a_loop(shared, "--shared").is_dir():
        raise UserError(f"--shared {shared}: {'is a file, expected the validation folder' if shared.exists() else 'folder not found'}")
    for flag, path in (("--public-csv", public_csv), ("--public-ttft-csv", public_ttft_csv)):
        if path is not None and not not_a_loop(path, flag).is_file():
            if path.exists():
                regular_file(path, f"{flag} CSV")  # names a folder or device as one, not as missing
            raise UserError(f"{flag} {path}: file not found")
    # read both public files now (seconds), so a malformed one fails before sections 1-3 run
    if public_csv is not None:
        from llumverify.validation.static_batch import read_rows

        read_rows(public_csv)
    if public_ttft_csv is not None:
        from llumverify.validation.prefill import read_prefill_rows

        if not read_prefill_rows(public_ttft_csv)[0]:
            raise UserError(f"--public-ttft-csv {public_ttft_csv}: no one-GPU vLLM row with one output token on a "
                            "catalog GPU and model")
    with OutputDir(out, "--out", fresh=False) as claim:
        write_validation_report(shared, claim.path, public_csv, public_ttft_csv)
        claim.commit()
    click.echo(f"wrote {out / 'index.md'}")
