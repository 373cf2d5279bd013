"""A `vllm bench serve --save-result --save-detailed` result file, read as a real run.

vLLM's serving benchmark writes one JSON object: the model it served (`model_id`) and, per request,
its prompt and output lengths (`input_lens`, `output_lens`), when the client sent it (`start_times`,
seconds on the client's clock; redrawn by bench_sends where absent), its TTFT (`ttfts`, seconds), the gaps between its streamed chunks
(`itls`, seconds) and an error (`errors`, empty on success; optional). Every time is measured at
the client, and the file records neither the GPU nor the engine's settings. So validate takes the
GPU from --gpu (or the profile / step-cost file), TP from --tp (default 1), the model from
`model_id` (or --model), vLLM's `vllm serve` defaults for the GPU's batch limits and prefix caching,
the KV cache from the catalogs (or --num-gpu-blocks), and adds the client's own time (client_time.py:
per request and per prompt token) to the simulated TTFT and E2E (--client-ms, --client-us-per-token). No prompt hashes: no prompt shares cached blocks with another.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.requests import MAX_TOKENS
from llumverify.files.inputs import exact_int, finite
from llumverify.files.paths import read_json_object
from llumverify.requests import RequestSpec
from llumverify.settings.config import EngineConfig, HardwareConfig
from llumverify.validation.bench_sends import Redraw, lag_allowed, redrawn_sends
from llumverify.validation.client_time import ClientTime
from llumverify.validation.replay import METRICS, RealRun, check_replay_size, check_seconds, check_span
from llumverify.validation.run_engine import engine_settings
from llumverify.validation.run_hardware import kv_blocks_for_run, run_hardware, source_for_run

REQUIRED = ("input_lens", "output_lens", "ttfts", "itls")
MAX_RESULT_BYTES = 256 << 20  # parsed, its lists take many times the file's size in memory
RUN_FOLDER_FILES = ("meta.json", "requests.jsonl", "timeseries.csv", "cluster-config.json")  # replay.py's layout


def is_bench_result(path: Path) -> bool:
    """A run given as a file (a run folder is a directory): a vllm bench serve result."""
    return path.is_file()


def _lists(doc: dict, path: Path) -> dict[str, list]:
    """The per-request lists, all present (errors: empty strings if absent; start_times may be
    absent: bench_sends redraws them) and of one length."""
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise UserError(f"{path}: not a detailed vllm bench serve result: no {', '.join(missing)} (write it with "
                        "`vllm bench serve --save-result --save-detailed`)")
    lists = {k: doc[k] for k in (*REQUIRED, *(("start_times",) if "start_times" in doc else ()))}
    lists["errors"] = doc.get("errors", [""] * len(doc["input_lens"]) if isinstance(doc["input_lens"], list) else [])
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


def _measured(path: Path, lists: dict[str, list]) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """Per request, in file order: prompt and output lengths, TTFT and the time after it (s)."""
    for i, e in enumerate(lists["errors"]):
        if not isinstance(e, str):
            raise UserError(f"{path}: errors[{i}] must be a string (empty on success), got {e!r}")
    failed = [i for i, e in enumerate(lists["errors"]) if e]
    if failed:
        raise UserError(f"{path}: {len(failed)} of {len(lists['errors'])} requests failed (first: request {failed[0]}: "
                        f"{lists['errors'][failed[0]][:80]!r}); their lengths and times are unknown, so the "
                        "run cannot be replayed")
    n = len(lists["input_lens"])
    prompts, outputs, ttfts, decodes = [], [], np.empty(n), np.empty(n)
    silent = [i for i in range(n) if lists["output_lens"][i] == 0 and not lists["itls"][i]]
    if silent:
        raise UserError(f"{path}: {len(silent)} of {n} requests (first: request {silent[0]}) streamed nothing (output_lens "
                        "0, no itls) yet record no error: failed requests the client did not flag; the run cannot be "
                        "replayed")
    for i in range(n):
        prompt, output = (exact_int(lists[k][i], f"{path}: {k}[{i}]", lo=1, hi=MAX_TOKENS)
                          for k in ("input_lens", "output_lens"))
        ttft = finite(lists["ttfts"][i], f"{path}: ttfts[{i}]", gt=0)
        gaps = lists["itls"][i]
        if not isinstance(gaps, list):
            raise UserError(f"{path}: itls[{i}] must be a list of seconds, got {gaps!r}")
        # n tokens stream in at most n - 1 gaps (fewer: a chunk may carry several); a client that re-tokenizes the
        # text may count a few tokens less than were streamed, never half
        if len(gaps) >= 2 * output:
            raise UserError(f"{path}: itls[{i}] has {len(gaps)} gaps for an output of {output} tokens (at most "
                            f"{output - 1}): the output length or the gaps belong to another request")
        decode = finite(sum(finite(g, f"{path}: itls[{i}][{j}]", ge=0) for j, g in enumerate(gaps)),
                        f"{path}: itls[{i}] (their sum)")
        finite(ttft + decode, f"{path}: ttfts[{i}] + the sum of itls[{i}]")
        if output > 1 and decode <= 0:
            raise UserError(f"{path}: itls[{i}] adds up to no time after the first of {output} output tokens")
        prompts.append(prompt)
        outputs.append(output)
        ttfts[i], decodes[i] = ttft, decode
    return prompts, outputs, ttfts, decodes


def _sends(doc: dict, path: Path, lists: dict[str, list], e2e: np.ndarray, redraw: Redraw) -> tuple[list[float], str]:
    """Send times (s, file order) and how they are known: the file's start_times, else redrawn."""
    if "start_times" not in lists:
        sends, how = redrawn_sends(doc, path, e2e, redraw)
        return [float(t) for t in sends], how
    if redraw.given():
        raise UserError(f"{path}: has start_times: {redraw.given()} (for redrawing missing sends) does not apply")
    sent = [finite(lists["start_times"][i], f"{path}: start_times[{i}]") for i in range(len(e2e))]
    if "duration" in doc:  # the client's clock: every request ends within the run it timed
        duration = finite(doc["duration"], f"{path}: duration", gt=0)
        last = max(range(len(sent)), key=lambda i: sent[i] + e2e[i])
        end = sent[last] - min(sent) + float(e2e[last])
        if end > duration + lag_allowed(duration):
            raise UserError(f"{path}: request {last} ends {end:.4g} s after the first send, past the run's recorded "
                            f"duration {duration:.4g} s: are start_times, ttfts and itls all in seconds?")
    return sent, "arrivals: start_times"


def _requests(path: Path, sent: list[float], sent_from: str, prompts: list[int], outputs: list[int], ttfts: np.ndarray,
              decodes: np.ndarray) -> tuple[list[int], tuple[RequestSpec, ...], dict[str, np.ndarray]]:
    """(file index of each request in send order, their specs, measured seconds per metric), in send order."""
    n = len(sent)
    order = sorted(range(n), key=lambda i: (sent[i], i))
    check_span(sent, path, sent_from, lambda i: f"request {i}")
    specs, real = [], {m: np.empty(n) for m in METRICS}
    for k, i in enumerate(order):
        specs.append(RequestSpec(k, sent[i] - sent[order[0]], prompts[i], outputs[i]))
        real["ttft"][k], real["e2e"][k] = ttfts[i], ttfts[i] + decodes[i]
        real["tpot"][k] = decodes[i] / (outputs[i] - 1) if outputs[i] > 1 else math.nan
    return order, tuple(specs), real


def _model(doc: dict, path: Path, given: str) -> str:
    """The model served: --model, else model_id, which must then name a catalog model."""
    named = doc.get("model_id") or doc.get("model") or ""
    if not isinstance(named, str):
        raise UserError(f"{path}: model_id must be a string, got {named!r}")
    if given or not named:
        return named
    from llumverify.sim.catalog import get_model

    try:
        get_model(named)
    except UserError as exc:
        if not str(exc).startswith("unknown model"):  # a known model in a format not modelled: say that
            raise UserError(f"{path}: model_id: {exc}") from None
        raise UserError(f"{path}: model_id {named!r} is not a catalog model (a --served-model-name?): give --model "
                        "(catalog, or the path of its HF config.json)") from None
    return named


def load_bench(path: Path, source: HardwareConfig, tp_given: bool, num_blocks: int | None,
               client: ClientTime, redraw: Redraw = Redraw(), stated: dict[str, object] | None = None
               ) -> tuple[RealRun, HardwareConfig, str, str]:
    """The run a bench result describes, the step-cost source matched to it, where its KV blocks
    come from and how its sends are known; every problem is a one-line UserError naming the file or
    the option."""
    if path.name in RUN_FOLDER_FILES:
        raise UserError(f"{path}: a run folder's file: give the folder, {path.parent}")
    doc = read_json_object(path, "vllm bench serve result", MAX_RESULT_BYTES)
    lists = _lists(doc, path)
    meta, hw, engine, notes, how = client_run(path, source, tp_given, num_blocks, _model(doc, path, source.model),
                                              "a vllm bench serve result", "the result file", stated or {})
    prompts, outputs, ttfts, decodes = _measured(path, lists)
    sent, arrivals = _sends(doc, path, lists, ttfts + decodes, redraw)
    order, specs, real = _requests(path, sent, "start_times" if "start_times" in lists else "the redrawn sends", prompts,
                                   outputs, ttfts, decodes)
    check_seconds(real, path, "ttfts and itls")
    check_replay_size(specs, engine, 1, path, lambda k: f"{path}: request {order[k]} of the file")
    return (RealRun(engine, specs, real, {}, meta, tuple(notes), reordered=order != sorted(order), client=client,
                    arrivals=arrivals),
            hw, how, arrivals)


def client_run(path: Path, source: HardwareConfig, tp_given: bool, num_blocks: int | None, model: str, what: str,
               called: str, stated: dict[str, object]) -> tuple[dict[str, object], HardwareConfig, EngineConfig,
                                                                 list[str], str]:
    """The engine a client-side record ran on, which the record does not state: the GPU from the
    options (or the profile / step-cost file), TP from --tp, the model given, the engine settings
    `stated` (max_num_seqs, max_num_batched_tokens, kv_cache_dtype, from the options), vLLM's
    `vllm serve` defaults for the rest. Returns the run as a meta.json would state it, the source matched to it,
    the engine settings, the defaults taken and where the KV blocks come from (`called`: the
    record, in that sentence)."""
    gpu = source.gpu
    if not gpu and (source.profile or source.cost_file):
        from llumverify.sim.engine_profile import gpu_and_model

        gpu = gpu_and_model(source)[0]
    if not gpu:
        raise UserError(f"{path}: {what} records no GPU: give --gpu (catalog, or a TOML file), --profile DIR or "
                        "--step-cost FILE")
    from llumverify.sim.catalog import get_gpu

    # the device name as vLLM prints it: its batch defaults read it
    kwargs = {k: v for k, v in stated.items() if k not in ("cudagraph_mode", "attention_backend")}
    if "cudagraph_mode" in stated:  # where a run records it (cudagraphs.recorded_mode)
        kwargs["compilation_config"] = {"cudagraph_mode": str(stated["cudagraph_mode"]).upper()}
    if stated.get("attention_backend") == "flashinfer-fa2":  # as a run records it (attention_backend.replayed_backend)
        kwargs["attention_config"] = {"backend": "FLASHINFER", "use_trtllm_attention": False}
    meta: dict[str, object] = {"model": model, "hardware": {"device_name": get_gpu(gpu).name},
                               "engine_kwargs": {"tensor_parallel_size": source.tp, **kwargs}}
    run = run_hardware(meta, str(path))
    hw = source_for_run(source, run, tp_given, str(path))
    blocks, how = kv_blocks_for_run(run, hw, num_blocks)
    engine, notes = engine_settings(meta, path, blocks)
    return meta, hw, engine, notes, how.replace("meta.json", called)


def bench_note(run: RealRun, arrivals: str, calibrating: bool = False) -> str:
    """What validate (or calibrate) prints of a bench result's workload and client time."""
    lines = [f"workload: the result file's requests ({arrivals}; lengths: input_lens, output_lens; measured "
             "TTFT, TPOT and E2E from ttfts and itls, at the client; no prompt hashes, so no prompt shares cached "
             "blocks with another)" + ("; not listed in send order: replayed and scored in send order" if run.reordered else "")]
    if calibrating:
        lines.append("client: not used (the fit is on TPOT, which the client's time does not change)")
    else:
        lines.append(run.client.describe())
    return "\n".join(lines)
