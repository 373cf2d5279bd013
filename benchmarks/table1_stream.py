"""The ShareGPT / BurstGPT points with rank-correlated input and output lengths: how much the pairing matters.

    python benchmarks/table1_stream.py                                  # as stored (= experiments/testbed-traces)
    python benchmarks/table1_stream.py --rank-corr 0.5                  # inputs and outputs rank-correlated
    python benchmarks/table1_stream.py --rank-corr 0.2 --all            # with the 25 generated points: 35

Runs the 30 tasks of experiments/NAME.toml (both policies, 3 seeds; default testbed-traces, the
artifact's streams of Table 1), with the draws of input and output
rank-correlated for this process only, and prints benchmarks/fig11_compare.py's comparison with
Fig. 11 (--all: with the 25 generated points as results/paper-sample-path stores them, so 35 points;
--per-point: every point's ratios).

Why: our fits draw input and output independently. The artifact's BurstGPT requests are real
(input, output) rows of its file (osdi24ae benchmarks-repo/benchmark_throughput.py:863-878), whose
correlation Table 1 does not give; its ShareGPT lengths are zipped out of step after the first
conversation it drops (:837-861, 1006), i.e. independent, as ours. `--rank-corr R` reorders the
two draws by a Gaussian copula of correlation R (marginals unchanged). A sensitivity, not a model:
R is not known, so no value is adopted. Not a test: 1-2 min on 2 shared cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
from fig11_compare import mean_rows, means, report

from llumverify.sim import workload
from llumverify.study.experiment import load_experiment
from llumverify.study.sweep import run_tasks, tasks

ROOT = Path(__file__).resolve().parents[1]


def rank_correlated(rank_corr: float) -> None:
    """Reorder the Table-1 families' (input, output) draws in this process (and the forked workers)."""
    independent = workload.sample_lengths

    def sample_lengths(n: int, lengths: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        prompt, output = independent(n, lengths, rng)
        if lengths in workload.TABLE1 or lengths in workload.AE_TAILS:
            z = rng.standard_normal((2, n))
            z_out = rank_corr * z[0] + math.sqrt(1 - rank_corr**2) * z[1]
            prompt = np.sort(prompt)[np.argsort(np.argsort(z[0]))]
            output = np.sort(output)[np.argsort(np.argsort(z_out))]
        return prompt, output

    workload.sample_lengths = sample_lengths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default="testbed-traces", help="experiments/NAME.toml (default testbed-traces)")
    parser.add_argument("--rank-corr", type=float, default=0.0, help="rank correlation of input and output, in [0, 1)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--per-point", action="store_true")
    parser.add_argument("--all", action="store_true",
                        help="report all 35 points: the 25 generated ones as results/paper-sample-path stores them")
    args = parser.parse_args()
    if not 0 <= args.rank_corr < 1:
        raise SystemExit(f"table1_stream.py: --rank-corr must be in [0, 1), got {args.rank_corr}")
    path = ROOT / "experiments" / f"{args.sweep}.toml"
    if not path.is_file():
        raise SystemExit(f"table1_stream.py: no experiment file {path}")
    if args.rank_corr:
        rank_correlated(args.rank_corr)
    todo = [dataclasses.replace(t, keep_timeseries=False) for t in tasks(load_experiment(path))]
    results = run_tasks(todo, jobs=args.jobs, progress=sys.stderr.isatty())
    rows = [{"workload": r.task.point.workload.name, "rate": r.task.point.workload.rate, "policy": r.task.policy,
             **r.summary} for r in results]
    ours = mean_rows(rows)
    if args.all:
        ours.update(means([ROOT / "results" / "paper-sample-path" / "results.csv"]))
    print(f"{args.sweep}: input and output rank correlation {args.rank_corr:g}")
    report(ours, args.per_point)


if __name__ == "__main__":
    main()
