"""Is a miss of Fig. 11 a property of the point or of its one sample path? Other paths, same process.

    python benchmarks/fig11_paths.py                          # the generated points whose ordering differs
    python benchmarks/fig11_paths.py --points S-S:36 M-M:7.4 --seeds 1 2 3 4 5 6 7 8 9 10

The paper's numbers are one sample path per point (the artifact reseeds with 0xCADE). Near a knee,
which of least-loaded and llumnix has the lower P99 TTFT can hang on one burst, so one path cannot
say whether a disagreement is the model's. This runs each point of experiments/paper-sample-path.toml
(testbed profile, the artifact's draw order) on OTHER paths of the same process (other seeds of the
artifact's stream), both policies, and prints per seed the two P99s and how often llumnix is lower,
then the range of each policy's preemption loss over the paths against the paper's value (is the
paper's inside what the model gives on other paths?). Default points: those where
results/paper-sample-path/results.csv orders the P99s unlike Fig. 11.
About 5 s a run (2 idle cores, --jobs 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

from fig11_compare import PAPER, means

from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment
from llumverify.study.sweep import run_tasks, tasks

ROOT = Path(__file__).resolve().parents[1]
SWEEP = "paper-sample-path"


def point(text: str) -> tuple[str, float]:
    """WORKLOAD:RATE -> (workload, rate)."""
    wl, sep, rate = text.partition(":")
    try:
        return wl, float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WORKLOAD:RATE (e.g. M-M:7.4), got {text!r}") from None


def differing() -> list[tuple[str, float]]:
    """The generated points where the stored sweep orders the P99s unlike Fig. 11."""
    ours = means([ROOT / "results" / SWEEP / "results.csv"])
    col = "ttft_p99_s"
    return [(wl, rate) for wl, rate in PAPER if (wl, rate, "llumnix") in ours and (wl, rate, "least-loaded") in ours
            and (ours[wl, rate, "llumnix"][col] < ours[wl, rate, "least-loaded"][col])
            != (PAPER[wl, rate][col][1] < PAPER[wl, rate][col][0])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", type=point, help="WORKLOAD:RATE (default: where the ordering differs)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5], help="seeds of the artifact's stream")
    parser.add_argument("--jobs", type=int, default=2, help="local processes (default 2)")
    args = parser.parse_args()
    wanted = args.points or differing()
    try:
        exp = load_experiment(ROOT / "experiments" / f"{SWEEP}.toml")
        todo = [dataclasses.replace(task, seed=seed, keep_timeseries=False) for task in tasks(exp)
                if (task.point.workload.name, task.point.workload.rate) in wanted for seed in args.seeds]
        missing = set(wanted) - {(t.point.workload.name, t.point.workload.rate) for t in todo}
        if missing:
            raise UserError(f"not a point of experiments/{SWEEP}.toml: "
                            f"{', '.join(f'{wl}:{rate:g}' for wl, rate in sorted(missing))}")
        results = run_tasks(todo, jobs=args.jobs, progress=sys.stderr.isatty())
    except UserError as exc:
        raise SystemExit(f"fig11_paths.py: {exc}") from None
    runs = {(r.task.point.workload.name, r.task.point.workload.rate, r.task.policy, r.task.seed): r.summary
            for r in results}
    p99 = {key: float(summary["ttft_p99_s"]) for key, summary in runs.items()}  # type: ignore[arg-type]
    for wl, rate in wanted:
        paper_ll, paper_llumnix = PAPER[wl, rate]["ttft_p99_s"]
        lower = sum(p99[wl, rate, "llumnix", s] < p99[wl, rate, "least-loaded", s] for s in args.seeds)
        cells = " | ".join(f"seed {s} {p99[wl, rate, 'least-loaded', s]:.3g} / {p99[wl, rate, 'llumnix', s]:.3g}"
                           for s in args.seeds)
        print(f"{wl} {rate:g} (paper {paper_ll:g} / {paper_llumnix:g} s): llumnix lower on {lower} of "
              f"{len(args.seeds)} other paths | least-loaded / llumnix P99 TTFT, s: {cells}")
        for policy, i in (("least-loaded", 0), ("llumnix", 1)):
            losses = sorted(float(runs[wl, rate, policy, s]["preemption_loss_s"]) for s in args.seeds)  # type: ignore[arg-type]
            paper = PAPER[wl, rate]["preemption_loss_s"][i]
            where = "inside" if losses[0] <= paper <= losses[-1] else "below" if paper < losses[0] else "above"
            print(f"    {policy} preemption loss over the paths {losses[0]:.4f} .. {losses[-1]:.4f} s "
                  f"(median {statistics.median(losses):.4f}); paper {paper:g} s: {where} that range")


if __name__ == "__main__":
    main()
