"""vLLM's multi-turn serving benchmark, its per-request client CSV, read as a real run.

vLLM's benchmarks/multi_turn/benchmark_serving_multi_turn.py, in the copy SemiAnalysis InferenceX
runs (experimental/multiturn/vllm_benchmark: `--metrics-csv` writes `<prefix>_client_metrics.csv`;
upstream vLLM writes the same fields as JSON, `--stats-json-output`, not read here), logs a row per
request: when the client sent it (`start_time_ms`, the client's clock), its TTFT and latency at the
client (`ttft_ms`, `latency_ms`), its prompt and output tokens as the client counted them
(`input_num_tokens`: message contents, without the chat template; `output_num_tokens`), and its
`conversation_id`. Each turn re-sends the conversation so far, the last turn's prompt and answer
and then a new message, after the last turn's answer arrived; so the replay gives each prompt
chained block ids shared along its conversation (its full blocks) and names each answer's blocks
(`output_hash_ids`), which the vllm-v1 engine then finds cached as vLLM's prefix cache does. A
conversation whose turns do not follow on (a shorter prompt, or a send before the last answer
ended) is refused: a row logged twice, two runs in one file or a shared id. Each request is replayed
as its client ran it, a closed loop (RequestSpec.user): a client (`client_id`, when the file has the
column; else the conversation) sends one request at a time (one conversation at a time at the
benchmark's default --max-active-conversations), its next once the last one's answer ended, so a
client's first request reaches the server at its recorded time and each later one at the simulated
end of the request before it plus the client's own time in between (RequestSpec.after_s: its
recorded turnaround after the last answer reached it, plus the client time added to TTFT and E2E:
front end, streaming and client, lumped; RequestSpec.chained), earlier than recorded where the
simulated server is faster, and finds its conversation's answer cached. The benchmark's client sends
on the answer (`client_main`: it sleeps between turns only with --think-time-lognormal or
--request-rate, and then the recorded turnaround holds that sleep). Until session 30 (2026-12-06) a
request waited for its recorded time too, which held a faster simulated server to the real run's
pace with fewer requests in flight (B200 TP1 with 64 clients: 44 running in the simulated steps
with a prefill chunk, 64 in the server's samples); until session 29 a late answer's successor
arrived at that very end, on the step boundary, and never waited for a step under way: at 16
clients the simulated TTFT barely varied (TP1 mean 85.9, P90 85.6 ms; real 102.3 / 130.7). Without the client, a slow simulated answer would leave
a client's next conversation queued behind a full batch (max_num_seqs = clients) that the real run
never had. A client whose requests overlap is refused, as are an empty client_id and a turn that does
not follow on. validate prints the simulated
hit rate beside the share the sharing implies. A first turn the benchmark's warm-up
(`--warmup-step`) cached is replayed cold. Like a vllm bench serve result the file records neither
the GPU, the model nor the engine's settings (validate takes --gpu, --model, --tp and the engine
options it is given, and vLLM's defaults for the rest), and its times are the client's: the client time
(client_time.py; --client-ms, --client-us-per-token) is added to the simulated TTFT and E2E.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.files.paths import read_text
from llumverify.requests import MAX_TOKENS, RequestSpec
from llumverify.settings.config import HardwareConfig
from llumverify.validation.bench_result import MAX_RESULT_BYTES, client_run
from llumverify.validation.client_time import ClientTime
from llumverify.validation.replay import MAX_TPOT_S, METRICS, RealRun, check_replay_size, check_span

COLUMNS = {"start_time_ms": float, "ttft_ms": float, "latency_ms": float, "input_num_tokens": int,
           "output_num_tokens": int, "conversation_id": str}
BLOCK = 16  # tokens per block id: the shared workloads' (and vLLM's default block size)
NUMBER = {float: re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII), int: re.compile(r"\d+", re.ASCII)}
TOLERANCE_MS = 1.0  # a turn may be logged as sent this long before the last one's answer ended (clock rounding)
MIN_TPOT_S = 1e-4  # a mean per output token below this (or over MAX_TPOT_S) is a unit slip


def is_multiturn_csv(path: Path) -> bool:
    """A run given as a .csv file: the multi-turn benchmark's client metrics."""
    return path.is_file() and path.suffix.lower() == ".csv"


def read_rows(path: Path) -> list[tuple[float, float, float, int, int, str, int, bool, str]]:
    """(send ms, TTFT ms, latency ms, prompt, output, conversation, line, whole answer in one chunk,
    client) of each row, checked; the client is the conversation where the file has no client_id."""
    text = read_text(path, "multi-turn benchmark CSV", MAX_RESULT_BYTES)
    reader = csv.DictReader(io.StringIO(text))
    names = reader.fieldnames or []
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"{path}: the header names {', '.join(twice)} twice")
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise UserError(f"{path}: not the multi-turn benchmark's client metrics: no {', '.join(missing)} column "
                        "(write it with benchmark_serving_multi_turn.py --metrics-csv)")
    rows = []
    for line, r in enumerate(reader, start=2):  # line 1 is the header
        if None in r:
            raise UserError(f"{path}:{line}: more fields than the header names")
        values = []
        for key, kind in COLUMNS.items():
            raw = (r.get(key) or "").strip()  # a short row reads None
            value = (raw if kind is str else kind(raw) if NUMBER[kind].fullmatch(raw) else None) if raw else None
            # a name is printed in errors, on one line: a quoted field holding a line break is no id
            ok = value is not None and (raw.isprintable() if kind is str else math.isfinite(value) and value >= 0)
            if not ok or (kind is int and value > MAX_TOKENS):
                raise UserError(f"{path}:{line}: {key} {raw!r} is not a {'name' if kind is str else 'count or time'}")
            values.append(value)
        if values[4] < 1:
            raise UserError(f"{path}:{line}: output_num_tokens 0: a request that streamed nothing (failed?) cannot be "
                            "replayed")
        if values[2] < values[1]:
            raise UserError(f"{path}:{line}: latency_ms {values[2]:g} is shorter than ttft_ms {values[1]:g}")
        chunks = (r.get("output_num_chunks") or "").strip()
        one_chunk = chunks.isdigit() and int(chunks) == 0  # the whole answer in the first chunk: no TPOT
        client = (r.get("client_id") or "").strip() if "client_id" in names else values[5]
        if not client:
            raise UserError(f"{path}:{line}: client_id is empty")
        if not client.isprintable():
            raise UserError(f"{path}:{line}: client_id {client!r} is not a name")
        rows.append((*values, line, one_chunk, client))
    if not rows:
        raise UserError(f"{path}: no requests")
    _check_turns(path, rows, "client_id" in names)
    return rows


def _before_end(sent: float, before: tuple) -> bool:
    """Whether a request sent at `sent` (ms) left before the earlier row `before` ended, beyond the clock's rounding."""
    return sent < before[0] + before[2] - TOLERANCE_MS


def _check_turns(path: Path, rows: list[tuple], clients: bool) -> None:
    """Each conversation's turns, in send order, must follow on: a prompt at least the last one's
    prompt and answer, sent after the last answer ended; each client's requests (`clients`: the file
    names them) must not overlap."""
    last: dict[str, tuple] = {}
    busy: dict[str, tuple] = {}
    for row in sorted(rows, key=lambda r: (r[0], r[6])):
        sent, _, _, prompt, _, conversation, line, _, client = row
        if clients:
            if (b := busy.get(client)) is not None and _before_end(sent, b):
                raise UserError(f"{path}:{line}: client {client} sent it before its request on line {b[6]} ended: not "
                                "a closed-loop client (two runs in one file?)")
            busy[client] = row
        before = last.get(conversation)
        if before is not None:
            _, _, _, b_prompt, b_out, _, b_line, _, _ = before
            if prompt < b_prompt + b_out or _before_end(sent, before):
                why = ("its prompt is shorter than the last turn's prompt and answer" if prompt < b_prompt + b_out
                       else "it was sent before the last turn's answer ended")
                raise UserError(f"{path}:{line}: conversation {conversation} does not follow on from line {b_line}: {why} "
                                "(a row logged twice, two runs in one file, or a shared id)")
        last[conversation] = row


def conversation_specs(rows: list[tuple], client_time: ClientTime = ClientTime()
                       ) -> tuple[list[int], tuple[RequestSpec, ...], dict[str, np.ndarray], float, int]:
    """In send order: each row's index, the specs (prompt blocks shared along the conversation, the
    answer's blocks named, the client's own time before each: its recorded turnaround after its
    previous answer plus the client time of this request), the measured seconds per metric; the prefix hit
    rate the sharing implies (shared prompt tokens / prompt tokens); how many prompts counted as 0
    tokens were replayed as 1."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    t0 = rows[order[0]][0]
    chains: dict[str, list[int]] = {}
    users: dict[str, int] = {}  # client -> its closed-loop user in the replay
    answered: dict[str, float] = {}  # client -> when its latest answer ended at the client, ms
    next_id = shared = total = empty = 0
    specs, real = [], {m: np.empty(len(rows)) for m in METRICS}
    for k, i in enumerate(order):
        sent, ttft, latency, prompt, out, conversation, _, one_chunk, client = rows[i]
        if prompt < 1:  # an empty message: the server's prompt is the chat template alone
            prompt, empty = 1, empty + 1
        chain = chains.get(conversation, [])
        kept = chain[:min(len(chain), prompt // BLOCK)]
        shared += len(kept) * BLOCK
        total += prompt
        fresh = (prompt + out) // BLOCK - len(kept)  # the rest of this prompt's full blocks and its answer's
        chain = chains[conversation] = kept + list(range(next_id, next_id + fresh))
        next_id += fresh
        follows = client in answered
        turnaround = max(sent - answered.get(client, sent), 0.0) / 1e3  # >= 0: overlaps were refused
        answered[client] = sent + latency
        specs.append(RequestSpec(k, (sent - t0) / 1e3, prompt, out, hash_ids=tuple(chain[:prompt // BLOCK]),
                                 hash_block=BLOCK, output_hash_ids=tuple(chain[prompt // BLOCK:]),
                                 user=users.setdefault(client, len(users)), after_s=turnaround + client_time.seconds(prompt),
                                 chained=follows))
        real["ttft"][k], real["e2e"][k] = ttft / 1e3, latency / 1e3
        real["tpot"][k] = (latency - ttft) / 1e3 / (out - 1) if out > 1 and not one_chunk else math.nan
    return order, tuple(specs), real, shared / total, empty


def _check_units(path: Path, real: dict[str, np.ndarray]) -> None:
    """Refuse a mean time per output token no engine takes: the ms columns hold another unit."""
    tpot = real["tpot"][np.isfinite(real["tpot"])]
    mean = float(tpot.mean()) if len(tpot) else math.nan
    if mean > MAX_TPOT_S or mean < MIN_TPOT_S:
        hint = "in µs or ns" if mean > MAX_TPOT_S else "in seconds, or every answer streamed in one chunk"
        raise UserError(f"{path}: ttft_ms and latency_ms read as ms give a mean of {mean * 1e3:.3g} ms per output "
                        f"token after the first: are they {hint}?")


def load_multiturn(path: Path, source: HardwareConfig, tp_given: bool, num_blocks: int | None,
                   client: ClientTime, calibrating: bool = False, stated: dict[str, object] | None = None
                   ) -> tuple[RealRun, HardwareConfig, str, list[str]]:
    """The run a multi-turn client CSV describes, the step-cost source matched to it, where its KV
    blocks come from and the lines validate (or calibrate) prints of it; every problem a one-line
    UserError."""
    model = source.model
    if not model and not (source.profile or source.cost_file):
        raise UserError(f"{path}: the multi-turn benchmark's CSV names no model: give --model (catalog, or the path of "
                        "its HF config.json)")
    meta, hw, engine, notes, how = client_run(path, source, tp_given, num_blocks, model,
                                              "the multi-turn benchmark's CSV", "the CSV", stated or {})
    rows = read_rows(path)
    check_span([r[0] / 1e3 for r in rows], path, "start_time_ms", lambda i: f"line {rows[i][6]}")
    # lengths first: a 2^31-token prompt the cache cannot hold took 22 s and 7 GB of block ids to be refused
    check_replay_size(tuple(RequestSpec(k, 0.0, max(r[3], 1), r[4]) for k, r in enumerate(rows)), engine, 1, path,
                      lambda k: f"{path}:{rows[k][6]}")
    order, specs, real, hit, empty = conversation_specs(rows, client)
    _check_units(path, real)
    check_replay_size(specs, engine, 1, path, lambda k: f"{path}:{rows[order[k]][6]}")
    arrivals = "arrivals: start_time_ms"
    run = RealRun(engine, specs, real, {}, meta, tuple(notes), reordered=order != sorted(order), client=client,
                  arrivals=arrivals)
    lines = [f"workload: the CSV's requests ({arrivals}; measured TTFT, TPOT and E2E from ttft_ms and latency_ms, "
             f"at the client; a conversation's turns share their prompt and answer blocks: {100 * hit:.1f} % of the "
             "prompt tokens)" + (f"; {empty} prompts counted as 0 tokens replayed as 1" if empty else "")
             + ("; not listed in send order: replayed and scored in send order" if run.reordered else ""),
             f"client: {client.terms()} in the wait before a client's next turn only (the fit is on TPOT, which the "
             "client's time is not added to)" if calibrating else client.describe(),
             *(f"engine: {note}" for note in notes)]
    return run, hw, how, lines
