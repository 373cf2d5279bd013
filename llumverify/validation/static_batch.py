"""Static-batch latencies (the argonne LLM-Inference-Bench format), measured and simulated.

A row is B requests of L prompt tokens and L output tokens (argonne's `Input Output Length`; or,
as vLLM's benchmark_latency.py takes them, `Input Length` and `Output Length` columns) that start together on one instance of
`Num of Hardware` GPUs (tensor parallelism; boards of two GPUs for MI250, BOARD_DEVICES); its latency is the whole batch's. The simulator runs
each row on one `vllm-v1` instance of that TP degree whose KV capacity comes from the model and
GPU catalogs, with the StepCost given (one-GPU profiles scaled by sim/tensor_parallel.py).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from llumverify.sim import engine_profile
from llumverify.settings.config import ClusterConfig, EngineConfig, HardwareConfig, SimConfig
from llumverify.errors import UserError
from llumverify.files.inputs import (MAX_LENGTH_TOKENS, MAX_STATIC_BATCH, MAX_STATIC_REQUESTS, MAX_STATIC_TOKENS, finite,
                               parsed_int, regular_file)
from llumverify.requests import RequestSpec
from llumverify.sim.catalog import Model
from llumverify.sim.run import simulate
from llumverify.sim.stepcost import StepCost

# a static batch's time per output token: argonne's slowest row (Llama-2-70B on one MI300X) takes 2.2 s, so more than
# 5 s is a Latency in ms (1,200 for 1.2 s: 9.4 s a token at 128 tokens)
MAX_S_PER_TOKEN = 5
COLUMNS = ("Hardware", "Num of Hardware", "Model", "Batch Size", "Latency")  # and Framework if given (else vLLM)
KV_COLUMN = "KV Cache Dtype"  # optional: vLLM's --kv-cache-dtype of the row (auto, fp8, fp8_e4m3, fp8_e5m2)
# the lengths: argonne's one column (L prompt and L output tokens), or two (benchmark_latency.py's --input-len, --output-len)
ONE_LENGTH, TWO_LENGTHS = ("Input Output Length",), ("Input Length", "Output Length")


@dataclass(frozen=True)
class Row:
    """One measured static batch."""

    line: int
    hardware: str
    gpus: int
    model: str
    prompt: int  # tokens per request
    output: int
    batch: int
    latency_s: float
    framework: str = ""  # "" when the CSV has no Framework column: read as vLLM
    kv_cache_dtype: str = "auto"  # "auto" (the model's 16 bits) or "fp8": the optional KV Cache Dtype column


def read_rows(path: str | Path) -> list[Row]:
    """Every row of an argonne static-batch CSV; a bad row is a one-line error naming its line."""
    path = regular_file(Path(path), "static-batch CSV")
    rows, total, tokens = [], 0, 0
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise UserError(f"{path}: empty file")
            if len(set(header)) != len(header):
                raise UserError(f"{path}:1: duplicated column")
            lengths = [c for c in (ONE_LENGTH, TWO_LENGTHS) if set(c) & set(header)]
            if len(lengths) != 1:
                raise UserError(f"{path}:1: give the lengths as `{ONE_LENGTH[0]}` or as `{TWO_LENGTHS[0]}` and "
                                f"`{TWO_LENGTHS[1]}`" + (", not both" if lengths else ""))
            missing = [c for c in (*COLUMNS, *lengths[0]) if c not in header]
            if missing:
                raise UserError(f"{path}:1: missing column(s) {', '.join(missing)}")
            idx = {c: header.index(c) for c in (*COLUMNS, *lengths[0])}
            prompt_col, output_col = lengths[0][0], lengths[0][-1]
            for line, rec in enumerate(reader, 2):
                if not rec:
                    continue
                if len(rec) != len(header):
                    raise UserError(f"{path}:{line}: {len(rec)} fields, expected {len(header)}")
                at = f"{path}:{line}:"
                try:
                    latency = float(rec[idx["Latency"]])
                except ValueError:
                    raise UserError(f"{at} Latency must be a number, got {rec[idx['Latency']]!r}") from None
                row = Row(line, rec[idx["Hardware"]], parsed_int(rec[idx["Num of Hardware"]], f"{at} Num of Hardware"),
                          rec[idx["Model"]],
                          parsed_int(rec[idx[prompt_col]], f"{at} {prompt_col}", hi=MAX_LENGTH_TOKENS),
                          parsed_int(rec[idx[output_col]], f"{at} {output_col}", hi=MAX_LENGTH_TOKENS),
                          parsed_int(rec[idx["Batch Size"]], f"{at} Batch Size", hi=MAX_STATIC_BATCH),
                          finite(latency, f"{at} Latency", gt=0),
                          rec[header.index("Framework")] if "Framework" in header else "",
                          _kv_format(rec[header.index(KV_COLUMN)], at) if KV_COLUMN in header else "auto")
                if row.latency_s / row.output > MAX_S_PER_TOKEN:
                    raise UserError(f"{at} Latency {row.latency_s:g} s for {row.output} output tokens is over "
                                    f"{MAX_S_PER_TOKEN} s a token: milliseconds? (Latency is in seconds)")
                rows.append(row)
                total += row.batch
                tokens += row.batch * max(row.prompt, row.output)
                if total > MAX_STATIC_REQUESTS or tokens > MAX_STATIC_TOKENS:
                    raise UserError(f"{at} the batches up to here hold {total:,} requests of {tokens:,} tokens, over "
                                    f"the {MAX_STATIC_REQUESTS:,} requests or {MAX_STATIC_TOKENS:,} tokens a "
                                    "static-batch CSV may simulate")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    if not rows:
        raise UserError(f"{path}: no rows")
    return rows


def _kv_format(cell: str, at: str) -> str:
    """A KV Cache Dtype cell as the simulator names the format: auto (blank too) or fp8."""
    cell = cell.strip()
    if cell in ("", "auto", "bfloat16", "float16", "half"):
        return "auto"
    if cell.startswith("fp8"):
        return "fp8"
    raise UserError(f"{at} {KV_COLUMN} must be auto or an fp8 format (vLLM's --kv-cache-dtype), got {cell!r}")


def engine_for(num_blocks: int, max_num_batched_tokens: int = 8192) -> EngineConfig:
    """The engine a static-batch row runs on: vLLM's defaults of 2024 (256 sequences), no prefix reuse
    (every request of a row is independent)."""
    return EngineConfig(num_blocks=num_blocks, max_num_seqs=256, max_num_batched_tokens=max_num_batched_tokens,
                        generation="vllm-v1", prefix_caching=False)


def simulate_batch(line: int, batch: int, prompt: int, output: int, step: StepCost, engine: EngineConfig) -> float:
    """Simulated seconds from the start of `batch` requests of prompt / output tokens, started
    together on one instance, until the last one finishes; a request that cannot run is a
    UserError naming the CSV line."""
    specs = [RequestSpec(i, 0.0, prompt, output) for i in range(batch)]
    res = simulate(specs, "least-loaded", SimConfig(engine=engine, cluster=ClusterConfig(num_instances=1), step=step),
                   keep_records=True)
    bad = [r for r in res.records if r.status != "finished"]
    if bad:
        raise UserError(f"line {line}: {len(bad)} request(s) of the batch cannot run ({bad[0].status})")
    return max(r.finish_ns for r in res.records) / 1e9


def simulate_row(row: Row, step: StepCost, engine: EngineConfig) -> float:
    """Simulated seconds from the batch's start until its last request finishes."""
    return simulate_batch(row.line, row.batch, row.prompt, row.output, step, engine)


def errors(rows: list[Row], simulated: list[float]) -> dict[str, object]:
    """Per-row and median absolute percentage errors of the batch latency."""
    ape = [abs(s - r.latency_s) / r.latency_s for r, s in zip(rows, simulated)]
    return {"rows": [{"line": r.line, "hardware": r.hardware, "model": r.model, "prompt": r.prompt, "output": r.output,
                      "batch": r.batch, "real_s": r.latency_s, "sim_s": s, "ape": a}
                     for r, s, a in zip(rows, simulated, ape)],
            "median_ape": float(np.median(ape)) if ape else None, "n_rows": len(rows)}


# argonne's hardware column -> our GPU catalog (ALCF Polaris has A100-SXM4-40GB; its H100s are 80 GB SXM)
HARDWARE = {"Nvidia A100 GPU": "A100-40GB", "Nvidia H100 GPU": "H100"}
# argonne's `Num of Hardware` counts boards: an MI250 board is two GCDs, each one GPU to ROCm and vLLM, so its
# rows run at TP = 2 x the count (the MI250 run script passes --tensor-parallel-size 4 and 8 where the CSV has 2
# and 4 boards, and Llama-2-70B's 138 GB of weights have rows on 2 and 4 boards, never on one of 128 GB)
BOARD_DEVICES = {"MI250": 2}


def static_rows(csv_path: Path, source: HardwareConfig, hardware: str | None = None,
                tp: int | None = 1) -> tuple[list[tuple[Row, str, str]], list[dict[str, object]]]:
    """The rows this source can simulate (of `tp` GPUs; None: any), each with its GPU and model
    names, and the ones skipped (why: not in the catalogs, or the model does not fit)."""
    from llumverify.sim.catalog import get_gpu, get_model
    from llumverify.sim.roofline import check_tp, kv_capacity_blocks

    # a profile or step-cost file prices the GPU and model it was measured on: only their rows, as --gpu/--model pick
    want_gpu, want_model = (engine_profile.gpu_and_model(source) if source.profile or source.cost_file
                            else (source.gpu, source.model))
    try:
        given = get_model(want_model) if want_model else None
        want_gpu = get_gpu(want_gpu).name if want_gpu else ""
    except UserError as exc:  # a profile's or step-cost file's own GPU or model, which the catalogs lack
        what = source.profile or source.cost_file
        raise UserError(f"{what}: names an {exc}" if what else str(exc)) from None
    keep, skipped = [], []
    for row in read_rows(csv_path):
        if hardware is not None and row.hardware != hardware:
            continue
        gpu_name = HARDWARE.get(row.hardware)
        try:
            g = get_gpu(gpu_name or row.hardware).name
            m = _row_model(row.model, given, want_model)
        except UserError as exc:
            skipped.append({"line": row.line, "why": str(exc).split(" (known")[0]})
            continue
        row = replace(row, gpus=row.gpus * BOARD_DEVICES.get(g, 1))
        if (want_gpu and want_gpu != g) or m is None or (tp is not None and row.gpus != tp):
            continue
        try:
            check_tp(get_model(m), row.gpus)
            kv_capacity_blocks(row_model(row, m), g, tp=row.gpus)
        except UserError as exc:
            skipped.append({"line": row.line, "why": str(exc)})
            continue
        keep.append((row, g, m))
    return keep, skipped


def measured_on(source: HardwareConfig) -> str:
    """Why a profile or step-cost file leaves a CSV's rows out (static_rows keeps only its GPU and model's), for the
    error that finds none; "" for first principles."""
    if not (source.profile or source.cost_file):
        return ""
    gpu, model = engine_profile.gpu_and_model(source)
    what = f"profile {source.profile}" if source.profile else f"step-cost file {source.cost_file}"
    return f": {what} prices {model or 'its model'} on {gpu or 'its GPU'}, and no row ran that"


def _row_model(name: str, given: Model | None, given_as: str) -> str | None:
    """What a row's Model cell is priced as (a catalog name, or a config.json path: sim/hf_config.py),
    None when --model (`given`, spelt `given_as`) leaves the row out. --model as a config picks the
    rows that name it (its name, or its path); as a catalog name, the rows of that entry in its
    weight format."""
    from llumverify.sim.catalog import get_model, normalize, same_shapes

    if given is not None and given.config_file:
        if normalize(name, "model") == normalize(given.name, "model"):
            try:
                listed = get_model(name)
            except UserError:
                return given_as
            if not same_shapes(listed, given):  # as validate RUN --model refuses it
                raise UserError(f"--model {given_as} is named {given.name!r}, but its shapes differ from the "
                                f"catalog's {listed.name}")
            return given_as
        try:
            return given_as if get_model(name).config_file == given.config_file else None
        except UserError:
            return None
    model = get_model(name)
    if given is not None and (model.name, model.weight_format) != (given.name, given.weight_format):
        return None  # another model, or the same one in another weight format (-FP8 or not)
    return priced_name(model)


def priced_name(model: Model) -> str:
    """How a row's model is named for pricing: its config file, else its catalog name with the
    checkpoint's weight format kept (a -FP8, -FP8-KV, -AWQ or -NVFP4 checkpoint is not the 16-bit model)."""
    from llumverify.sim.checkpoint_names import with_format

    if model.config_file:
        return model.config_file
    return with_format(model.name, model.weight_format)


def row_model(row: Row, m: str) -> Model:
    """The catalog model `m` served as the row ran it: its checkpoint's weights, the row's KV format."""
    return engine_profile.served_model(m, HardwareConfig(kv_cache_dtype=row.kv_cache_dtype))


def price_rows(rows: list[tuple[Row, str, str]], step_for: Callable[[Row, str, Model], StepCost]) -> list[float]:
    """Each row's simulated latency at its own TP degree, its model served with the row's KV format:
    step_for(row, GPU, model) prices its steps; the KV blocks are the catalogs'."""
    from llumverify.sim.roofline import kv_capacity_blocks

    out, cache = [], {}
    for row, g, m in rows:
        key = (g, m, row.gpus, row.kv_cache_dtype)
        if key not in cache:
            model = row_model(row, m)
            cache[key] = (step_for(row, g, model), engine_for(kv_capacity_blocks(model, g, tp=row.gpus)))
        out.append(simulate_row(row, *cache[key]))
    return out


def simulate_static(rows: list[tuple[Row, str, str]], source: HardwareConfig, fixed_ns: int | None) -> list[float]:
    """Each row's simulated latency: first principles for its GPU and model unless a source is given."""
    def step_for(row: Row, g: str, model: Model) -> StepCost:
        src = (replace(source, tp=row.gpus) if source.profile or source.cost_file
               else HardwareConfig(gpu=g, model=priced_name(model), tp=row.gpus, kv_cache_dtype=row.kv_cache_dtype))
        return engine_profile.step_cost(src, fixed_ns)

    return price_rows(rows, step_for)


def fit_fixed_ns(rows: list[tuple[Row, str, str]], source: HardwareConfig, coarse_max: int, coarse_step: int,
                 fine_step: int) -> tuple[float, int, list[tuple[float, int]]]:
    """The per-step constant minimising the rows' median APE: a coarse grid 0..coarse_max, then a fine
    grid of fine_step within one coarse step of the best. Returns (median APE, fixed_ns, coarse scores)."""
    real = np.array([r.latency_s for r, _, _ in rows])

    def median_ape(fixed: int) -> float:
        return float(np.median(np.abs(np.array(simulate_static(rows, source, fixed)) - real) / real))

    coarse = [(median_ape(f), f) for f in range(0, coarse_max + 1, coarse_step)]
    best = min(coarse)
    lo, hi = max(0, best[1] - coarse_step), best[1] + coarse_step
    best = min([(median_ape(f), f) for f in range(lo, hi + 1, fine_step)] + [best])
    return best[0], best[1], coarse
