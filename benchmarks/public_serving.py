"""First principles against published vLLM v0.15.1 serving runs on H100 (nothing fitted on them).

    python benchmarks/public_serving.py error_records.csv llmservingsim_error_records_matched.csv [--out DIR]

The two files are inference-sim/sim-to-real-accuracy-validation at dcec3fd (no licence file: read,
cited, not copied into this repository):

    git -C sim-to-real-accuracy-validation show dcec3fd:results_trainval/error_records.csv > error_records.csv
    git -C sim-to-real-accuracy-validation show dcec3fd:results/llmservingsim_error_records_matched.csv > llmservingsim_error_records_matched.csv

Each run's workload is regenerated from its published shape and simulated on one vllm-v1 instance
(llumverify/validation/public_serving.py says what is and is not modelled). Prints, per run, the
simulated and measured mean and P90 E2E and TTFT and mean ITL, and per file the median APE and how
many runs fall within the issue's bars (E2E and ITL 10 %, TTFT 20 %); --out writes results.json
and table.md there.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from tabulate import tabulate

from llumverify.errors import UserError
from llumverify.files.paths import write_atomic
from llumverify.validation.public_serving import METRICS, predict, read_experiments

HEADER = """# First principles against published vLLM v0.15.1 serving runs on H100

Measured aggregates: inference-sim/sim-to-real-accuracy-validation at dcec3fd (`results_trainval/error_records.csv`,
`results/llmservingsim_error_records_matched.csv`, column `actual`; TTFT and ITL at the client). Workloads regenerated from
their published shapes (llumverify/validation/public_serving.py); one vllm-v1 instance on the catalog's H100, KV from the
catalogs, first-principles step costs; nothing fitted on these runs. Regenerate: `python benchmarks/public_serving.py
error_records.csv llmservingsim_error_records_matched.csv --out reports/validation/public-serving` (the two files as that script's docstring extracts them).

"""
BARS = {"e2e_mean": 0.10, "e2e_p90": 0.10, "ttft_mean": 0.20, "ttft_p90": 0.20, "itl_mean": 0.10}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out}: not a folder")
    rows, summary = [], []
    for path in args.csv:
        experiments, skipped = read_experiments([path])
        errors = {m: [] for m in METRICS}
        for exp in experiments:
            sim = predict(exp)
            err = {m: sim[m] / exp.actual[m] - 1 for m in METRICS}
            for m in METRICS:
                errors[m].append(err[m])
            rows.append({"file": path.name, "run": exp.name, "model": exp.model, "tp": exp.tp,
                         "workload": exp.workload, "cpu_offload": exp.cpu_offload,
                         "sim_ms": sim, "real_ms": exp.actual, "error": err})
            print(f"{exp.name}: " + ", ".join(f"{m} {100 * err[m]:+.0f} %" for m in METRICS), flush=True)
        summary.append({"file": path.name, "runs": len(experiments), "skipped": skipped,
                        **{m: {"median_ape": float(np.median(np.abs(e))), "median_signed": float(np.median(e)),
                               "within_bar": int(sum(abs(x) <= BARS[m] for x in e))} for m, e in errors.items()}})
    table = _tables(rows, summary)
    print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "results.json", json.dumps({"runs": rows, "summary": summary}, indent=1) + "\n")
        write_atomic(args.out / "table.md", HEADER + table + "\n")
    return 0


def _tables(rows: list[dict], summary: list[dict]) -> str:
    head = ["file", "runs"] + [f"{m} median APE (signed); within bar" for m in METRICS]
    lines = [[s["file"], s["runs"]] + [f"{100 * s[m]['median_ape']:.1f} % ({100 * s[m]['median_signed']:+.1f} %); "
                                       f"{s[m]['within_bar']}/{s['runs']}" for m in METRICS] for s in summary]
    per_run = [[r["run"], r["workload"], r["tp"]] + [f"{r['sim_ms'][m]:.0f} / {r['real_ms'][m]:.0f} "
                                                     f"({100 * r['error'][m]:+.0f} %)" for m in METRICS] for r in rows]
    return (tabulate(lines, head, tablefmt="github") + "\n\nsimulated / measured ms (signed error):\n\n"
            + tabulate(per_run, ["run", "workload", "tp", *METRICS], tablefmt="github"))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as exc:
        sys.exit(f"error: {exc}")
