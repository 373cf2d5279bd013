"""vLLM's multi-turn serving benchmark, its per-request client CSV, read as a real run.

vLLM's benchmarks/multi_turn/benchmark_serving_multi_turn.py (`--metrics-csv`) writes a row per
request: when the client sent it (`start_time_ms`, the client's clock), its TTFT and latency at the
client (`ttft_ms`, `latency_ms`), its prompt and output tokens as the client counted them
(`input_num_tokens`: message contents, without the chat template; `output_num_tokens`), and its
`conversation_id`. Each client runs one conversation at a time and each turn re-sends the
conversation so far, the last turn's prompt and answer and then a new message; so the replay gives
each prompt chained block ids shared along its conversation (its full blocks) and names each
answer's blocks (`output_hash_ids`), which the vllm-v1 engine then finds cached as vLLM's prefix
cache does. Like a vllm bench serve result the file records neither the GPU, the model nor the
engine's settings (validate takes --gpu, --model, --tp and the engine options it is given, and
vLLM's defaults for the rest), and its times are
the client's: CLIENT_MS is added per request to the simulated TTFT and E2E (--client-ms sets it).
Sends are replayed at their recorded times (open loop at the closed loop's times).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.paths import read_text
from llumverify.requests import RequestSpec
from llumverify.settings.config import HardwareConfig
from llumverify.validation.bench_result import client_run, client_seconds
from llumverify.validation.replay import METRICS, RealRun, check_replay_size, check_seconds, check_span

COLUMNS = {"start_time_ms": float, "ttft_ms": float, "latency_ms": float, "input_num_tokens": int,
           "output_num_tokens": int, "conversation_id": str}
BLOCK = 16  # tokens per block id: the shared workloads' (and vLLM's default block size)
MAX_CSV_BYTES = 256 << 20
MAX_TOKENS = (1 << 31) - 1


def is_multiturn_csv(path: Path) -> bool:
    """A run given as a .csv file: the multi-turn benchmark's client metrics."""
    return path.is_file() and path.suffix.lower() == ".csv"


def read_rows(path: Path) -> list[tuple[float, float, float, int, int, str, int]]:
    """(send ms, TTFT ms, latency ms, prompt, output, conversation, line) of each row, checked."""
    text = read_text(path, "multi-turn benchmark CSV", MAX_CSV_BYTES)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{path}: not the multi-turn benchmark's client metrics: no {', '.join(missing)} column "
                        "(write it with benchmark_serving_multi_turn.py --metrics-csv)")
    rows = []
    for line, r in enumerate(reader, start=2):  # line 1 is the header
        values = []
        for key, kind in COLUMNS.items():
            raw = (r.get(key) or "").strip()  # a short row reads None
            try:
                value = kind(raw) if raw else None
            except ValueError:
                value = None
            ok = value is not None and (kind is str or (math.isfinite(value) and value >= 0))
            if not ok or (kind is int and value > MAX_TOKENS):
                raise UserError(f"{path}:{line}: {key} {raw!r} is not a {'name' if kind is str else 'count or time'}")
            values.append(value)
        if values[4] < 1:
            raise UserError(f"{path}:{line}: output_num_tokens 0: a request that streamed nothing (failed?) cannot be "
                            "replayed")
        if values[2] < values[1]:
            raise UserError(f"{path}:{line}: latency_ms {values[2]:g} is shorter than ttft_ms {values[1]:g}")
        rows.append((*values, line))
    if not rows:
        raise UserError(f"{path}: no requests")
    return rows


def conversation_specs(rows: list[tuple]) -> tuple[list[int], tuple[RequestSpec, ...], dict[str, np.ndarray], float, int]:
    """In send order: each row's index, the specs (prompt blocks shared along the conversation, the
    answer's blocks named), the measured seconds per metric; the prefix hit rate the sharing implies
    (shared prompt tokens / prompt tokens); how many prompts counted as 0 tokens were replayed as 1."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    t0 = rows[order[0]][0]
    chains: dict[str, list[int]] = {}
    next_id = shared = total = empty = 0
    specs, real = [], {m: np.empty(len(rows)) for m in METRICS}
    for k, i in enumerate(order):
        sent, ttft, latency, prompt, out, conversation, _ = rows[i]
        if prompt < 1:  # an empty message: the server's prompt is the chat template alone
            prompt, empty = 1, empty + 1
        chain = chains.get(conversation, [])
        kept = chain[:min(len(chain), prompt // BLOCK)]
        shared += len(kept) * BLOCK
        total += prompt
        fresh = (prompt + out) // BLOCK - len(kept)  # the rest of this prompt's full blocks and its answer's
        chain = chains[conversation] = kept + list(range(next_id, next_id + fresh))
        next_id += fresh
        specs.append(RequestSpec(k, (sent - t0) / 1e3, prompt, out, hash_ids=tuple(chain[:prompt // BLOCK]),
                                 hash_block=BLOCK, output_hash_ids=tuple(chain[prompt // BLOCK:])))
        real["ttft"][k], real["e2e"][k] = ttft / 1e3, latency / 1e3
        real["tpot"][k] = (latency - ttft) / 1e3 / (out - 1) if out > 1 else math.nan
    return order, tuple(specs), real, shared / total, empty


def load_multiturn(path: Path, source: HardwareConfig, tp_given: bool, num_blocks: int | None,
                   client_ms: float | None, calibrating: bool = False, stated: dict[str, object] | None = None
                   ) -> tuple[RealRun, HardwareConfig, str, list[str]]:
    """The run a multi-turn client CSV describes, the step-cost source matched to it, where its KV
    blocks come from and the lines validate (or calibrate) prints of it; every problem a one-line
    UserError."""
    client = client_seconds(client_ms)
    model = source.model
    if not model and not (source.profile or source.cost_file):
        raise UserError(f"{path}: the multi-turn benchmark's CSV names no model: give --model (catalog, or the path of "
                        "its HF config.json)")
    meta, hw, engine, notes, how = client_run(path, source, tp_given, num_blocks, model,
                                              "the multi-turn benchmark's CSV", "the CSV", stated or {})
    rows = read_rows(path)
    check_span([r[0] / 1e3 for r in rows], path, "start_time_ms", lambda i: f"line {rows[i][6]}")
    order, specs, real, hit, empty = conversation_specs(rows)
    check_seconds(real, path, "ttft_ms and latency_ms (in ms)")
    check_replay_size(specs, engine, 1, path, lambda k: f"{path}:{rows[order[k]][6]}")
    arrivals = "arrivals: start_time_ms"
    run = RealRun(engine, specs, real, {}, meta, tuple(notes), reordered=order != sorted(order), client_s=client,
                  arrivals=arrivals)
    lines = [f"workload: the CSV's requests ({arrivals}; measured TTFT, TPOT and E2E from ttft_ms and latency_ms, "
             f"at the client; a conversation's turns share their prompt and answer blocks: {100 * hit:.1f} % of the "
             "prompt tokens)" + (f"; {empty} prompts counted as 0 tokens replayed as 1" if empty else "")
             + ("; not listed in send order: replayed and scored in send order" if run.reordered else ""),
             "client: not used (the fit is on TPOT, which the client's time does not change)" if calibrating else
             f"client: {client * 1e3:g} ms per request added to the simulated TTFT and E2E ("
             + ("--client-ms)" if client_ms is not None else "default: fitted on vLLM v0.15.1 H100 serving runs; "
                "--client-ms)"),
             *(f"engine: {note}" for note in notes)]
    return run, hw, how, lines
