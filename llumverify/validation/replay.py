"""Replay a real vLLM run in the simulator and compare, request by request.

A run folder (the shared format, ../shared/validation/README.md) holds `meta.json` (engine
arguments and KV cache size, read by run_engine.py), `requests.jsonl` (engine timestamps per
request, in workload order) and `timeseries.csv`; the workload JSONL holds the exact arrivals,
lengths and prompt block hashes. Without a workload file (LLMServingSim publishes runs without
theirs) the workload is read from requests.jsonl itself (`derived_workload`): the client's send
times and the lengths, but no prompt hashes, so no prompt shares cached blocks with another (a
preempted request still finds its own again; on LLMServingSim's RTX PRO 6000 Llama-3.1-8B run, TTFT
3.5 points slower than with its hashes).
The simulator runs the same workload on one `vllm-v1` instance with the run's engine settings and
a StepCost (one instance per data-parallel rank, dispatched as vLLM's own data-parallel load
balancer does: the `vllm-dp` policy), and every request's TTFT, TPOT and E2E are compared.

Calibration and validation use disjoint requests: `split_ids` puts the requests that arrived
in the first `calib_frac` of the arrival window in the calibration part; the per-step engine
constant is fitted on those (their mean TPOT) and errors are reported on the others.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
from llumverify.errors import UserError, brief
from llumverify.files.inputs import exact_int, finite, not_a_loop, regular_file, unique_keys, whole_ns
from llumverify.files.paths import read_json_object
from llumverify.files.prompt_hashes import PromptHashes
from llumverify.requests import RequestSpec
from llumverify.sim.lockstep import lockstep_ranks
from llumverify.sim.run import check_memory, simulate
from llumverify.sim.stepcost import StepCost
from llumverify.validation.client_time import ClientTime
from llumverify.validation.run_engine import data_parallel, engine_settings, max_model_len

METRICS = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class RealRun:
    """A measured run: its engine settings, the workload it served and what each request measured."""

    engine: EngineConfig
    specs: tuple[RequestSpec, ...]
    real: dict[str, np.ndarray]  # metric -> seconds per request (tpot NaN for one-token outputs)
    series: dict[str, list[float]]  # timeseries.csv columns
    meta: dict[str, object]
    notes: tuple[str, ...] = ()  # engine settings the run did not record, taken from vLLM's defaults
    dp: int = 1  # data-parallel ranks: one simulated instance each
    reordered: bool = False  # requests.jsonl was not in arrival order: specs and real are in arrival order
    client: ClientTime = ClientTime()  # the harness's own time, added to simulated TTFT and E2E (0: engine timestamps)
    arrivals: str = ""  # where the arrivals come from, as validate prints it and validation.json records it

    def workload_note(self) -> str:
        """What validate prints of a workload derived from requests.jsonl."""
        return (f"workload: derived from requests.jsonl ({self.arrivals}; no prompt hashes, so no prompt shares cached "
                "blocks with another)" + ("; requests.jsonl is not in arrival order: its requests are replayed and scored in "
                                "arrival order" if self.reordered else ""))


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line, read one line at a time; at least one."""
    regular_file(path, "JSON-lines file")
    i, empty = 0, True
    try:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    row = json.loads(line, object_pairs_hook=unique_keys)
                    if not isinstance(row, dict):
                        raise UserError(f"{path}:{i}: expected a JSON object")
                    empty = False
                    yield i, row
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit number, [[[[...
        raise UserError(f"{path}:{i}: malformed JSON ({getattr(exc, 'msg', str(exc)[:80])})") from None
    if empty:
        raise UserError(f"{path}: no requests")


def _number(path: Path, line: int, row: dict, key: str, kind: type = float) -> float:
    if key not in row:
        raise UserError(f"{path}:{line}: no {key}")
    value = row[key]
    if value is None:
        why = " (no token: a failed or aborted request? the replay needs every request finished)" if "token" in key else ""
        raise UserError(f"{path}:{line}: {key} is null{why}")
    finite(value, f"{path}:{line}: {key}")
    if kind is int and (value != int(value) or value < 1):
        raise UserError(f"{path}:{line}: {key} must be a positive integer, got {value!r}")
    return kind(value)


MAX_SPAN_S = 1e7  # arrivals over more than 115 days are not one run
MAX_TPOT_S = 2.0  # mean seconds per output token: no serving run is this slow; one in ms is (any over 2 ms a token)


def check_span(times: list[float], where: object, what: str, name: Callable[[int], str]) -> None:
    """Refuse times spread over more than MAX_SPAN_S (a time on another clock); name(i) says where the i-th is."""
    first, last = min(range(len(times)), key=times.__getitem__), max(range(len(times)), key=times.__getitem__)
    if times[last] - times[first] > MAX_SPAN_S:
        raise UserError(f"{where}: {what} spans {times[last] - times[first]:.3g} s ({name(first)} and {name(last)}): "
                        f"more than {MAX_SPAN_S:.0e} s is not one run (a time on another clock?)")


def check_seconds(real: dict[str, np.ndarray], where: object, fields: str) -> None:
    """Refuse times that are not in seconds: a mean TPOT over MAX_TPOT_S is milliseconds (or worse)."""
    tpot = real["tpot"][np.isfinite(real["tpot"])]
    if len(tpot) and float(tpot.mean()) > MAX_TPOT_S:
        raise UserError(f"{where}: a mean of {float(tpot.mean()):.3g} s per output token: are {fields} in seconds?")


PACE_SLACK_S = 60.0  # clock steps and the API server's backlog between a send and its engine queue


def check_pace(path: Path, reqs: list[dict], lines: list[int], sent: list[float]) -> None:
    """Refuse client sends (arrival_time) that do not keep pace with the engine's queue times: each request is
    queued some time after its send, within the run, so queued_ts - arrival_time varies by no more than the
    engine's span (first queue to last token) and some slack; sends in ms spread 1000 times wider."""
    queued = [_number(path, n, r, "queued_ts") for n, r in zip(lines, reqs)]
    ends = [_number(path, n, r, "last_token_ts") for n, r in zip(lines, reqs)]
    lag = [q - t for q, t in zip(queued, sent)]
    first, last = min(range(len(lag)), key=lag.__getitem__), max(range(len(lag)), key=lag.__getitem__)
    span = max(ends) - min(queued)
    if lag[last] - lag[first] > span + PACE_SLACK_S:
        raise UserError(f"{path}: arrival_time and queued_ts drift {lag[last] - lag[first]:.3g} s apart (line "
                        f"{lines[first]} and line {lines[last]}) in a run whose engine span is {span:.3g} s: are the "
                        "arrival_time values in seconds?")


def unique_ids(path: Path, reqs: list[dict], lines: list[int]) -> None:
    """Refuse a request_id logged twice: a request replayed twice would double its load."""
    seen: dict[object, int] = {}
    for row, line in zip(reqs, lines):
        key = row.get("request_id")
        if key is not None and not isinstance(key, (dict, list)):
            if key in seen:
                raise UserError(f"{path}:{line}: request_id {brief(key)} again (first on line {seen[key]}): a request "
                                "logged twice, or two runs in one file")
            seen[key] = line


def read_meta(run_dir: str | Path) -> dict:
    """A run folder's meta.json; every problem is a one-line UserError naming the file."""
    run_dir = not_a_loop(Path(run_dir))
    if run_dir.is_file():
        raise UserError(f"{run_dir}: a file, not a run folder")
    if not run_dir.exists():
        raise UserError(f"{run_dir}: not found (a run folder, a vllm bench serve result file or a multi-turn benchmark CSV)")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: neither a run folder nor a regular file")
    return read_json_object(run_dir / "meta.json", "run settings file")


DERIVED = "derived from requests.jsonl"  # what a run replayed without a workload file names as its workload


def load_run(run_dir: str | Path, workload: str | Path | None, num_blocks: int | None = None) -> RealRun:
    """Read a run folder and its workload (None: derived from requests.jsonl, `derived_workload`);
    every problem is a one-line UserError naming the file.
    num_blocks: the KV blocks to simulate when the run does not record them (or to override them)."""
    run_dir = Path(run_dir)
    meta = read_meta(run_dir)
    meta_path = run_dir / "meta.json"
    engine, notes = engine_settings(meta, meta_path, num_blocks)
    dp, _ = data_parallel(meta, meta_path)
    reqs_path = run_dir / "requests.jsonl"
    numbered = list(_json_lines(reqs_path))
    lines, reqs = [n for n, _ in numbered], [r for _, r in numbered]  # lines: for the messages below
    if meta.get("num_requests") is not None:  # a log cut short (or failed requests not logged) replays a lighter load
        sent = exact_int(meta["num_requests"], f"{meta_path}: num_requests", lo=1)
        if sent != len(reqs):
            raise UserError(f"{meta_path}: num_requests {sent:,}, but {reqs_path} holds {len(reqs):,} requests: a log "
                            "cut short, or of another run (the replay would miss the others' load)")
    unique_ids(reqs_path, reqs, lines)
    if workload is None:
        order, specs, key = derived_workload(reqs_path, reqs, lines)
        lines, reqs, workload = [lines[i] for i in order], [reqs[i] for i in order], DERIVED
        arrivals = ("arrivals: the client's arrival_time" if key == "arrival_time" else
                    "arrivals: the engine's queued_ts (not every request has an arrival_time)")
    else:
        workload = Path(workload)
        specs = load_workload(workload, engine.block_size)
        arrivals = f"arrivals: {workload}"
    if len(specs) != len(reqs):
        raise UserError(f"{reqs_path}: {len(reqs)} requests, but the workload {workload} has {len(specs)}")
    real = {m: np.empty(len(reqs)) for m in METRICS}
    for i, (s, r, line) in enumerate(zip(specs, reqs, lines)):
        prompt, output = s.prompt_tokens, s.output_tokens
        if r.get("finish_reason") == "abort":
            raise UserError(f"{reqs_path}:{line}: finish_reason 'abort': the request stopped before its output was done; "
                            "the replay needs every request finished")
        if (r.get("input_toks"), r.get("output_toks")) != (prompt, output):
            raise UserError(f"{reqs_path}:{line}: lengths {r.get('input_toks')}/{r.get('output_toks')} differ "
                            f"from the workload's {prompt}/{output}")
        q, first, done = (_number(reqs_path, line, r, k) for k in ("queued_ts", "first_token_ts", "last_token_ts"))
        if not q <= first <= done:
            raise UserError(f"{reqs_path}:{line}: timestamps out of order (queued {q}, first {first}, last {done})")
        real["ttft"][i] = first - q
        real["e2e"][i] = done - q
        real["tpot"][i] = (done - first) / (output - 1) if output > 1 else math.nan
    check_seconds(real, reqs_path, "queued_ts, first_token_ts and last_token_ts")
    max_len, place = max_model_len(meta, meta_path)
    if max_len is not None:
        # vLLM stops a request at max_model_len tokens (V0 at one more): a longer one was not this run's
        over = next((k for k, s in enumerate(specs) if s.prompt_tokens + s.output_tokens > max_len + 1), None)
        if over is not None:
            s = specs[over]
            raise UserError(f"{reqs_path}:{lines[over]}: {s.prompt_tokens} prompt + {s.output_tokens} output tokens, over "
                            f"the run's {place} {max_len} (meta.json), where vLLM stops a request: the two files "
                            "disagree")
    check_replay_size(specs, engine, dp, workload, lambda k: f"{reqs_path}: the request on line {lines[k]}")
    return RealRun(engine, tuple(specs), real, _series(run_dir / "timeseries.csv"), meta, tuple(notes), dp,
                   lines != sorted(lines), arrivals=arrivals)


def check_replay_size(specs: tuple[RequestSpec, ...], engine: EngineConfig, dp: int, workload: object,
                      name: Callable[[int], str]) -> None:
    """Refuse, before any work, a replay estimated to need more memory than the machine has, or a
    request the simulated engine would reject (its KV cannot hold it: `name` says which, in which file)."""
    from llumverify.sim.cluster import rejection, sequence_limit
    from llumverify.sim.engines import get_engine

    cfg = SimConfig(engine=engine, cluster=ClusterConfig(num_instances=dp))
    limit = sequence_limit(cfg, get_engine(engine.generation))
    for k, spec in enumerate(specs):
        if why := rejection(spec, limit):
            blocks = f"{engine.num_blocks:,} block{'s' if engine.num_blocks != 1 else ''}"
            raise UserError(f"{name(k)} ({spec.prompt_tokens} prompt + {spec.output_tokens} output tokens) "
                            f"does not fit the simulated KV cache of {limit:,} tokens ({blocks}: "
                            f"{why.replace('_', ' ')}; --num-gpu-blocks sets the count)")
    try:
        check_memory(len(specs), None, cfg, specs[-1].arrival_s - specs[0].arrival_s)
    except UserError as exc:
        raise UserError(f"{workload}: {exc}") from None


def derived_workload(path: Path, reqs: list[dict], lines: list[int]) -> tuple[list[int], tuple[RequestSpec, ...], str]:
    """The workload a run's requests.jsonl implies: each request's lengths, arriving at its client
    send time (`arrival_time`, from the first one's) when every request has one, else at its engine
    queue time (`queued_ts`). A harness may log requests as they finish, so they are put in arrival
    order (ties in file order). Returns the requests' indices in that order, the specs (ids 0..n-1
    in it) and the key the arrivals were read from. No prompt hashes. lines: each request's line in
    the file, for the messages."""
    key = "arrival_time" if all("arrival_time" in r for r in reqs) else "queued_ts"
    times = [_number(path, n, r, key) for n, r in zip(lines, reqs)]
    order = sorted(range(len(reqs)), key=lambda i: (times[i], i))
    check_span(times, path, key, lambda i: f"line {lines[i]}")
    if key == "arrival_time":
        check_pace(path, reqs, lines, times)
    specs = []
    for k, i in enumerate(order):
        prompt, output = (int(_number(path, lines[i], reqs[i], n, int)) for n in ("input_toks", "output_toks"))
        specs.append(RequestSpec(k, times[i] - times[order[0]], prompt, output))
    return order, tuple(specs), key


def load_workload(path: str | Path, block_size: int) -> tuple[RequestSpec, ...]:
    """A workload JSONL's requests in file order (ids 0..n-1, arrival_time_ns / 1e9 as given): arrivals,
    lengths and prompt block ids, given as `hash_ids` or derived from `input_tok_ids` (prompt_hashes.py)."""
    path, specs, last = Path(path), [], -math.inf
    hashes = PromptHashes(block_size)
    for i, (line, w) in enumerate(_json_lines(path)):
        ns = whole_ns(_number(path, line, w, "arrival_time_ns"), f"{path}:{line}")
        arrival = ns / 1e9
        if arrival < last:
            raise UserError(f"{path}:{line}: arrivals must be sorted")
        last = arrival
        prompt, output = int(_number(path, line, w, "input_toks", int)), int(_number(path, line, w, "output_toks", int))
        ids = hashes.of(w, f"{path}:{line}", prompt)
        more = hashes.output_of(w, f"{path}:{line}", prompt, output, ids)
        specs.append(RequestSpec(i, arrival, prompt, output, hash_ids=ids, hash_block=block_size if ids or more else 0,
                                 output_hash_ids=more))
    return tuple(specs)


def _series(path: Path) -> dict[str, list[float]]:
    """timeseries.csv as columns (empty if the run has none: it only feeds a plot)."""
    if not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        return {k: [float(r[k]) for r in rows] for k in (rows[0].keys() if rows else ())}
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        raise UserError(f"{path}: malformed time series ({exc})") from None


def split_ids(run: RealRun, calib_frac: float = 1 / 3) -> tuple[np.ndarray, np.ndarray]:
    """(calibration, validation) request indices: arrivals in the first calib_frac of the window
    calibrate, the rest validate; a run sent all at once (a burst) has no window, so the first
    calib_frac of its requests in send order calibrate."""
    arrivals = np.array([s.arrival_s for s in run.specs])
    if arrivals[-1] == arrivals[0]:
        cut = max(1, min(len(arrivals) - 1, math.ceil(calib_frac * len(arrivals))))
        return np.arange(cut), np.arange(cut, len(arrivals))
    cut = arrivals[0] + calib_frac * (arrivals[-1] - arrivals[0])
    return np.flatnonzero(arrivals <= cut), np.flatnonzero(arrivals > cut)


def split_description(run: RealRun, calib_frac: float) -> str:
    """Which requests split_ids puts in the calibration part, in words."""
    if run.specs[-1].arrival_s == run.specs[0].arrival_s:
        return f"the first {calib_frac:.3g} of the requests in send order (all sent at once)"
    return f"arrivals in the first {calib_frac:.3g} of the window"


def replay(run: RealRun, step: StepCost) -> dict[str, np.ndarray]:
    """Simulated seconds per request (same order as the run) plus admission and finish times, and
    the engine's prefix-cache hit rate (prompt tokens taken from the cache / prompt tokens admitted;
    NaN for an engine without one), a 0-d array."""
    cfg = SimConfig(engine=run.engine, cluster=ClusterConfig(num_instances=run.dp, lockstep=lockstep(run, step)),
                    step=step)
    res = simulate(list(run.specs), "vllm-dp", cfg, keep_records=True)
    recs = sorted(res.records, key=lambda r: r.id)
    if any(r.status != "finished" for r in recs):
        bad = next(r for r in recs if r.status != "finished")
        raise UserError(f"request {bad.id} did not finish in the simulation ({bad.status})")
    arr = np.array([r.arrival_ns for r in recs], dtype=np.float64)
    first = np.array([r.first_token_ns for r in recs], dtype=np.float64)
    fin = np.array([r.finish_ns for r in recs], dtype=np.float64)
    out = np.array([r.output for r in recs])
    tpot = np.where(out > 1, (fin - first) / np.maximum(out - 1, 1), np.nan) / 1e9
    client = run.client.seconds(np.array([s.prompt_tokens for s in run.specs], dtype=np.float64))
    return {"ttft": (first - arr) / 1e9 + client, "tpot": tpot, "e2e": (fin - arr) / 1e9 + client,
            "arrival": arr / 1e9, "admitted": np.array([r.admitted_ns for r in recs]) / 1e9, "finish": fin / 1e9,
            "preemptions": np.array([r.preemptions for r in recs]),
            "prefix_hit_rate": np.array(res.summary.get("prefix_hit_rate", np.nan), dtype=np.float64)}


def lockstep(run: RealRun, step: StepCost) -> int:
    """How many of the run's data-parallel ranks step together (all of an MoE engine's, else 1)."""
    return lockstep_ranks(step.model or str(run.meta.get("model") or ""), run.dp)


def compare(real: dict[str, np.ndarray], sim: dict[str, np.ndarray], ids: np.ndarray | None = None) -> dict[str, object]:
    """validation.json's error figures over the requests `ids` (all if None)."""
    n = len(real["e2e"])
    ids = np.arange(n) if ids is None else ids
    doc: dict[str, object] = {"n_requests": int(len(ids))}
    for m in METRICS:
        r, s = real[m][ids], sim[m][ids]
        ok = ~np.isnan(r) & ~np.isnan(s) & (r > 0)
        r, s = r[ok], s[ok]
        doc[m] = {"real_mean_s": float(r.mean()), "sim_mean_s": float(s.mean()),
                  "real_p90_s": float(np.percentile(r, 90)), "sim_p90_s": float(np.percentile(s, 90)),
                  "real_p99_s": float(np.percentile(r, 99)), "sim_p99_s": float(np.percentile(s, 99)),
                  "median_ape": float(np.median(np.abs(s - r) / r))}
    return doc


def fit_fixed_ns(run: RealRun, step: StepCost, ids: np.ndarray, lo: int = 0, hi: int = 40_000_000,
                 tol_ns: int = 50_000) -> tuple[int, list[tuple[int, float]]]:
    """The per-step engine constant (ns) whose replay matches the mean TPOT of requests `ids`.

    Mean TPOT grows with the per-step time, so bisection finds it; returns the constant and the
    (fixed_ns, simulated mean TPOT) points tried.
    """
    target = float(np.nanmean(run.real["tpot"][ids]))
    tried: list[tuple[int, float]] = []

    def mean_tpot(fixed: int) -> float:
        value = float(np.nanmean(replay(run, replace(step, fixed_ns=fixed))["tpot"][ids]))
        tried.append((fixed, value))
        return value

    if mean_tpot(lo) >= target:
        return lo, tried
    while hi - lo > tol_ns:
        mid = (lo + hi) // 2
        if mean_tpot(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) // 2, tried


def occupancy(sim: dict[str, np.ndarray], t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Simulated (running, waiting) at times t: admitted..finish counts as running (preemption gaps included)."""
    adm, fin, arr = sim["admitted"], sim["finish"], sim["arrival"]
    running = ((adm[None, :] <= t[:, None]) & (t[:, None] < fin[None, :])).sum(axis=1)
    waiting = ((arr[None, :] <= t[:, None]) & (t[:, None] < adm[None, :])).sum(axis=1)
    return running, waiting
