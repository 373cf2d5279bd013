"""Public serving runs: vLLM v0.15.1 on H100 (and A100-80GB, L40S) under steady and stepped load, to calibrate and validate on.

inference-sim/sim-to-real-accuracy-validation compares serving simulators with real vLLM v0.15.1 runs
(max_model_len 4,096, chunked prefill, prefix caching, max_num_seqs 128). It publishes each run's
measured full-run aggregates (the `actual` column of `results_trainval/error_records.csv` at dcec3fd
and of `results_iter36/error_records.csv` at b70edb9: E2E, TTFT and mean ITL in ms, measured at the
client), not the per-request traces. Not used: `results/llmservingsim_error_records_matched.csv`
(dcec3fd), whose `actual` is a 300-request subset (its results/figure_captions.md) computed outside the
repository's code; for run 9 its E2E P90 (10.6 s) exceeds that run's own whole-run p99.9 (9.7 s,
inference-sim/training's 20260218-130541 folder), so it is not a subset of the published requests.
Their ITL is per token the client counted in the streamed text; it is compared here per generated
token (`per_token_itl`). The runs' workloads are inference-perf "shared prefix"
workloads of six kinds (WORKLOADS); we regenerate each from its published shape (fixed lengths,
requests at a constant rate per stage, inference_perf.shared_prefix_specs) and simulate one vllm-v1
instance with the run's GPU, model, TP degree, token budget and memory share, KV blocks derived from
the catalogs, first-principles step costs (`predict`). Two numbers are fitted on one set of runs,
the other set held out: the client's own time per request (`fit_client_ms`, beside the shipped time
per prompt token, client_time.py; printed, not used), and the engine's own time per step (`fit_step_ns`,
Efficiency.fixed_ns: what `llumverify calibrate --run` fits on a user's run), scored beside first
principles' fixed_ns 0.

Open loop, as the runs sent: their profiles ask for multi-turn chat with per-group users, but the
inference-perf that ran did not read those keys. Every config it dumped (inference-sim/training's 16
folders of these runs) has no multi-turn field and its generator's defaults, 10 groups of 10 prompts
(PROMPT_POOL); and each stage's requests succeeded at its full rate, which the profiles' users could
not have sent (run 9: 20.0 of 20 req/s, where 45 users at its 5.1 s E2E send at most 9; the training
folder 20260217-231439's stage 1: 12,000 requests in 600 s at 20 req/s, where 45 users with that
stage's 4.16 s mean E2E send at most 10.8 req/s). Each request is one prompt of the nominal length
(system prompt + question; the training folders' clients count about 4 % more, their own
re-tokenisation). Not modelled: KV offloading to CPU (`cpu_offload`).

How the requests sampled: inference-perf's completion requests name no temperature or top_p (the dumped
configs' `api.type: completion`; kubernetes-sigs/inference-perf inference_perf/apis/completion.py sends
model, prompt, max_tokens, ignore_eos and stream), so vLLM 0.15.1 (`--generation-config auto`, the
default since 0.8) applied each checkpoint's generation_config.json: GENERATION_DEFAULTS says which
sort the logits (top_p < 1: sim/sampling.py, `sampling = "top-p"`) and where that is read. Its one
number, Efficiency.topp_sort_ns, is fitted on the calibration runs (`fit_sort_ns`) and shipped.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.inputs import csv_records
from llumverify.requests import RequestSpec
from llumverify.settings.config import HardwareConfig
from llumverify.sim.roofline import Efficiency
from llumverify.validation.client_time import ClientTime
from llumverify.validation.inference_perf import shared_prefix_specs

METRICS = ("e2e_mean", "e2e_p90", "ttft_mean", "ttft_p90", "itl_mean")
STAGE_METRICS = ("e2e_mean", "ttft_mean")  # a load stage's, for its time per output token
COLUMNS = ("experiment_folder", "model", "metric_name", "actual", "stage_index", "hardware", "tp",
           "max_num_batched_tokens")
MAX_ROWS = 100_000
BLOCK = 16
GPU = "H100"  # the calibration runs' GPU; validation runs name theirs (`hardware`)
PROMPT_POOL = (10, 10)  # (groups, prompts per group): the generator defaults every dumped config shows
CLIENT_MS_GRID = np.round(np.arange(0.0, 30.01, 0.5), 1)  # grid of the client's own time per request
STEP_NS_GRID = tuple(range(0, 3_000_001, 250_000))  # grid of the engine's own time per step (fitted, fit_step_ns)


@dataclass(frozen=True)
class Workload:
    """An inference-perf shared-prefix workload as published: a system prompt of `system` tokens plus
    a question of `question` tokens, `output` tokens out; `stages` of (requests per second, seconds),
    requests at a constant rate."""

    system: int
    question: int
    output: int
    stages: tuple[tuple[float, float], ...]
    source: str


# Shapes from inference-sim/inference-sim testdata/trained_physics_iter29.json (f90a1e3; the experiment
# ids named) and the repository's design note (docs/plans/2026-03-04-sim-to-real-accuracy-validation-design.md).
WORKLOADS: dict[str, Workload] = {
    "general": Workload(100, 447, 248, ((8.0, 600.0), (20.0, 600.0)), "iter29 experiment 20260217-231439"),
    "general-lite": Workload(100, 447, 248, ((2.5, 600.0), (6.0, 600.0)), "iter29 experiments 17, 60, 62, 65"),
    "codegen": Workload(100, 466, 247, ((5.0, 600.0), (10.0, 600.0)), "iter29 experiments 20, 61, 63"),
    "roleplay": Workload(150, 600, 251, ((6.0, 1200.0),), "iter29 experiments 21, 64"),
    "reasoning-lite": Workload(100, 934, 1448, ((1.0, 1200.0),), "iter29 experiments 48, 66, 67"),
    "reasoning": Workload(100, 934, 1448, ((4.0, 1200.0),), "design note: reasoning at 4 req/s, 1,200 s"),
}
_KIND = re.compile(r"-tp\d+-(general-lite|reasoning-lite|general|codegen|roleplay|reasoning)(?:-|$)")


# How each checkpoint's generation_config.json makes vLLM sample a request that sets nothing (sim/sampling.py):
# "top-p" where it sets top_p < 1, "greedy" where it sets no sampling key (vLLM's defaults: temperature 1, top_p 1,
# an exponential-race argmax, no sort); the evidence beside each.
GENERATION_DEFAULTS = {
    # temperature 0.6, top_p 0.9: a verbatim copy, pypi-data/pypi-mirror-300 01da93a, packages/fastmindapi/
    # fastmindapi-0.0.9.tar.gz/fastmindapi-0.0.9/DEVELOPMENT.md ("Meta-Llama-3_1-8B-Instruct")
    "meta-llama/llama-3.1-8b-instruct": "top-p",
    # the same file as the 8B's in its published quantised copies (Hugging Face bartowski/Meta-Llama-3.1-70B-Instruct-exl2)
    "meta-llama/llama-3.1-70b-instruct": "top-p",
    # "Temperature=0.6, TopP=0.95, TopK=20, and MinP=0 (the default setting in generation_config.json)": the model card
    "qwen/qwen3-14b": "top-p",
    # temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05 (the penalty is not modelled): a copy on Hugging Face,
    # superllms/Qwen2.5-7B-Instruct_ec9b48da bfd6ff7
    "qwen/qwen2.5-7b-instruct": "top-p",
    # top_p 0.6 in the July 2023 file (HamZil/Llama-2-7b-hf 3f025b66, generation_config.json), 0.9 in later copies:
    # below 1 either way; the 70B's file is not found, taken to be its 7B sibling's
    "meta-llama/llama-2-7b-hf": "top-p",
    "meta-llama/llama-2-70b-hf": "top-p",
    # not found: taken to be Meta's Llama 4 defaults (temperature 0.6, top_p 0.9), which llm-compressor's FP8
    # checkpoints copy; the fit without these runs is in sim/efficiency.toml
    "redhatai/llama-4-scout-17b-16e-instruct-fp8-dynamic": "top-p",
    # no sampling keys: the Hugging Face files (CodeLlama-34b-Instruct-hf 2d42490, Mixtral-8x7B-v0.1 4dd4b0f), the
    # conversions of Mixtral-8x22B-v0.1 (mistral-community ab1e8c1) and of Mistral-Nemo-Instruct-2407
    # (unsloth 78cd939), Yi-34B's sibling 01-ai/Yi-34B-200K 6952531; Mixtral-8x22B-Instruct-v0.1's not found
    "codellama/codellama-34b-instruct-hf": "greedy",
    "mistralai/mixtral-8x7b-v0.1": "greedy",
    "mistralai/mixtral-8x22b-v0.1": "greedy",
    "mistralai/mixtral-8x22b-instruct-v0.1": "greedy",
    "mistralai/mistral-nemo-instruct-2407": "greedy",
    "01-ai/yi-34b": "greedy",
}
SORT_NS_GRID = tuple(range(0, 40_001, 2_000))


def checkpoint_sampling(model: str) -> str:
    """How vLLM sampled a request of `model`'s checkpoint that set no sampling key (GENERATION_DEFAULTS); a
    checkpoint not listed is a one-line UserError, not a guess."""
    if model.lower() not in GENERATION_DEFAULTS:
        raise UserError(f"how {model} samples is not known (public_serving.GENERATION_DEFAULTS)")
    return GENERATION_DEFAULTS[model.lower()]  # grid of the top-p sort per sequence at H100 (fit_sort_ns)


@dataclass(frozen=True)
class Experiment:
    """One published run: what it served on, its workload kind and its measured aggregates (ms)."""

    name: str
    model: str
    gpu: str
    tp: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    cpu_offload: bool
    workload: str
    actual: dict[str, float]  # itl_mean: per generated token (per_token_itl), not the file's
    stage_itl: tuple[float, ...] = ()  # each load stage's time per output token, where the file has every stage's means
    itl_published: float = 0.0  # the file's own itl_mean (per token the client counted)
    sampling: str = "greedy"  # how its checkpoint's generation_config.json made vLLM sample (GENERATION_DEFAULTS)


def per_token_itl(actual: dict[str, float], output: int, name: str) -> float:
    """The measured decode time per generated token, (E2E mean - TTFT mean) / (output - 1).

    Not a separate measurement: like the files' own itl_mean it is derived from their E2E and TTFT
    means, and since every request generates `output` tokens its error is that of E2E - TTFT. The
    files' itl_mean divides by (mean output_len - 1), output_len being the tokens the client counted
    in the streamed text (sim-to-real-accuracy-validation dcec3fd, experiment/ground_truth.py). The
    server generated `output` tokens a request (inference-perf sends max_tokens with ignore_eos), but
    the text can re-tokenise into fewer: in inference-sim/training's stage files (the one run in both
    sources and its siblings), Llama-2-7B's client counted 194-210 of 247-251, 1 % at 3-7 or fewer,
    while the fastest request took 1.5-2.3 s and the stream's chunks per request tracked the
    generated tokens (each file's time_per_output_token is (E2E - TTFT) / (output - 1) / 2.00-2.02,
    as in the runs whose count matched): none stopped early. So the files' ITL is up to 37 % longer
    than the time per token (Qwen3-14B codegen). For runs without stage files, ignore_eos is assumed.
    """
    gap = actual["e2e_mean"] - actual["ttft_mean"]
    if not gap > 0 or output < 2:
        raise UserError(f"{name}: E2E mean {actual['e2e_mean']} must exceed TTFT mean {actual['ttft_mean']} "
                        f"to give a time per output token")
    return gap / (output - 1)


def read_experiments(paths: Sequence[Path]) -> tuple[list[Experiment], list[str]]:
    """Every run of the files on a catalog GPU whose summary aggregates (stage_index -1) are complete, and why each
    other run was left out; a malformed file is a one-line UserError."""
    runs: dict[str, dict] = {}
    for path in paths:
        for line, rec in csv_records(path, "sim-to-real error-records CSV", COLUMNS, MAX_ROWS):
            _add(runs, rec, path, line)
    experiments, skipped = [], []
    for name, run in sorted(runs.items()):
        why = _unusable(run)
        if why:
            skipped.append(f"{name}: {why}")
        else:
            stages, w = run["stages"], WORKLOADS[run["workload"]]
            n = len(w.stages)
            every = n > 1 and sorted(stages) == list(range(n)) and all(set(STAGE_METRICS) <= set(v) for v in stages.values())
            itl = tuple(per_token_itl(stages[k], w.output, f"{name} stage {k}") for k in range(n)) if every else ()
            experiments.append(Experiment(name, run["model"], run["hardware"], run["tp"], run["mbt"], run["util"], run["offload"],
                                          run["workload"], {**run["actual"], "itl_mean": per_token_itl(
                                              run["actual"], w.output, name)}, itl, run["actual"]["itl_mean"],
                                          checkpoint_sampling(run["model"])))
    return experiments, skipped


def _add(runs: dict[str, dict], rec: dict, path: Path, line: int) -> None:
    """One row: a metric of a run's summary (stage_index -1), or a stage's mean E2E or TTFT (its time
    per output token, per_token_itl)."""
    stage = rec["stage_index"].strip()
    if rec["metric_name"] not in METRICS or not (stage == "-1" or (stage.isdigit() and rec["metric_name"] in STAGE_METRICS)):
        return
    name = Path(rec["experiment_folder"].replace("\\", "/")).name
    try:
        actual = float(rec["actual"])
        tp = int(float(rec["tp"] or "nan"))
        mbt = int(float(rec["max_num_batched_tokens"] or "nan"))
        util = float(rec.get("gpu_mem_util") or 0.9)
    except ValueError:
        raise UserError(f"{path}:{line}: actual, tp, max_num_batched_tokens and gpu_mem_util must be numbers") from None
    if not math.isfinite(actual) or actual <= 0 or tp < 1 or mbt < 1 or not 0 < util <= 1:
        raise UserError(f"{path}:{line}: actual must be > 0, tp and max_num_batched_tokens >= 1, gpu_mem_util in (0, 1]")
    run = runs.setdefault(name, {"model": rec["model"], "tp": tp, "mbt": mbt, "hardware": rec["hardware"],
                                 "util": util, "offload": (rec.get("cpu_offload") or "").strip().lower() == "true",
                                 "workload": _kind(name, rec.get("workload") or ""), "actual": {}, "stages": {}})
    where = run["actual"] if stage == "-1" else run["stages"].setdefault(int(stage), {})
    previous = where.setdefault(rec["metric_name"], actual)
    if previous != actual:
        raise UserError(f"{path}:{line}: {name} {rec['metric_name']} is {actual}, earlier {previous}")


def _kind(name: str, column: str) -> str:
    """The workload kind of a run. The files label some runs "general" in one place and "general-lite"
    in the other (the folder name, or the `workload` column); the shapes of the two published ids
    where they disagree (17: iter29's 2.5 -> 6 req/s; 27: a lighter load than its general siblings)
    are the lite ones, so either label saying "-lite" makes it lite."""
    found = _KIND.search(name)
    kind = found.group(1) if found else (column if column in WORKLOADS else "")
    lite = f"{kind}-lite"
    return lite if lite in WORKLOADS and (column == lite or name.find(lite) >= 0) else kind


def _unusable(run: dict) -> str:
    from llumverify.sim.catalog import get_gpu, get_model

    try:
        get_gpu(run["hardware"])
    except UserError:
        return f"GPU {run['hardware']} not in the catalog"
    if not run["workload"]:
        return "workload kind not in its name"
    if set(run["actual"]) != set(METRICS):
        return f"summary lacks {sorted(set(METRICS) - set(run['actual']))}"
    try:
        get_model(run["model"])
    except UserError:
        return f"model {run['model']} not in the catalog"
    try:
        checkpoint_sampling(run["model"])
    except UserError as e:
        return str(e)
    return ""


def workload_specs(kind: str) -> list[RequestSpec]:
    """The requests of a workload kind as inference-perf sent them: open loop at each stage's rate,
    prompts from PROMPT_POOL, each the nominal system prompt + question long."""
    w = WORKLOADS[kind]
    return shared_prefix_specs(*PROMPT_POOL, w.system, w.output,
                               [(rate, seconds, round(rate * seconds), w.system + w.question) for rate, seconds in w.stages])


def predict(exp: Experiment, eff: Efficiency | None = None) -> dict[str, float]:
    """The simulated aggregates (ms, engine view: from each send) of one run, METRICS plus
    `itl_stage{k}` (mean ITL of the requests arriving in load stage k): first principles on the
    run's GPU with `eff` (default: the shipped efficiencies)."""
    w = WORKLOADS[exp.workload]
    served = simulate_served(exp.name, exp.model, exp.gpu, exp.tp, exp.max_num_batched_tokens,
                             exp.gpu_memory_utilization, workload_specs(exp.workload), [s for _, s in w.stages], eff,
                             sampling=exp.sampling)
    e2e, ttft, itl, multi = served.e2e, served.ttft, served.itl, served.output > 1
    return {"e2e_mean": float(e2e.mean()), "e2e_p90": float(np.percentile(e2e, 90)),
            "ttft_mean": float(ttft.mean()), "ttft_p90": float(np.percentile(ttft, 90)),
            "itl_mean": float(itl[multi].mean()),
            **{f"itl_stage{k}": float(itl[multi & (served.stage == k)].mean()) for k in range(len(w.stages))}}


@dataclass(frozen=True)
class Served:
    """Every finished request of a simulated run, in ms from its send: E2E, TTFT, mean ITL, its output
    tokens and the load stage it was sent in."""

    e2e: np.ndarray
    ttft: np.ndarray
    itl: np.ndarray
    output: np.ndarray
    stage: np.ndarray


def simulate_served(name: str, model_name: str, gpu: str, tp: int, max_num_batched_tokens: int,
                    gpu_memory_utilization: float, specs: Sequence[RequestSpec], stage_seconds: Sequence[float],
                    eff: Efficiency | None = None, max_num_seqs: int = 128, async_scheduling: bool = True,
                    sampling: str = "greedy") -> Served:
    """One vllm-v1 instance on the catalog's `gpu` serving `specs` as sent (open loop): first principles
    (with `sampling`'s sampler, sim/sampling.py), KV blocks from the catalogs at that memory share, load
    stages `stage_seconds` long; per request in the order of `specs`; a request that does not finish is
    a UserError naming the run."""
    from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.engine_profile import served_model
    from llumverify.sim.roofline import kv_capacity_blocks, load_efficiency, step_cost_first_principles
    from llumverify.sim.run import simulate
    from llumverify.sim.sampling import with_sampling

    eff = eff or load_efficiency()
    model = served_model(model_name, HardwareConfig(gpu=gpu, model=model_name, tp=tp))
    step = with_sampling(step_cost_first_principles(model, gpu, tp=tp, eff=eff), sampling, eff.topp_sort_ns,
                         get_gpu(gpu), model.vocab)
    blocks = kv_capacity_blocks(model, gpu, tp=tp, gpu_memory_utilization=gpu_memory_utilization, block_size=BLOCK)
    engine = EngineConfig(generation="vllm-v1", num_blocks=blocks, block_size=BLOCK, max_num_seqs=max_num_seqs,
                          max_num_batched_tokens=max_num_batched_tokens, async_scheduling=async_scheduling)
    cfg = SimConfig(engine=engine, cluster=ClusterConfig(num_instances=1), step=step)
    res = simulate(specs, "round-robin", cfg, keep_records=True)
    recs = sorted((r for r in res.records if r.status == "finished"), key=lambda r: r.id)  # in the order of `specs`
    if len(recs) != len(res.records):
        raise UserError(f"{name}: {len(res.records) - len(recs)} requests did not finish in the simulation")
    arr = np.array([r.arrival_ns for r in recs], dtype=np.float64)
    first = np.array([r.first_token_ns for r in recs], dtype=np.float64)
    fin = np.array([r.finish_ns for r in recs], dtype=np.float64)
    out = np.array([r.output for r in recs], dtype=np.float64)
    starts = np.cumsum([0.0, *stage_seconds]) * 1e9
    return Served((fin - arr) / 1e6, (first - arr) / 1e6, (fin - first) / np.maximum(out - 1, 1) / 1e6, out,
                  np.searchsorted(starts, arr, side="right") - 1)


def at_client(sim: dict[str, float], client: ClientTime, prompt_tokens: int) -> dict[str, float]:
    """`sim` as the harness's client sees it: its own time (HTTP, tokenising, streaming the first
    token back) added to every TTFT and E2E, so to their means and P90s (every prompt of a workload
    has its nominal length, so the per-token part is one number too); ITL is unchanged."""
    add = 1e3 * client.seconds(prompt_tokens)
    return {m: v + (add if m.startswith(("ttft", "e2e")) else 0.0) for m, v in sim.items()}


def prompt_tokens(run: Experiment) -> int:
    """The nominal prompt of the run's workload: system prompt + question."""
    w = WORKLOADS[run.workload]
    return w.system + w.question


def errors(runs: Sequence[Experiment], sims: Sequence[dict[str, float]], client: ClientTime) -> dict[str, np.ndarray]:
    """Signed error (simulated / measured - 1) per metric over the runs."""
    seen = [at_client(s, client, prompt_tokens(r)) for r, s in zip(runs, sims)]
    return {m: np.array([s[m] / r.actual[m] - 1 for r, s in zip(runs, seen)]) for m in METRICS}


def score(errs: dict[str, np.ndarray]) -> float:
    """What the fit minimises: the mean over the metrics of their median APE."""
    return float(np.mean([np.median(np.abs(e)) for e in errs.values()]))


def fit_client_ms(runs: Sequence[Experiment], sims: Sequence[dict[str, float]], per_token_s: float) -> float:
    """The client's own time per request (CLIENT_MS_GRID grid), beside `per_token_s` per prompt token,
    that makes `sims` of `runs` score lowest; 0 is a bound (no client time), a best point on the grid's
    upper edge is an error (the grid does not hold the fit)."""
    if not runs:
        raise UserError("no calibration runs to fit the client's time on")
    scores = [score(errors(runs, sims, ClientTime(float(c) / 1e3, per_token_s))) for c in CLIENT_MS_GRID]
    best = int(np.argmin(scores))
    if best == len(CLIENT_MS_GRID) - 1:
        raise UserError(f"the client-time fit ended on its grid's edge ({CLIENT_MS_GRID[best]} ms)")
    return float(CLIENT_MS_GRID[best])


def fit_sort_ns(runs: Sequence[Experiment], eff: Efficiency, client: ClientTime) -> tuple[int, dict[int, float]]:
    """The top-p sort per sequence at H100 (Efficiency.topp_sort_ns on SORT_NS_GRID, sim/sampling.py) that makes
    `runs`, simulated from first principles with `eff` and seen through `client`, score lowest, and each grid
    point's score (every point is tried: the scores are not convex; only the top-p runs are replayed at each). 0 is
    a bound; a best point on the grid's upper edge is an error (the grid does not hold it)."""
    if not any(r.sampling == "top-p" for r in runs):
        raise UserError("no calibration run samples with top-p: nothing to fit the top-p sort on")
    fixed = {r.name: predict(r, eff) for r in runs if r.sampling != "top-p"}
    scores = {}
    for ns in SORT_NS_GRID:
        at = dataclasses.replace(eff, topp_sort_ns=ns)
        scores[ns] = score(errors(runs, [fixed[r.name] if r.name in fixed else predict(r, at) for r in runs], client))
    best = min(scores, key=scores.__getitem__)
    if best == SORT_NS_GRID[-1]:
        raise UserError(f"the top-p sort fit ended on its grid's edge ({best / 1e3:g} us)")
    return best, scores


def fit_step_ns(runs: Sequence[Experiment], eff: Efficiency,
                client: ClientTime) -> tuple[int, dict[int, float], list[dict[str, float]]]:
    """The engine's own time per step (Efficiency.fixed_ns on STEP_NS_GRID) that makes `runs`, simulated
    from first principles with `eff` and seen through `client`, score lowest, each tried point's score,
    and the runs' simulations at the best. The scores are walked up from 0 and stop two points past the
    lowest (each point replays every run); 0 is a bound, a best point on the grid's upper edge is an
    error (the grid does not hold it)."""
    if not runs:
        raise UserError("no calibration runs to fit the engine's time per step on")
    scores: dict[int, float] = {}
    sims: dict[int, list[dict[str, float]]] = {}
    for step in STEP_NS_GRID:
        sims[step] = [predict(r, dataclasses.replace(eff, fixed_ns=step)) for r in runs]
        scores[step] = score(errors(runs, sims[step], client))
        best = min(scores, key=scores.__getitem__)
        if step - best >= 2 * STEP_NS_GRID[1]:
            return best, scores, sims[best]
    raise UserError(f"the step-time fit ended on its grid's edge ({STEP_NS_GRID[-1] / 1e6:g} ms)")
