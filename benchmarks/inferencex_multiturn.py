"""SemiAnalysis InferenceX's multi-turn vLLM sweep on B200 (Llama-3.3-70B NVFP4, TP1-8), replayed blind.

    python benchmarks/inferencex_multiturn.py INFERENCEX [--out DIR]

INFERENCEX: a clone of SemiAnalysisAI/InferenceX (Apache-2.0; the `fetch` tool's mirror works, read
with `git show` at COMMIT, 2026-02-27; the results left the tree later, in f1c910ecd). SWEEP holds one
folder per server setting `tp{T}_bs{B}_offload{on,off}`: `vllm serve nvidia/Llama-3.3-70B-Instruct-FP4`
(vLLM 0.15.0, V1, async scheduling, prefix caching, chunked prefill at 8,192 tokens, fp8 KV cache,
CUDA graphs for decode-only steps: config.yaml) at TP T with max-num-seqs B, driven by vLLM's
benchmark_serving_multi_turn.py with B clients, each running one WildChat conversation at a time
(closed loop). Its per-request CSV gives the send time, prompt and output tokens, TTFT and latency
at the client, and the conversation; the prompts are not published.

GPU: B200 (experimental/multiturn/README.md at COMMIT: "On B200 Nebius cluster"; the logs agree: at
TP8 a worker took 5.04 GiB for weights and 153.85 GiB for KV at gpu-memory-utilization 0.9, a GPU of
at least 176.5 GiB). The model prices 8- and 16-bit weights only, so the NVFP4 checkpoint is
replayed as Llama-3.3-70B in fp8: twice its weight bytes and half its FP4 compute, so the simulated
steps are if anything slower than the real kernels' data allow: an error "too fast" is a lower
bound. Not replayed, and listed: the runs with CPU KV offload (not modelled), and the runs whose
last attempt overlapped another experiment in sweep.log (two sweeps ran at once on one machine, and
their servers competed for the GPUs: `concurrent_runs`).
Replay, per run:
- prompt blocks: a conversation's turn re-sends the previous turn's prompt and answer (each turn's
  prompt is at least the last one's plus its output), so their full 16-token blocks are shared, the
  rest new; the answer's blocks are named too (`output_hash_ids`), so the simulator caches them as
  vLLM caches generated blocks. The prefix-cache hit rate this implies, the simulated one and the
  server's (experiment_summary.csv `gpu_hit_rate`) are printed side by side;
- prompt lengths as the client counted them: message contents without the chat template (tens of
  tokens a turn more on the server; a prompt counted as 0 tokens is replayed as 1);
- sends at the recorded times (open loop at the closed loop's times); KV capacity from the run's
  last server log; max-num-seqs and the token budget as served;
- first principles, nothing fitted on these runs; TTFT and E2E as the client measured them, with no
  client time added (the 8 ms `validate` adds to a `vllm bench serve` file is not).
Prints the signed errors (simulated / real - 1) of mean and P90 TTFT, TPOT and E2E per run, and
over the 16-client runs the real and simulated mean TPOT as a + b/TP (least squares over TP 1-8):
a is the per-step time that does not shrink with TP (b depends on the fp8 stand-in's bytes, a does
not). A run whose CSV holds fewer requests than it asked for (`-n`) ended early and is marked.
--out writes results.json and table.md.
"""
from __future__ import annotations

import csv
import io
from datetime import datetime
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
from public_runs import BARS, replay
from report_main import git, report_main
from tabulate import tabulate

from llumverify.errors import UserError

COMMIT = "2582608b1"
SWEEP = "experimental/multiturn/vllm_benchmark/results/sweep_results_20260204_062339"
CHECKPOINT = "nvidia/Llama-3.3-70B-Instruct-FP4"
PRICED_AS = "meta-llama/Llama-3.3-70B-Instruct-FP8"  # the catalog's Llama-3-70B shapes, fp8 weights
GPU = "NVIDIA B200"
BLOCK = 16
RUN = re.compile(r"tp(\d+)_bs(\d+)_offload(on|off)")
STARTED = re.compile(r"^Running experiment: (\S+).*\n(?:.*\n){0,3}?\s+Started at (.+)$", re.M)
FINISHED = re.compile(r"^Experiment (\S+) finished at (.+)$", re.M)
HEADER = """# SemiAnalysis InferenceX multi-turn sweep on B200 (vLLM 0.15.0, Llama-3.3-70B NVFP4, TP1-8), replayed blind

SemiAnalysisAI/InferenceX (Apache-2.0) at {commit}, `{sweep}`: one `vllm serve {checkpoint}` per folder (TP T,
max-num-seqs B, fp8 KV, prefix caching, async scheduling), B closed-loop clients of WildChat conversations, on B200
(the repository's README). Replayed by `llumverify validate` from first principles with the weights priced as fp8 (the
model has no 4-bit format: twice NVFP4's bytes, so "too fast" is a lower bound), prompt and answer blocks shared along
each conversation, sends at the recorded times, nothing fitted on these runs; TTFT and E2E measured at the client, no
client time added. Signed error: simulated / real - 1. Regenerate: `python benchmarks/inferencex_multiturn.py
INFERENCEX --out reports/validation/inferencex-b200`.

"""


def show(repo: Path, path: str) -> str:
    """One file of the sweep at COMMIT."""
    return git(repo, "show", f"{COMMIT}:{SWEEP}/{path}")


def run_names(repo: Path) -> list[str]:
    """The sweep's run folders, by TP, clients, offload."""
    names = [n for n in git(repo, "ls-tree", "--name-only", f"{COMMIT}:{SWEEP}").split() if RUN.fullmatch(n)]
    if not names:
        raise UserError(f"{repo}: no tp*_bs*_offload* folders under {SWEEP} at {COMMIT}")
    return sorted(names, key=lambda n: tuple(int(x) if x.isdigit() else x for x in RUN.fullmatch(n).groups()))


def _when(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S UTC %Y")


def concurrent_runs(log: str) -> set[str]:
    """Runs whose last finished attempt overlaps another finished experiment in sweep.log (an attempt
    runs from its latest start to its finish; the log holds every sweep started into the folder)."""
    starts = [(name, _when(t)) for name, t in STARTED.findall(log)]
    spans = []
    for name, end in ((name, _when(t)) for name, t in FINISHED.findall(log)):
        begun = [t for n, t in starts if n == name and t <= end]
        if begun:
            spans.append((name, max(begun), end))
    last = {name: (t0, t1) for name, t0, t1 in sorted(spans, key=lambda s: s[1])}
    return {name for name, (t0, t1) in last.items()
            if any(b0 < t1 and t0 < b1 for other, b0, b1 in spans if (other, b0, b1) != (name, t0, t1))}


def flag(text: str, name: str, where: str) -> str:
    """The value of `--name VALUE` (or `name: value`, config.yaml) in a command or config text."""
    m = re.search(rf"(?:--{re.escape(name)}[ =]|^{re.escape(name)}:\s*)(\S+)", text, re.M)
    if m is None:
        raise UserError(f"{where}: no {name}")
    return m.group(1).strip("'\"")


def server_facts(log: str) -> tuple[str, int | None]:
    """(vLLM version, KV tokens or None) from a server log."""
    version = re.search(r"Initializing a V1 LLM engine \(v([^)]+)\)", log)
    kv = re.search(r"GPU KV cache size: ([\d,]+) tokens", log)
    return (version.group(1) if version else "unknown"), (int(kv.group(1).replace(",", "")) if kv else None)


def conversation_blocks(rows: list[dict]) -> tuple[list[dict], float, int]:
    """The replay's workload lines (in send order) with each prompt's full blocks as ids, shared along
    a conversation (a turn re-sends the last turn's prompt and output), and its answer's blocks
    named after them; the prefix hit rate that implies (shared prompt tokens / prompt tokens); how
    many empty prompts were counted as one token."""
    rows = sorted(rows, key=lambda r: float(r["start_time_ms"]))
    t0 = float(rows[0]["start_time_ms"])
    chains: dict[str, list[int]] = {}
    next_id = shared = total = empty = 0
    lines = []
    for r in rows:
        prompt, out = int(r["input_num_tokens"]), int(r["output_num_tokens"])
        if out < 1:
            raise UserError(f"conversation {r['conversation_id']}: a request with {out} output tokens")
        if prompt < 1:
            prompt, empty = 1, empty + 1
        chain = chains.get(r["conversation_id"], [])
        kept = chain[:min(len(chain), prompt // BLOCK)]
        shared += len(kept) * BLOCK
        total += prompt
        fresh = (prompt + out) // BLOCK - len(kept)  # the rest of this prompt's full blocks and its answer's
        chain = chains[r["conversation_id"]] = kept + list(range(next_id, next_id + fresh))
        next_id += fresh
        lines.append({"arrival_time_ns": round((float(r["start_time_ms"]) - t0) * 1e6), "input_toks": prompt,
                      "output_toks": out, "hash_ids": chain[:prompt // BLOCK],
                      "output_hash_ids": chain[prompt // BLOCK:], "start_ms": float(r["start_time_ms"]),
                      "ttft_ms": float(r["ttft_ms"]), "latency_ms": float(r["latency_ms"])})
    return lines, shared / total, empty


def write_run(folder: Path, lines: list[dict], tp: int, seqs: int, budget: int, util: float, kv_dtype: str,
              version: str, kv_tokens: int | None) -> Path:
    """A run folder validate reads (meta.json, requests.jsonl at the client's times) and its workload."""
    run = folder / "run"
    run.mkdir(parents=True)
    meta = {"schema_version": 1, "model": PRICED_AS, "vllm_version": version,
            "engine_kwargs": {"model": PRICED_AS, "tensor_parallel_size": tp, "data_parallel_size": 1,
                              "max_num_seqs": seqs, "max_num_batched_tokens": budget, "dtype": "bfloat16",
                              "kv_cache_dtype": kv_dtype},
            "num_requests": len(lines), "hardware": {"device_count": tp, "device_name": GPU}}
    if kv_tokens is not None:
        meta["kv_cache"] = {"num_gpu_blocks": kv_tokens // BLOCK, "block_size": BLOCK, "gpu_memory_utilization": util,
                            "enable_prefix_caching": True, "num_kv_tokens": kv_tokens // BLOCK * BLOCK}
    (run / "meta.json").write_text(json.dumps(meta, indent=1))
    with open(run / "requests.jsonl", "w", encoding="utf-8") as f:
        for i, x in enumerate(lines):
            s = x["start_ms"] / 1e3
            f.write(json.dumps({"request_id": f"r{i}", "input_toks": x["input_toks"], "output_toks": x["output_toks"],
                                "queued_ts": s, "scheduled_ts": s, "first_token_ts": s + x["ttft_ms"] / 1e3,
                                "last_token_ts": s + x["latency_ms"] / 1e3}) + "\n")
    keys = ("arrival_time_ns", "input_toks", "output_toks", "hash_ids", "output_hash_ids")
    with open(folder / "workload.jsonl", "w", encoding="utf-8") as f:
        for x in lines:
            f.write(json.dumps({k: x[k] for k in keys}) + "\n")
    return run


def client_rows(repo: Path, name: str) -> list[dict]:
    """The run's per-request client CSV, checked for the columns the replay reads."""
    where = f"{name}/metrics_client_metrics.csv"
    rows = list(csv.DictReader(io.StringIO(show(repo, where))))
    if not rows:
        raise UserError(f"{where}: no requests")
    kinds = {"start_time_ms": float, "ttft_ms": float, "latency_ms": float, "input_num_tokens": int,
             "output_num_tokens": int, "conversation_id": str}
    for i, r in enumerate(rows, start=2):  # line 1 is the header
        for key, kind in kinds.items():
            value = (r.get(key) or "").strip()  # a short row reads None
            try:
                if not value:
                    raise ValueError
                kind(value)
            except ValueError:
                raise UserError(f"{where}:{i}: unreadable {key} {value!r}") from None
    return rows


def replay_run(repo: Path, name: str, measured_hit: dict[str, float]) -> dict:
    """One run replayed and scored."""
    tp, seqs, _ = RUN.fullmatch(name).groups()
    command, config = show(repo, f"{name}/vllm_command.txt"), show(repo, f"{name}/config.yaml")
    served = command.split()[2] if command.startswith("vllm serve ") else ""
    if served != CHECKPOINT:
        raise UserError(f"{name}: serves {served or 'nothing'}, not {CHECKPOINT}")
    logs = sorted(n for n in git(repo, "ls-tree", "--name-only", f"{COMMIT}:{SWEEP}/{name}").split()
                  if n.startswith("server") and n.endswith(".log"))
    if not logs:
        raise UserError(f"{name}: no server log (the vLLM version and KV capacity come from it)")
    version, kv_tokens = server_facts(show(repo, f"{name}/{logs[-1]}"))  # the attempt the CSV is from
    rows = client_rows(repo, name)
    asked = _asked(repo, name)
    lines, hit, empty = conversation_blocks(rows)
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp), lines, int(tp), int(seqs),
                        int(flag(config, "max-num-batched-tokens", f"{name}/config.yaml")),
                        float(flag(command, "gpu-memory-utilization", f"{name}/vllm_command.txt")),
                        flag(config, "kv-cache-dtype", f"{name}/config.yaml"), version, kv_tokens)
        doc = replay(run, ["--workload", str(Path(tmp) / "workload.jsonl")])
    errors = {f"{m}_{q}": doc[m][f"sim_{q}_s"] / doc[m][f"real_{q}_s"] - 1 for m in BARS for q in ("mean", "p90")}
    return {"run": name, "tp": int(tp), "clients": int(seqs), "requests": len(rows), "asked": asked,
            "complete": len(rows) >= asked, "empty_prompts": empty, "vllm": version, "kv_tokens": kv_tokens,
            "implied_hit": hit, "sim_hit": doc["simulated_prefix_hit_rate"], "measured_hit": measured_hit.get(name),
            "errors": errors, "real_mean_s": {m: doc[m]["real_mean_s"] for m in BARS},
            "sim_mean_s": {m: doc[m]["sim_mean_s"] for m in BARS},
            "within_bars": {k: abs(v) <= BARS[k.split("_")[0]] for k, v in errors.items()}}


def _asked(repo: Path, name: str) -> int:
    """The request count the benchmark command asked for (`-n N`)."""
    m = re.search(r"\s-n\s+(\d+)", show(repo, f"{name}/benchmark_command.txt"))
    if m is None:
        raise UserError(f"{name}/benchmark_command.txt: no -n")
    return int(m.group(1))


def measured_hits(repo: Path) -> dict[str, float]:
    """experiment_summary.csv's prefix-cache hit rate of each run, as a fraction (runs without a
    number left out)."""
    out = {}
    for r in csv.DictReader(io.StringIO(show(repo, "experiment_summary.csv"))):
        try:
            out[r["exp_name"]] = float(r["gpu_hit_rate"]) / 100
        except (KeyError, TypeError, ValueError):
            continue
    return out


def tp_fit(rows: list[dict], clients: int = 16) -> dict[str, list[float]] | None:
    """Mean TPOT (ms) of the complete runs at `clients` clients as a + b/TP, real and simulated (least
    squares); None with fewer than two TP degrees."""
    pts = [r for r in rows if r["clients"] == clients and r["complete"]]
    if len({r["tp"] for r in pts}) < 2:
        return None
    x = np.array([[1.0, 1.0 / r["tp"]] for r in pts])
    fit = {}
    for key in ("real_mean_s", "sim_mean_s"):
        coef, *_ = np.linalg.lstsq(x, np.array([1e3 * r[key]["tpot"] for r in pts]), rcond=None)
        fit[key.split("_")[0]] = [round(float(c), 2) for c in coef]
    return fit


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table(rows: list[dict], skipped: dict[str, list[str]], fit: dict[str, list[float]] | None) -> str:
    keys = [f"{m}_{q}" for m in BARS for q in ("mean", "p90")]
    body = [[r["tp"], r["clients"], f"{r['requests']} / {r['asked']}" + ("" if r["complete"] else " (ended early)"),
             " / ".join(_pct(r[k]) for k in ("implied_hit", "sim_hit", "measured_hit")),
             f"{1e3 * r['real_mean_s']['tpot']:.1f} / {1e3 * r['sim_mean_s']['tpot']:.1f}"]
            + [f"{100 * r['errors'][k]:+.1f} %" + ("" if r["within_bars"][k] else " (out)") for k in keys] for r in rows]
    text = tabulate(body, headers=["tp", "clients", "requests / asked", "prefix hit % implied / sim / server",
                                   "TPOT ms real / sim", *keys], tablefmt="github") + "\n"
    if fit:
        (ra, rb), (sa, sb) = fit["real"], fit["sim"]
        text += (f"\nMean TPOT at 16 clients, TP 1-8, as a + b/TP (ms): real {ra} + {rb}/TP, simulated {sa} + {sb}/TP: "
                 f"the per-step time that does not shrink with TP is {ra} ms real, {sa} ms simulated (b rests on the "
                 "fp8 stand-in's weight bytes, a does not).\n")
    for why, names in skipped.items():
        if names:
            text += f"\nNot replayed ({why}): {', '.join(names)}.\n"
    empty = sum(r["empty_prompts"] for r in rows)
    if empty:
        text += f"\n{empty} requests recorded with 0 prompt tokens were replayed with 1.\n"
    return text


def build(repo: Path) -> tuple[dict, str]:
    names = run_names(repo)
    overlapped = concurrent_runs(show(repo, "sweep.log"))
    skipped = {"CPU KV offload, not modelled": [n for n in names if n.endswith("offloadon")],
               "ran while another experiment ran, sweep.log says": [
                   n for n in names if n.endswith("offloadoff") and n in overlapped]}
    hits = measured_hits(repo)
    rows = [replay_run(repo, n, hits) for n in names if n.endswith("offloadoff") and n not in overlapped]
    fit = tp_fit(rows)
    return {"runs": rows, "not_replayed": skipped, "tpot_tp_fit_ms": fit}, table(rows, skipped, fit)


def main(argv: list[str]) -> int:
    return report_main("inferencex_multiturn", __doc__, argv, build,
                       HEADER.format(commit=COMMIT, sweep=SWEEP, checkpoint=CHECKPOINT))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
