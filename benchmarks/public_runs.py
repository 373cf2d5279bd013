"""Real vLLM 0.19 runs that LLMServingSim publishes, replayed with nothing fitted on them.

    python benchmarks/public_runs.py LSS_DIR [--out DIR]

LSS_DIR: casys-kaist/LLMServingSim's runs and kernel profiles at 5daddb2 (MIT), extracted with

    git -C LLMServingSim archive 5daddb2 bench/examples profiler/perf | tar -x -C LSS_DIR

Every run folder `bench/examples/<GPU>/<model>/vllm/` (meta.json, requests.jsonl; 300 ShareGPT
requests at 10/s) is replayed by `llumverify validate RUN --gpu <GPU>` with its workload derived
from requests.jsonl (no workload files are published: client send times, lengths, no prompt
hashes): from first principles, and from the run's own GPU/model kernel profile
(`profiler/perf/<GPU>/<model>/bf16`, its tp1 tables scaled to the run's TP) where there is one.
Neither source is fitted on any of these runs, and fixed_ns is 0, so every request is held out.
What the first-principles efficiencies were fitted on (sim/efficiency.toml): the RTX PRO 6000
kernel profiles of Llama-3.1-8B and Qwen3-32B at tp1, the shared copies of two of these profiles.
Prints mean and P90 signed error of TTFT, TPOT and E2E over all requests and whether each is within
the issue's bars (E2E and TPOT 10 %, TTFT 20 %); --out writes results.json and table.md.
"""
from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from report_main import report_main
from tabulate import tabulate

from llumverify.cli import main as cli
from llumverify.errors import UserError

BARS = {"ttft": 0.20, "tpot": 0.10, "e2e": 0.10}
HEADER = """# Real vLLM 0.19 runs published by LLMServingSim, replayed with nothing fitted on them

casys-kaist/LLMServingSim at 5daddb2 (MIT): `bench/examples/<GPU>/<model>/vllm/` (300 ShareGPT requests at 10/s, engine
timestamps per request) and `profiler/perf/` (kernel profiles). Workloads derived from each run's requests.jsonl (client
send times and lengths; no prompt hashes, so no prompt shares cached blocks with another). Every request is held out: first principles'
efficiencies were fitted on the RTX PRO 6000 kernel profiles of Llama-3.1-8B and Qwen3-32B (tp1), never on a run; the
profile source replays the run's own GPU/model kernel tables; engine constant 0. Signed error: simulated / real - 1.
Regenerate: `python benchmarks/public_runs.py LSS_DIR --out reports/validation/public-runs` (LSS_DIR as that script's
docstring extracts it).

"""


def runs(root: Path) -> list[Path]:
    found = sorted(p.parent for p in (root / "bench" / "examples").glob("*/*/vllm/requests.jsonl"))
    if not found:
        raise UserError(f"{root}: no bench/examples/<GPU>/<model>/vllm/requests.jsonl (extract LLMServingSim as the "
                        "docstring says)")
    return found


def sources(root: Path, run: Path) -> dict[str, list[str]]:
    """validate's step-cost arguments per source: first principles, and the run's own profile if published."""
    gpu, hf_model = run.parts[-3], json.loads((run / "meta.json").read_text())["model"]
    chosen = {"first principles": ["--gpu", gpu]}
    profile = root / "profiler" / "perf" / gpu / hf_model / "bf16"
    if (profile / "tp1").is_dir():
        chosen["profile"] = ["--profile", str(profile)]
    return chosen


def replay(run: Path, args: list[str]) -> dict:
    """validate's validation.json for this run and source (its printed lines go to stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "v"
        try:
            with contextlib.redirect_stdout(sys.stderr):
                cli(["validate", str(run), *args, "--out", str(out)])
        except SystemExit as exc:
            if exc.code:
                raise UserError(f"{run}: validate exited {exc.code}") from None
        return json.loads((out / "validation.json").read_text())


def row(root: Path, run: Path, source: str, doc: dict) -> dict:
    errors = {f"{m}_{q}": doc[m][f"sim_{q}_s"] / doc[m][f"real_{q}_s"] - 1 for m in BARS for q in ("mean", "p90")}
    meta = json.loads((run / "meta.json").read_text())["engine_kwargs"]
    return {"run": f"{run.parts[-3]}/{run.parts[-2]}", "source": source, "tp": meta.get("tensor_parallel_size", 1),
            "dp": meta.get("data_parallel_size", 1), "ep": bool(meta.get("enable_expert_parallel")),
            "errors": errors, "step_cost": doc["step_cost"]["source"].replace(str(root), "LSS_DIR"),
            "within_bars": {k: abs(v) <= BARS[k.split("_")[0]] for k, v in errors.items()},
            "real_mean_s": {m: doc[m]["real_mean_s"] for m in BARS}}


def table(rows: list[dict]) -> str:
    keys = [f"{m}_{q}" for m in BARS for q in ("mean", "p90")]
    body = [[r["run"], r["source"], f"TP{r['tp']}" + (f" DP{r['dp']}" + (" EP" if r["ep"] else "") if r["dp"] > 1 else "")]
            + [f"{100 * r['errors'][k]:+.1f} %" + ("" if r["within_bars"][k] else " (out)") for k in keys]
            for r in rows]
    within = sum(all(r["within_bars"].values()) for r in rows)
    return (tabulate(body, headers=["run", "source", "parallel", *keys], tablefmt="github")
            + f"\n\nWithin every bar (E2E and TPOT 10 %, TTFT 20 %, mean and P90): {within} of {len(rows)}.\n")


PEER_ROWS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "Latency"}  # our metric -> summary.txt's


def peer(run: Path) -> dict[str, float] | None:
    """LLMServingSim's own simulator on this run, as its `validation/summary.txt` beside the run
    reports it (its Diff% column, sim / vLLM - 1 at full precision): signed errors of the mean and
    P90, or None without the file."""
    path = run.parent / "validation" / "summary.txt"
    if not path.is_file():
        return None
    diff = {" ".join(line.split()[:2]): line.split()[4] for line in path.read_text().splitlines()
            if len(line.split()) == 5}
    try:
        return {f"{m}_{q}": float(diff[f"{name} {q.capitalize()}"].rstrip("%")) / 100
                for m, name in PEER_ROWS.items() for q in ("mean", "p90")}
    except (KeyError, ValueError):
        raise UserError(f"{path}: no Diff% column for the TTFT, TPOT and Latency mean and P90 rows") from None


def peer_table(runs_: list[Path]) -> str:
    """The same errors for LLMServingSim's own simulator, where the run's folder publishes them."""
    body = [[f"{r.parts[-3]}/{r.parts[-2]}"] + [f"{100 * e[k]:+.1f} %" for k in e] for r in runs_ if (e := peer(r))]
    if not body:
        return ""
    keys = [f"{m}_{q}" for m in BARS for q in ("mean", "p90")]
    return ("\nFor comparison, LLMServingSim's own simulator on the same runs, as each run's "
            "`bench/examples/<GPU>/<model>/validation/summary.txt` reports it (its kernel profiles of the run's own GPU "
            "and model, its engine model; not run here):\n\n"
            + tabulate(body, headers=["run", *keys], tablefmt="github") + "\n")


def build(root: Path) -> tuple[list[dict], str]:
    rows = [row(root, run, name, replay(run, args)) for run in runs(root) for name, args in sources(root, run).items()]
    return rows, table(rows) + peer_table(runs(root))


def main(argv: list[str]) -> int:
    return report_main("public_runs", __doc__, argv, build, HEADER)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
