"""SemiAnalysis InferenceX's multi-turn vLLM sweep on B200 (Llama-3.3-70B NVFP4, TP1-8), replayed.

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
at least 176.5 GiB). The checkpoint is priced as NVFP4 (sim/quantization.py: 4.5 bits a weight,
W4A4 at fp4_gemm_flops of the FP4 peak, the weights streamed at fp4_gemm_bw of the bandwidth plus fp4_gemm_ns
and fp4_gemm_ps_per_k per element of K a GEMM, all fitted on published times of the kernel these servers logged, FlashInfer's CUTLASS FP4 GEMM ("Using flashinfer-cutlass for NVFP4 GEMM"; since session 31, before with vLLM's own); until
2026-12-06 it was priced as fp8, twice its bytes, for want of a 4-bit format). Not replayed, and listed: the runs with CPU KV offload (not modelled), and the runs whose
last attempt overlapped another experiment in sweep.log (two sweeps ran at once on one machine, and
their servers competed for the GPUs: `concurrent_runs`).
Each run's client CSV is replayed by `llumverify validate CSV --gpu B200 --model
nvidia/Llama-3.3-70B-Instruct-FP4 --tp T --num-gpu-blocks N --max-num-seqs B --max-num-batched-tokens 8192
--kv-cache-dtype fp8 --cudagraph-mode full_decode_only --attention-backend flashinfer-fa2` (the settings from the
run's vllm_command.txt and config.yaml, the attention backend from the log's "FLASHINFER backend" and the command's
use_trtllm_attention=0: FlashInfer's FA2 kernels on the fp8 cache, sim/kv_dequant.py; N from the
KV tokens its last server log reports; llumverify/validation/multiturn.py: a conversation's turns
share their prompt and answer blocks, a client's requests one after another (closed loop), the default client time,
7.5 ms a request and 2.25 µs a prompt token, added). Prompt lengths are as the client counted them: message contents without the
chat template (tens of tokens a turn more on the server). First principles, nothing fitted on these
runs. The prefix-cache hit rate the sharing implies, the simulated one and the server's
(experiment_summary.csv `gpu_hit_rate`) are printed side by side.
Prints the signed errors (simulated / real - 1) of mean and P90 TTFT, TPOT and E2E per run, and
over the 16-client runs the real and simulated mean TPOT as a + b/TP (least squares over TP 1-8):
a is the per-step time that does not shrink with TP (its GEMMs' fixed times among it, and the prefill steps' CPU floor), b the per-GPU
work (weight bytes, attention). A run whose CSV holds fewer requests than it asked for (`-n`) ended early and is marked.
At 16 clients it also splits each server's time, from its one-second samples, into decode-only steps and admitted
requests (`step_split`), beside the replay's decode-only step and its floor under a step with a prefill chunk.
--out writes results.json and table.md.
"""
from __future__ import annotations

import csv
import io
import math
import re
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
from public_runs import BARS, replay
from report_main import git, report_main
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.validation.attention_backend import attention_record, replayed_backend
from llumverify.validation.cudagraphs import replayed_mode
from llumverify.validation.multiturn import BLOCK, conversation_specs, read_rows

COMMIT = "2582608b1"
SWEEP = "experimental/multiturn/vllm_benchmark/results/sweep_results_20260204_062339"
CHECKPOINT = "nvidia/Llama-3.3-70B-Instruct-FP4"  # priced as the catalog's Llama-3-70B in NVFP4 (checkpoint_names.split_format)
GPU = "B200"
RUN = re.compile(r"tp(\d+)_bs(\d+)_offload(on|off)")
STARTED = re.compile(r"^Running experiment: (\S+).*\n(?:.*\n){0,3}?\s+Started at (.+)$", re.M)
FINISHED = re.compile(r"^Experiment (\S+) finished at (.+)$", re.M)
HEADER = """# SemiAnalysis InferenceX multi-turn sweep on B200 (vLLM 0.15.0, Llama-3.3-70B NVFP4, TP1-8), replayed

SemiAnalysisAI/InferenceX (Apache-2.0) at {commit}, `{sweep}`: one `vllm serve {checkpoint}` per folder (TP T,
max-num-seqs B, fp8 KV, prefix caching, async scheduling, CUDA graphs for decode-only steps: every config.yaml sets
cudagraph_mode FULL_DECODE_ONLY, so each step with a prefill chunk ran without a graph: replayed with
`--cudagraph-mode full_decode_only`, such a step lasting at least 80 layers x 0.717 ms of CPU launches, a prior from
published runs of another model on other hosts, sim/graphless.py, since 2026-12-06), B closed-loop clients of WildChat conversations, on B200 (the repository's
README). Replayed by `llumverify validate` from first principles with the weights priced as NVFP4 (4.5 bits a weight,
W4A4 at {eff.fp4_gemm_flops} of the FP4 peak, the weights streamed at {eff.fp4_gemm_bw} of the bandwidth plus {fixed_us} us and {per_k_ns} ns per element of K a GEMM,
all fitted on published kernel times: benchmarks/w4_kernels_published.py, since session 28 with FlashInfer's own CUTLASS
rows and the K term (before: 0.37 of the bandwidth and 6.0 us), since session 31 on FlashInfer's kernel only, which the servers ran (before: 0.49 of the bandwidth and 0.49 of the peak, 561 ps a K element, with vLLM's own kernel); until 2026-12-06 priced as fp8; blind then, held out since: the per-step
and per-GPU gaps were known), attention's KV reads and query-key pair compute (q·k and p·v) on the fp8 KV cache priced at {slowdown:.3f}x
their 16-bit-cache time, as FlashInfer's
FA2 kernels ran it (its TRT-LLM kernels off: `--attention-backend flashinfer-fa2`, the median of published H20 decode
rows, sim/kv_dequant.py, since 2026-12-06 session 28; before, at its fp8 bytes), a mixed step's decodes run by FlashInfer's decode
kernel apart from the prefill rows, unpadded (vLLM's backend on sm_100, roofline.pads_mixed_decodes: since session 30; before,
with the padded-tile surcharge fitted on FlashAttention 2), prompt and answer blocks shared along each conversation, each client's requests one after
another as it sent them (a client's first request at its recorded time, each later one at the simulated end of the
client's previous one plus its recorded turnaround and the client time, however early against its recorded time: the
benchmark's client sends on the answer; since session 30; in session 29 at the later of that and its recorded time;
before, at that end if later),
nothing fitted on these runs; TTFT and E2E measured at the client, the
default client time added (7.5 ms a request, 2.25 µs a prompt token; 8 ms a request before session 31). Signed error: simulated / real - 1. Regenerate: `python benchmarks/inferencex_multiturn.py
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


def graph_mode(config: str, where: str) -> str:
    """validate's --cudagraph-mode for a config.yaml: its whole `compilation-config:` value (a JSON string, quoted
    or not) read as a run's engine_kwargs would be (llumverify/validation/cudagraphs.py replayed_mode: NONE is
    refused there); vLLM's default where the file sets none."""
    m = re.search(r"^compilation-config:[ \t]*(.*?)[ \t]*$", config, re.M)
    value = m.group(1) if m else ""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return replayed_mode({"engine_kwargs": {"compilation_config": value}} if value else {}, where)


def attention_backend(command: str, log: str, kv: str, where: str) -> str:
    """validate's --attention-backend for a server with a `kv` cache ("auto" or "fp8"): the backend its log names
    ("... for FLASHINFER backend"), its vLLM version and the command's --attention-config.use_trtllm_attention, read
    as a run's record would be (llumverify/validation/attention_backend.py replayed_backend)."""
    from llumverify.sim.catalog import get_gpu

    named = re.search(r"for (\w+) backend", log)
    trtllm = re.search(r"--attention-config\.use_trtllm_attention[ =](\S+)", command)
    if trtllm and trtllm.group(1).lower() not in ("0", "1", "false", "true"):
        raise UserError(f"{where}: --attention-config.use_trtllm_attention {trtllm.group(1)}: not 0, 1, false or true")
    config = {"backend": named.group(1) if named else None,
              "use_trtllm_attention": trtllm.group(1).lower() in ("1", "true") if trtllm else None}
    meta = {"vllm_version": server_facts(log)[0], "engine_kwargs": {"attention_config": config}}
    return replayed_backend(attention_record(meta, where), get_gpu(GPU).arch, kv, where)


def server_facts(log: str) -> tuple[str, int | None]:
    """(vLLM version, KV tokens or None) from a server log."""
    version = re.search(r"Initializing a V1 LLM engine \(v([^)]+)\)", log)
    kv = re.search(r"GPU KV cache size: ([\d,]+) tokens", log)
    return (version.group(1) if version else "unknown"), (int(kv.group(1).replace(",", "")) if kv else None)


def replay_run(repo: Path, name: str, measured_hit: dict[str, float]) -> dict:
    """One run's client CSV replayed by `validate` (llumverify/validation/multiturn.py) and scored."""
    tp, seqs, _ = RUN.fullmatch(name).groups()
    command, config = show(repo, f"{name}/vllm_command.txt"), show(repo, f"{name}/config.yaml")
    served = command.split()[2] if command.startswith("vllm serve ") else ""
    if served != CHECKPOINT:
        raise UserError(f"{name}: serves {served or 'nothing'}, not {CHECKPOINT}")
    logs = sorted(n for n in git(repo, "ls-tree", "--name-only", f"{COMMIT}:{SWEEP}/{name}").split()
                  if n.startswith("server") and n.endswith(".log"))
    if not logs:
        raise UserError(f"{name}: no server log (the vLLM version and KV capacity come from it)")
    log = show(repo, f"{name}/{logs[-1]}")  # the attempt the CSV is from
    version, kv_tokens = server_facts(log)
    if kv_tokens is None:
        raise UserError(f"{name}/{logs[-1]}: no \"GPU KV cache size\" line")
    settings = ["--max-num-seqs", flag(command, "max-num-seqs", f"{name}/vllm_command.txt")]
    for key in ("max-num-batched-tokens", "kv-cache-dtype"):
        settings += [f"--{key}", flag(config, key, f"{name}/config.yaml")]
    graphs = graph_mode(config, f"{name}/config.yaml")
    backend = attention_backend(command, log, "fp8" if settings[settings.index("--kv-cache-dtype") + 1].startswith("fp8")
                                else "auto", name)
    settings += ["--cudagraph-mode", graphs, "--attention-backend", backend]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.csv"
        client_csv = show(repo, f"{name}/metrics_client_metrics.csv")
        path.write_text(client_csv, encoding="utf-8")
        rows = read_rows(path)
        metrics = show(repo, f"{name}/metrics_server_metrics.csv")
        held, steps = kv_in_use(metrics, kv_tokens), step_split(metrics)
        _, _, _, hit, empty = conversation_specs(rows)
        doc = replay(path, ["--gpu", GPU, "--model", CHECKPOINT, "--tp", tp, "--num-gpu-blocks", str(kv_tokens // BLOCK),
                            *settings])
    asked = _asked(repo, name)
    errors = {f"{m}_{q}": doc[m][f"sim_{q}_s"] / doc[m][f"real_{q}_s"] - 1 for m in BARS for q in ("mean", "p90")}
    return {"run": name, "tp": int(tp), "clients": int(seqs), "requests": len(rows), "asked": asked,
            "complete": len(rows) >= asked, "empty_prompts": empty, "vllm": version, "kv_tokens": kv_tokens,
            "implied_hit": hit, "sim_hit": doc["simulated_prefix_hit_rate"], "measured_hit": measured_hit.get(name),
            "server_kv_tokens": held, "server_steps": steps, "real_ttft_slopes": ttft_slopes(client_csv),
            "priced_decode_ms": None if held is None else priced_decode_ms(int(tp), int(seqs), held, backend),
            "errors": errors, "real_mean_s": {m: doc[m]["real_mean_s"] for m in BARS},
            "sim_mean_s": {m: doc[m]["sim_mean_s"] for m in BARS}, "client_ms_added": doc["client_ms_added"],
            "client_us_per_prompt_token_added": doc["client_us_per_prompt_token_added"],
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


def kv_in_use(metrics_csv: str, kv_tokens: int) -> float | None:
    """Mean KV tokens the server held for running requests (metrics_server_metrics.csv, one sample a
    second: kv_cache_usage_pct of the logged capacity) over the samples with requests running; None
    without any."""
    held = []
    for r in csv.DictReader(io.StringIO(metrics_csv)):
        try:
            running, pct = float(r["num_requests_running"]), float(r["kv_cache_usage_pct"])
        except (KeyError, TypeError, ValueError):
            continue
        if running > 0 and 0 <= pct <= 100:
            held.append(pct / 100 * kv_tokens)
    return sum(held) / len(held) if held else None


def priced_decode_ms(tp: int, running: int, kv_tokens: float, backend: str) -> float:
    """The replay's decode-only step of `running` sequences over `kv_tokens` cached tokens, ms (as validate prices
    the sweep: fp8 KV, `backend`'s attention)."""
    from llumverify.settings.config import HardwareConfig
    from llumverify.sim.engine_profile import step_cost

    cost = step_cost(HardwareConfig(gpu=GPU, model=CHECKPOINT, tp=tp, kv_cache_dtype="fp8", attention_backend=backend))
    return round(cost.step_ns((), running, round(kv_tokens)) / 1e6, 1)


def step_split(metrics_csv: str) -> dict[str, float] | None:
    """The server's step times from its one-second samples (metrics_server_metrics.csv): in each second, steps =
    generated tokens / running requests and admissions = requests finished (a closed loop admits one per one
    finished); over the middle 80 % of the seconds with two or more running and none waiting, the second's ms =
    decode x steps + extra x admissions (least squares, no constant: a ratio per second would let a stalled
    second's few steps outweigh the rest). Returns the decode-only step, a step admitting one request (decode +
    extra) and that one's standard error, ms; None with fewer than 20 such seconds, or none admitting a request."""
    rows = list(csv.DictReader(io.StringIO(metrics_csv)))
    pts = []
    for a, b in zip(rows, rows[1:]):
        try:
            dt = float(b["relative_time_sec"]) - float(a["relative_time_sec"])
            running = (float(a["num_requests_running"]) + float(b["num_requests_running"])) / 2
            tokens = float(b["generation_tokens_total"]) - float(a["generation_tokens_total"])
            done = float(b["request_success_total"]) - float(a["request_success_total"])
            waiting = float(b["num_requests_waiting"])
        except (KeyError, TypeError, ValueError):
            continue
        if dt > 0 and running >= 2 and tokens > 0 and waiting == 0:
            pts.append((1e3 * dt, tokens / running, done))
    n = len(pts)
    if n < 20:
        return None
    y, steps, done = np.array(pts[n // 10:n - n // 10]).T
    a = np.c_[steps, done]
    if np.linalg.matrix_rank(a) < 2:
        return None
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    cov = np.linalg.inv(a.T @ a) * float(np.sum((y - a @ coef) ** 2)) / (len(y) - 2)
    se = float(np.sqrt(cov[0, 0] + cov[1, 1] + 2 * cov[0, 1]))  # of decode + extra
    return {"decode_ms": round(float(coef[0]), 1), "admit_ms": round(float(coef.sum()), 1), "admit_se_ms": round(se, 1)}


def ttft_slopes(client_csv: str) -> dict[str, float] | None:
    """Real TTFT (ms) against the prompt tokens the client counted: least squares over every request of
    a + b·(uncached thousands, by the CSV's approx_cached_percent) + c·(prompt thousands), and over the
    requests with under 50 uncached tokens (no prefill to speak of) of a0 + c0·(prompt thousands): c0 is
    a cost per prompt token, cached or not (front end, hashing). Rows without finite numbers are left out;
    None with fewer than 20 rows, or fewer than 20 under 50 uncached tokens."""
    pts = []
    for r in csv.DictReader(io.StringIO(client_csv)):
        try:
            n, cached, ttft = float(r["input_num_tokens"]), float(r["approx_cached_percent"]), float(r["ttft_ms"])
        except (KeyError, TypeError, ValueError):
            continue
        if all(math.isfinite(x) for x in (n, cached, ttft)):
            pts.append((ttft, n * (1 - cached / 100) / 1e3, n / 1e3))
    if len(pts) < 20:
        return None
    t, u, n = np.array(pts).T
    few = u < 0.05
    if few.sum() < 20:
        return None
    (a, b, c), *_ = np.linalg.lstsq(np.c_[np.ones_like(t), u, n], t, rcond=None)
    (a0, c0), *_ = np.linalg.lstsq(np.c_[np.ones(int(few.sum())), n[few]], t[few], rcond=None)
    return {"a_ms": round(float(a), 1), "per_1k_uncached_ms": round(float(b), 1), "per_1k_prompt_ms": round(float(c), 2),
            "no_prefill_requests": int(few.sum()), "no_prefill_a_ms": round(float(a0), 1),
            "no_prefill_per_1k_prompt_ms": round(float(c0), 2)}


def kv_fit(rows: list[dict], hit_gap: float = 0.05) -> dict[int, dict[str, list[float]]]:
    """Per TP degree with three or more complete runs whose simulated prefix-cache hit rate is within
    `hit_gap` of the server's (else the two did different prefill work): mean TPOT (ms) against the
    server's mean KV tokens in use (thousands), a + b·k, real and simulated (least squares)."""
    out = {}
    for tp in sorted({r["tp"] for r in rows}):
        pts = [r for r in rows if r["tp"] == tp and r["complete"] and r["server_kv_tokens"] is not None
               and r["measured_hit"] is not None and abs(r["sim_hit"] - r["measured_hit"]) <= hit_gap]
        if len(pts) < 3:
            continue
        x = np.array([[1.0, r["server_kv_tokens"] / 1e3] for r in pts])
        out[tp] = {}
        for key in ("real_mean_s", "sim_mean_s"):
            coef, *_ = np.linalg.lstsq(x, np.array([1e3 * r[key]["tpot"] for r in pts]), rcond=None)
            out[tp][key.split("_")[0]] = [round(float(coef[0]), 2), round(float(coef[1]), 4)]
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


def table(rows: list[dict], skipped: dict[str, list[str]], fit: dict[str, list[float]] | None,
          kv: dict[int, dict[str, list[float]]]) -> str:
    keys = [f"{m}_{q}" for m in BARS for q in ("mean", "p90")]
    body = [[r["tp"], r["clients"], f"{r['requests']} / {r['asked']}" + ("" if r["complete"] else " (ended early)"),
             " / ".join(_pct(r[k]) for k in ("implied_hit", "sim_hit", "measured_hit")),
             f"{1e3 * r['real_mean_s']['tpot']:.1f} / {1e3 * r['sim_mean_s']['tpot']:.1f}",
             "-" if r["server_kv_tokens"] is None else f"{r['server_kv_tokens'] / 1e3:.0f}"]
            + [f"{100 * r['errors'][k]:+.1f} %" + ("" if r["within_bars"][k] else " (out)") for k in keys] for r in rows]
    text = tabulate(body, headers=["tp", "clients", "requests / asked", "prefix hit % implied / sim / server",
                                   "TPOT ms real / sim", "KV in use, k tokens", *keys], tablefmt="github") + "\n"
    if fit:
        (ra, rb), (sa, sb) = fit["real"], fit["sim"]
        text += (f"\nMean TPOT at 16 clients, TP 1-8, as a + b/TP (ms): real {ra} + {rb}/TP, simulated {sa} + {sb}/TP: "
                 f"the per-step time that does not shrink with TP is {ra} ms real, {sa} ms simulated (the GEMMs' fixed "
                 "times and the prefill steps' CPU floor among it), b the per-GPU work (weight bytes, attention).\n")
    if kv:
        text += ("\nMean TPOT against the KV tokens the server held for running requests (thousands, k; the "
                 "server's kv_cache_usage_pct of its logged capacity, averaged over the run), per TP over the "
                 "complete runs whose simulated prefix-cache hit rate is within 5 points of the server's, a + b·k ms: "
                 + "; ".join(f"TP{tp} real {f['real'][0]} + {f['real'][1]}·k, simulated {f['sim'][0]} + {f['sim'][1]}·k"
                             for tp, f in kv.items())
                 + ". KV in use grows with the clients, so b also carries every per-sequence cost.\n")
    split = [r for r in rows if r["clients"] == 16 and r["server_steps"]]
    if split:
        from llumverify.sim.catalog import get_model
        from llumverify.sim.graphless import GRAPHLESS_LAYER_NS

        floor = get_model(CHECKPOINT).layers * GRAPHLESS_LAYER_NS / 1e6
        text += ("\nThe servers' steps at 16 clients, from their one-second samples (each second's time as decode-only "
                 "steps and requests admitted, least squares over the seconds with none waiting: `step_split`), "
                 "decode-only / admitting one request ± its standard error: "
                 + "; ".join(f"TP{r['tp']} {r['server_steps']['decode_ms']} / {r['server_steps']['admit_ms']} "
                             f"± {r['server_steps']['admit_se_ms']}" for r in split)
                 + f" ms. Priced: a step with a prefill chunk at least {floor:.1f} ms (sim/graphless.py, a prior from "
                 "other hosts that these samples check: nothing was fitted on them), a decode-only step of 16 over "
                 "the KV the server held "
                 + ", ".join(f"TP{r['tp']} {r['priced_decode_ms']}" for r in split) + " ms.\n")
    more = [r for r in rows if r["clients"] > 16 and r["server_steps"] and r["priced_decode_ms"]
            and (r["measured_hit"] or 0) > 0.5]
    if more:
        text += ("\nWith more clients (the runs whose server's prefix cache held), the server's decode-only step (as "
                 "above) against the replay's, priced at the clients' count over the KV the server held, ms: "
                 + "; ".join(f"TP{r['tp']} with {r['clients']} {r['server_steps']['decode_ms']} / {r['priced_decode_ms']} "
                             f"({100 * (r['priced_decode_ms'] / r['server_steps']['decode_ms'] - 1):+.0f} %)" for r in more)
                 + ": the priced step grows more slowly with the sequences than the server's (per-sequence time, on the "
                 "CPU or in the kernels, that the replay lacks; these samples cannot tell which).\n")
    slopes = [r for r in rows if r["clients"] == 16 and r["real_ttft_slopes"]]
    if slopes:
        text += ("\nReal TTFT at 16 clients against the client's prompt tokens (least squares over each run's requests; "
                 "uncached by the CSV's approx_cached_percent: `ttft_slopes`), ms + ms per thousand uncached + ms per "
                 "thousand prompt tokens: "
                 + "; ".join(f"TP{r['tp']} {f['a_ms']} + {f['per_1k_uncached_ms']} + {f['per_1k_prompt_ms']}"
                             for r in slopes for f in [r["real_ttft_slopes"]])
                 + ". Over the requests with under 50 uncached tokens alone, per thousand prompt tokens (cached: the "
                 "front end's tokenisation and hashing, which the replay does not price): "
                 + ", ".join(f"TP{r['tp']} {r['real_ttft_slopes']['no_prefill_per_1k_prompt_ms']}" for r in slopes)
                 + " ms.\n")
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
    fit, kv = tp_fit(rows), kv_fit(rows)
    return ({"runs": rows, "not_replayed": skipped, "tpot_tp_fit_ms": fit,
             "tpot_kv_fit_ms": {str(tp): f for tp, f in kv.items()}}, table(rows, skipped, fit, kv))


def main(argv: list[str]) -> int:
    from llumverify.sim.kv_dequant import DEQUANT_RATIO
    from llumverify.sim.roofline import load_efficiency

    eff = load_efficiency()
    return report_main("inferencex_multiturn", __doc__, argv, build,
                       HEADER.format(commit=COMMIT, sweep=SWEEP, checkpoint=CHECKPOINT, eff=eff,
                                     fixed_us=eff.fp4_gemm_ns / 1e3, per_k_ns=eff.fp4_gemm_ps_per_k / 1e3,
                                     slowdown=DEQUANT_RATIO))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
