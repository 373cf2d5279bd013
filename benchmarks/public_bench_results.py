"""Published `vllm bench serve` result files of a GPU and TP never fitted, replayed by validate.

    python benchmarks/public_bench_results.py DIR [--out DIR]

DIR: surajssd/llm-k8s's Llama-3.3-70B results at 58b61c5 (Apache-2.0), extracted with

    git -C llm-k8s archive 58b61c5 results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1 | tar -x -C DIR

One vLLM 0.8.3 server (V1; `--tensor-parallel-size 8 --enable-prefix-caching`, every other setting
vLLM's default; configs/llama-3-3-70b-instruct/one-node-four-gpus/k8s/deployment.yaml) on 8 ×
A100-40GB SXM (Azure ND96asr_v4), benchmarked by vLLM's benchmark_serving.py with 200 ShareGPT
prompts (seed 0) at 1, 4, 16 and inf requests/s, in that order (benchmark-script-run.sh). The files
have no start_times: validate redraws the sends (llumverify/validation/bench_sends.py). Nothing here
is fitted on these runs: first principles, the default client time. The 1 req/s run came first; the
later three re-sent the same 200 prompts to a server with prefix caching on, so their prompts were
cached, which a replay without prompt hashes does not know: their TTFT (and the prefill inside their
TPOT) is not comparable, only the first run's is. Prints the signed errors (simulated / real - 1)
of mean and P90 TTFT, TPOT and E2E; --out writes results.json and table.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

from public_runs import BARS, replay
from report_main import report_main
from tabulate import tabulate

from llumverify.errors import UserError

FOLDER = "results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
ARGS = ["--gpu", "A100-40GB", "--tp", "8", "--no-async-scheduling"]  # vLLM 0.8.3: before async became the default
ORDER = ("01", "04", "16", "inf")  # the order the script ran them: only the first met a cold prefix cache
HEADER = """# Published vLLM 0.8.3 result files, Llama-3.3-70B at TP8 on 8 x A100-40GB, replayed with nothing fitted

surajssd/llm-k8s at 58b61c5 (Apache-2.0), `{folder}/*_qps_*.json`: vLLM's benchmark_serving.py results (200 ShareGPT
prompts, seed 0), no start_times (sends redrawn as vLLM drew them). First principles (`validate FILE {args}`), default
client time, nothing fitted on these runs. The runs went 1, 4, 16, inf req/s on one server with prefix caching on: only
the first met a cold cache; the others' prompts were cached (not known to the replay), so only its TTFT compares.
Signed error: simulated / real - 1. Regenerate: `python benchmarks/public_bench_results.py DIR --out
reports/validation/public-bench-results` (DIR as that script's docstring extracts it).

"""


def files(root: Path) -> list[tuple[str, Path]]:
    """(request rate, result file) in the order the benchmark ran them."""
    found = {p.stem.rsplit("_", 1)[-1]: p for p in (root / FOLDER).glob("*_qps_*.json")}
    if set(found) != set(ORDER):
        raise UserError(f"{root / FOLDER}: expected the results at {', '.join(ORDER)} req/s, found "
                        f"{', '.join(sorted(found)) or 'none'} (extract llm-k8s as the docstring says)")
    return [(q, found[q]) for q in ORDER]


def row(rate: str, doc: dict) -> dict:
    errors = {f"{m}_{q}": doc[m][f"sim_{q}_s"] / doc[m][f"real_{q}_s"] - 1 for m in BARS for q in ("mean", "p90")}
    return {"request_rate": rate, "cold_prefix_cache": rate == ORDER[0], "errors": errors,
            "real_mean_s": {m: doc[m]["real_mean_s"] for m in BARS}, "sim_mean_s": {m: doc[m]["sim_mean_s"] for m in BARS},
            "within_bars": {k: abs(v) <= BARS[k.split("_")[0]] for k, v in errors.items()},
            "step_cost": doc["step_cost"]["source"], "client_ms_added": doc["client_ms_added"],
            "client_us_per_prompt_token_added": doc["client_us_per_prompt_token_added"]}


def table(rows: list[dict]) -> str:
    keys = [f"{m}_{q}" for m in BARS for q in ("mean", "p90")]
    body = [[r["request_rate"], "cold" if r["cold_prefix_cache"] else "warm (not comparable)"]
            + [f"{100 * r['errors'][k]:+.1f} %" + ("" if r["within_bars"][k] else " (out)") for k in keys]
            for r in rows]
    return tabulate(body, headers=["req/s", "prefix cache", *keys], tablefmt="github") + "\n"


def build(root: Path) -> tuple[list[dict], str]:
    rows = [row(rate, replay(path, ARGS)) for rate, path in files(root)]
    return rows, table(rows)


def main(argv: list[str]) -> int:
    return report_main("public_bench_results", __doc__, argv, build, HEADER.format(folder=FOLDER, args=" ".join(ARGS)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
