"""A `vllm bench serve --save-result --save-detailed` result file, read as a real run.

vLLM's serving benchmark writes one JSON object: the model it served (`model_id`) and, per request,
its prompt and output lengths (`input_lens`, `output_lens`), when the client sent it (`start_times`,
seconds on the client's clock), its TTFT (`ttfts`, seconds), the gaps between its streamed chunks
(`itls`, seconds) and an error (`errors`, empty on success). Every time is measured at the client,
and the file records neither the GPU nor the engine's settings. So validate takes the GPU from
--gpu (or the profile / step-cost file), TP from --tp (default 1), the model from `model_id` (or
--model), vLLM's `vllm serve` defaults for the GPU's batch limits and prefix caching, the KV cache
from the catalogs (or --num-gpu-blocks), and adds the client's own time per request to the
simulated TTFT and E2E (--client-ms, default CLIENT_MS). No prompt hashes: no prefix-cache hit is
simulated.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.paths import read_json_object
from llumverify.requests import RequestSpec
from llumverify.settings.config import HardwareConfig
from llumverify.validation.replay import METRICS, RealRun, check_replay_size
from llumverify.validation.run_engine import engine_settings
from llumverify.validation.run_hardware import kv_blocks_for_run, run_hardware, source_for_run

# The client's own time per request (API server, tokenisation, streaming), ms: fitted on the 13
# calibration runs of vLLM v0.15.1 serving on H100 (benchmarks/public_serving.py,
# reports/validation/public-serving/results.json `client_ms`); a harness measures it, the engine does not.
CLIENT_MS = 8.0
BENCH_WORKLOAD = "the result file's requests"  # what validation.json names as a result file's workload
RUN_FOLDER_FILES = ("meta.json", "requests.jsonl", "timeseries.csv", "cluster-config.json")  # replay.py's layout
ARRAYS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "errors")


def is_bench_result(path: Path) -> bool:
    """A run given as a file (a run folder is a directory): a vllm bench serve result."""
    return path.is_file()


def _arrays(doc: dict, path: Path) -> dict[str, list]:
    """The per-request lists, all present and of one length."""
    missing = [k for k in ARRAYS if k not in doc]
    if missing:
        why = (" (per-request send times: written by newer `vllm bench serve --save-detailed`)"
               if missing == ["start_times"] else " (write it with `vllm bench serve --save-result --save-detailed`)")
        raise UserError(f"{path}: not a detailed vllm bench serve result: no {', '.join(missing)}{why}")
    lists = {k: doc[k] for k in ARRAYS}
    bad = next((k for k, v in lists.items() if not isinstance(v, list)), None)
    if bad:
        raise UserError(f"{path}: {bad} must be a list, got {type(lists[bad]).__name__}")
    sizes = {k: len(v) for k, v in lists.items()}
    if len(set(sizes.values())) != 1:
        counts = ", ".join(f"{k} {n}" for k, n in sizes.items())
        raise UserError(f"{path}: per-request lists of different lengths ({counts})")
    if not sizes["input_lens"]:
        raise UserError(f"{path}: no requests")
    return lists


def _number(path: Path, key: str, i: int, value: object, positive_int: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UserError(f"{path}: {key}[{i}] must be a finite number >= 0, got {value!r}")
    if positive_int and (value != int(value) or value < 1):
        raise UserError(f"{path}: {key}[{i}] must be a positive integer, got {value!r}")
    return float(value)


def _requests(path: Path, lists: dict[str, list]) -> tuple[list[int], tuple[RequestSpec, ...], dict[str, np.ndarray]]:
    """(file indices in send order, specs in that order, measured seconds per metric in that order)."""
    failed = [i for i, e in enumerate(lists["errors"]) if e not in ("", None)]
    if failed:
        raise UserError(f"{path}: {len(failed)} of {len(lists['errors'])} requests failed (first: request {failed[0]}: "
                        f"{str(lists['errors'][failed[0]])[:80]!r}); their lengths and times are unknown, so the "
                        "run cannot be replayed")
    n = len(lists["input_lens"])
    sent = [_number(path, "start_times", i, lists["start_times"][i]) for i in range(n)]
    order = sorted(range(n), key=lambda i: (sent[i], i))
    specs, real = [], {m: np.empty(n) for m in METRICS}
    for k, i in enumerate(order):
        prompt = int(_number(path, "input_lens", i, lists["input_lens"][i], positive_int=True))
        output = int(_number(path, "output_lens", i, lists["output_lens"][i], positive_int=True))
        ttft = _number(path, "ttfts", i, lists["ttfts"][i])
        gaps = lists["itls"][i]
        if not isinstance(gaps, list):
            raise UserError(f"{path}: itls[{i}] must be a list of seconds, got {gaps!r}")
        decode = sum(_number(path, f"itls[{i}]", j, g) for j, g in enumerate(gaps))
        specs.append(RequestSpec(k, sent[i] - sent[order[0]], prompt, output))
        real["ttft"][k], real["e2e"][k] = ttft, ttft + decode
        real["tpot"][k] = decode / (output - 1) if output > 1 else math.nan
    return order, tuple(specs), real


def load_bench(path: Path, source: HardwareConfig, tp_given: bool, num_blocks: int | None,
               client_ms: float | None) -> tuple[RealRun, HardwareConfig, str]:
    """The run a bench result describes, the step-cost source matched to it, and where its KV
    blocks come from; every problem is a one-line UserError naming the file."""
    if path.name in RUN_FOLDER_FILES:
        raise UserError(f"{path}: a run folder's file: give the folder, {path.parent}")
    doc = read_json_object(path, "vllm bench serve result")
    lists = _arrays(doc, path)
    gpu = source.gpu
    if not gpu and (source.profile or source.cost_file):
        from llumverify.sim.engine_profile import gpu_and_model

        gpu = gpu_and_model(source)[0]
    if not gpu:
        raise UserError(f"{path}: a vllm bench serve result records no GPU: give --gpu (catalog, or a TOML file)")
    model = doc.get("model_id") or doc.get("model") or ""
    if not isinstance(model, str):
        raise UserError(f"{path}: model_id must be a string, got {model!r}")
    # the run as a meta.json would state it: what the file and the options say, vLLM's defaults for the rest
    meta: dict[str, object] = {"model": model, "hardware": {"device_name": gpu},
                               "engine_kwargs": {"tensor_parallel_size": source.tp}}
    run = run_hardware(meta, str(path))
    hw = source_for_run(source, run, tp_given, str(path))
    blocks, how = kv_blocks_for_run(run, hw, num_blocks)
    engine, notes = engine_settings(meta, path, blocks)
    _, specs, real = _requests(path, lists)
    check_replay_size(specs, engine, 1, path)
    client = CLIENT_MS if client_ms is None else client_ms
    return (RealRun(engine, specs, real, {}, meta, tuple(notes), client_s=client / 1e3), hw,
            how.replace("meta.json", "the result file"))


def bench_note(run: RealRun, client_ms: float | None) -> str:
    """What validate prints of a bench result's workload and client time."""
    how = "--client-ms" if client_ms is not None else "default: fitted on vLLM v0.15.1 H100 serving runs; --client-ms"
    return ("workload: the result file's requests (arrivals: start_times; lengths: input_lens, output_lens; measured "
            "TTFT, TPOT and E2E from ttfts and itls, at the client; no prompt hashes, so no prefix-cache hit is "
            f"simulated)\nclient: {run.client_s * 1e3:g} ms per request added to the simulated TTFT and E2E ({how})")
