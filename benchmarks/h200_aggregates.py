"""Published vLLM 0.14.1 serving aggregates on one H200 (Llama-3.1-70B fp8), against first principles.

    python benchmarks/h200_aggregates.py GTC_DOKS [--out DIR]

GTC_DOKS: DO-Solutions/gtc-2026-doks at c70feba (MIT; the `fetch` tool's mirror works, read with `git
show`). `dev/vllm/benchmarks/phase0/20260224-185458/` holds `vllm bench serve` results (aggregates
only: no per-request lists) of 300 ShareGPT requests at 0.5-3 req/s, and its report.md the server:
vLLM 0.14.1 (V1), 1 x H200 141GB, nvidia/Llama-3.1-70B-Instruct-FP8 at TP1, fp8_e4m3 KV cache,
max_num_batched_tokens 8,192, prefix caching. Without per-request lengths the run cannot be replayed,
so this checks the decode step the load implies against the run's median TPOT: Little's law gives the
mean number of requests in flight, c = request throughput x mean E2E; a step of c decodes over
c x (mean prompt + half the mean output) KV tokens is priced from first principles, and the
arrivals' prefills are spread over the steps (each second holds `rate` prefills of the mean prompt:
step = decode step / (1 - rate x the prefill's extra time)). Nothing is fitted on these runs. An
approximation of the load, not a replay: it says whether the H200 step is priced right, no more.
Prints the signed error (simulated / measured median TPOT - 1) per rate; --out writes results.json
and table.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from report_main import git, report_main
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.settings.config import HardwareConfig
from llumverify.sim import engine_profile

RUNS = "dev/vllm/benchmarks/phase0/20260224-185458"
COMMIT = "c70feba"
SOURCE = HardwareConfig(gpu="H200", model="nvidia/Llama-3.1-70B-Instruct-FP8", tp=1, kv_cache_dtype="fp8")
HEADER = f"""# Published vLLM 0.14.1 serving aggregates on one H200, Llama-3.1-70B fp8: the decode step the load implies

DO-Solutions/gtc-2026-doks at {COMMIT} (MIT), `{RUNS}/rate-*.json` (vllm bench serve aggregates, 300 ShareGPT requests a
rate) and its report.md (vLLM 0.14.1 V1, TP1, fp8 KV, max_num_batched_tokens 8,192). Not a replay (no per-request
lengths): the step of c = throughput x mean E2E decodes, plus the arrivals' prefills spread over the steps, from
first principles against the measured median TPOT. Nothing fitted. Regenerate: `python benchmarks/h200_aggregates.py
GTC_DOKS --out reports/validation/h200-aggregates`.

"""


def implied_tpot_ms(doc: dict) -> float:
    """The simulated step time (ms) at the load this aggregate implies (module docstring)."""
    n = doc["completed"]
    prompt, output = doc["total_input_tokens"] / n, doc["total_output_tokens"] / n
    inflight = max(1, round(doc["request_throughput"] * doc["mean_e2el_ms"] / 1e3))
    step = engine_profile.step_cost(SOURCE)
    ctx = round(inflight * (prompt + output / 2))
    decode = step.step_ns([], inflight, ctx)
    prefill = step.step_ns([(round(prompt), 0)], inflight, ctx) - decode  # a prefill's extra time in its step
    busy = doc["request_rate"] * prefill / 1e9  # the share of time the arrivals' prefills take
    if busy >= 1:
        raise UserError(f"at {doc['request_rate']} req/s the prefills alone fill every step: no steady decode step")
    return decode / (1 - busy) / 1e6


def build(repo: Path) -> tuple[list[dict], str]:
    if not repo.is_dir():
        raise UserError(f"{repo}: not a folder (a DO-Solutions/gtc-2026-doks clone or its git directory)")
    names = sorted((p for p in git(repo, "ls-tree", "--name-only", f"{COMMIT}:{RUNS}/").split()
                    if p.startswith("rate-") and p.endswith(".json")), key=lambda p: float(p[5:-5]))
    if not names:
        raise UserError(f"{repo}: no {RUNS}/rate-*.json at {COMMIT}")
    rows = []
    for name in names:
        doc = json.loads(git(repo, "show", f"{COMMIT}:{RUNS}/{name}"))
        sim = implied_tpot_ms(doc)
        rows.append({"rate": doc["request_rate"], "inflight": doc["request_throughput"] * doc["mean_e2el_ms"] / 1e3,
                     "median_tpot_ms": doc["median_tpot_ms"], "simulated_ms": sim,
                     "error": sim / doc["median_tpot_ms"] - 1})
    body = [[r["rate"], f"{r['inflight']:.1f}", f"{r['median_tpot_ms']:.2f}", f"{r['simulated_ms']:.2f}",
             f"{100 * r['error']:+.1f} %"] for r in rows]
    return rows, tabulate(body, headers=["req/s", "in flight", "median TPOT ms", "simulated step ms", "signed"],
                          tablefmt="github") + "\n"


def main(argv: list[str]) -> int:
    return report_main("h200_aggregates", __doc__, argv, build, HEADER)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
