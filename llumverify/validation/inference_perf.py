"""inference-perf run folders: the workload a run really sent, and what its client measured per stage.

inference-sim/training publishes 16 vLLM runs on H100 (February 2026) as inference-perf folders:
`exp-config.yaml` (the server: model, tensor_parallelism, max_num_batched_tokens, max_num_seqs),
`results/config.yaml` (the benchmark's own dump of the config it parsed) and
`results/stage_K_lifecycle_metrics.json` (the client's measurements per load stage). The folders'
`profile.yaml` asks for multi-turn chat with per-group users, but the dumped config of every run has
no multi-turn field and `num_groups 10`, `num_prompts_per_group 10` (that version's names; the
profile's names went unread, so the defaults ran): open-loop sends at a constant rate per stage,
request i carrying prompt i mod 100 (inference-perf's SharedPrefixDataGenerator without multi-turn:
a group's system prompt plus one of its questions, shuffled once), so every prompt recurs and the
prefix cache can hold it whole. A dump with multi-turn enabled is refused: its users are not read here.

The client's token counts are its own re-tokenisation of random-token text: prompt_len is what it
counted (≈ 4 % above the nominal system + question), used as the prompt length; its output counts and
per-token times are not the server's (inter_token_latency's median is 0.06 ms: tokens reach it in
pairs), so only request latency and TTFT are compared, and the decode time per token as
(E2E - TTFT) / (max_tokens - 1) of their means (ignore_eos: the server makes max_tokens).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llumverify.errors import UserError
from llumverify.requests import RequestSpec

BLOCK = 16
MAX_REQUESTS = 2_000_000  # a run's requests (these runs: 16,800 at most); more is not a benchmark run
STAGE_FILE = re.compile(r"stage_(\d+)_lifecycle_metrics\.json$")
DUMP_KEYS = ("num_groups", "num_prompts_per_group", "system_prompt_len", "question_len", "output_len")


@dataclass(frozen=True)
class Stage:
    """One load stage: its rate and length as configured, and what the client measured (ms; the prompt
    length in the client's tokens)."""

    rate: float
    seconds: float
    requests: int
    prompt_len: float
    e2e_mean: float
    e2e_p90: float
    ttft_mean: float
    ttft_p90: float


@dataclass(frozen=True)
class Run:
    """One inference-perf run folder: its server, its shared-prefix workload and its measured stages."""

    name: str
    model: str
    tp: int
    max_num_batched_tokens: int
    max_num_seqs: int
    groups: int
    per_group: int
    system: int
    question: int
    output: int
    stages: tuple[Stage, ...]


def read_run(folder: Path) -> Run:
    """The run in `folder`; a missing file or key, or a workload this module does not replay, is a
    one-line UserError naming the file."""
    server = _flat_yaml(folder / "exp-config.yaml")
    dump = folder / "results" / "config.yaml"
    text = _text(dump)
    if re.search(r"^\s*enable_multi_turn_chat:\s*true", text, re.M):
        raise UserError(f"{dump}: multi-turn chat is enabled; its closed-loop users are not replayed here")
    if not re.search(r"^\s*type:\s*shared_prefix\s*$", text, re.M) or not re.search(r"^\s*type:\s*constant\s*$", text, re.M):
        raise UserError(f"{dump}: only shared_prefix data at a constant load is replayed")
    found = {k: re.search(rf"^\s*{k}:\s*(\S+)\s*$", text, re.M) for k in DUMP_KEYS}
    shape = {k: _int(dump, k, m.group(1) if m else None) for k, m in found.items()}
    plan = re.findall(r"^\s*-\s*rate:\s*(\S+)\s*\n\s*duration:\s*(\S+)\s*$", text, re.M)
    if not plan:
        raise UserError(f"{dump}: no load stages (rate, duration) found")
    stages = tuple(_stage(folder / "results", k, _number(dump, "rate", rate), _number(dump, "duration", seconds))
                   for k, (rate, seconds) in enumerate(plan))
    sent = sum(stage.requests for stage in stages)
    if sent > MAX_REQUESTS or shape["num_groups"] * shape["num_prompts_per_group"] > MAX_REQUESTS:
        raise UserError(f"{dump}: {sent:,} requests of {shape['num_groups'] * shape['num_prompts_per_group']:,} prompts: "
                        f"more than {MAX_REQUESTS:,}, not replayed")
    conf = folder / "exp-config.yaml"
    if not server.get("model"):
        raise UserError(f"{conf}: model is missing")
    return Run(folder.name, server["model"], _int(conf, "tensor_parallelism", server.get("tensor_parallelism")),
               _int(conf, "max_num_batched_tokens", server.get("max_num_batched_tokens")),
               _int(conf, "max_num_seqs", server.get("max_num_seqs")), shape["num_groups"],
               shape["num_prompts_per_group"], shape["system_prompt_len"], shape["question_len"], shape["output_len"],
               stages)


def specs(run: Run, seed: int = 0) -> list[RequestSpec]:
    """The requests the run sent (shared_prefix_specs), each stage's prompts of its measured mean length."""
    return shared_prefix_specs(run.groups, run.per_group, run.system, run.output,
                               [(s.rate, s.seconds, s.requests, max(1, round(s.prompt_len))) for s in run.stages], seed)


def shared_prefix_specs(groups: int, per_group: int, system: int, output: int,
                        stages: Sequence[tuple[float, float, int, int]], seed: int = 0) -> list[RequestSpec]:
    """What inference-perf's shared-prefix generator sends without multi-turn chat: stage by stage
    (rate, seconds, requests, prompt tokens) at its constant rate, request i carrying prompt i mod P of
    the P = groups x per_group prompts (shuffled once by `seed`, as inference-perf shuffles them),
    whose system prompt's full blocks its group shares and whose other blocks are its own, so a
    recurring prompt hits the prefix cache whole."""
    count = groups * per_group
    order = np.random.default_rng(seed).permutation(count)
    shared = system // BLOCK
    out: list[RequestSpec] = []
    start = 0.0
    for rate, seconds, requests, prompt in stages:
        own = max(0, prompt // BLOCK - shared)
        for k in range(requests):
            p = int(order[len(out) % count])
            group = p // per_group
            hashes = tuple(group * shared + b for b in range(shared)) + tuple(
                groups * shared + p * own + b for b in range(own))
            out.append(RequestSpec(len(out), start + k / rate, prompt, output, hash_ids=hashes, hash_block=BLOCK))
        start += seconds
    return out


def _stage(results: Path, k: int, rate: float, seconds: float) -> Stage:
    path = results / f"stage_{k}_lifecycle_metrics.json"
    try:
        data = json.loads(_text(path))
        ok = data["successes"]
        lat = ok["latency"]
        failed = int(data["failures"]["count"])
        values = (int(ok["count"]), float(ok["prompt_len"]["mean"]), 1e3 * float(lat["request_latency"]["mean"]),
                  1e3 * float(lat["request_latency"]["p90"]), 1e3 * float(lat["time_to_first_token"]["mean"]),
                  1e3 * float(lat["time_to_first_token"]["p90"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not an inference-perf lifecycle-metrics file ({exc.__class__.__name__}: {exc})") from None
    if failed:
        raise UserError(f"{path}: {failed} requests failed; a replay would not know which")
    if not (0 < rate < math.inf and 0 < seconds < math.inf) or not all(math.isfinite(v) and v > 0 for v in values):
        raise UserError(f"{path}: rate, duration, counts, prompt length and latencies must be positive numbers")
    if values[2] <= values[4]:
        raise UserError(f"{path}: mean request latency {values[2]:g} ms is not above mean TTFT {values[4]:g} ms")
    if values[0] != round(rate * seconds):
        raise UserError(f"{path}: {values[0]} requests succeeded where {rate:g}/s for {seconds:g} s sends "
                        f"{round(rate * seconds)}")
    return Stage(rate, seconds, *values)


def _number(path: Path, key: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{path}: a stage's {key} must be a number, got {raw[:40]!r}") from None
    if not 0 < value < 1e9:
        raise UserError(f"{path}: a stage's {key} must be positive and finite, got {raw[:40]!r}")
    return value


def _flat_yaml(path: Path) -> dict[str, str]:
    """`key: value` lines (exp-config.yaml is flat); anything else is an error naming the line."""
    out: dict[str, str] = {}
    for n, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or line[0].isspace():
            raise UserError(f"{path}:{n}: expected a flat `key: value` line")
        out[key.strip()] = value.strip()
    return out


def _int(path: Path, key: str, raw: str | None) -> int:
    """An integer setting written as one (2.9 or 1e3 is refused, not read as 2 or 1000)."""
    if raw is None:
        raise UserError(f"{path}: {key} is missing")
    if not re.fullmatch(r"[0-9]{1,12}", raw.strip()):
        raise UserError(f"{path}: {key} must be a whole number, got {raw.strip()[:40]!r}")
    value = int(raw)
    if value < 1:
        raise UserError(f"{path}: {key} must be at least 1, got {value}")
    return value


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read ({exc.__class__.__name__})") from None
